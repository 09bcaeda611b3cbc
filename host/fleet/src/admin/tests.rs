//! Tests of the routes over the fake host, without a socket: each route's status code and body
//! shape, the JSON errors for bad bodies, unknown names and routes, and oversized uploads, and
//! every check of the guard (Host, token, content type, upload size and concurrency).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use ruststream_common::sync::lock;

use super::AuditLog;
use super::allowed_hosts::AllowedHosts;
use super::fake::{FakeControl, REDRIVES, SHARDS, TENANT, sample_status};
use super::guard::Guard;
use super::model::{HostStatus, SeekPosition};
use super::routes::router;

/// The component size limit in these tests: small, so the 413 test sends little.
const LIMIT: usize = 1024;
/// The token the tests' guard wants.
const TOKEN: &str = "test-token-0123456789abcdef0123456789";
/// The address the tests' API listens on, and so the `Host` they send.
const HOST: &str = "127.0.0.1:9465";

fn guard() -> Arc<Guard> {
    let token = test_token(TOKEN);
    let hosts = AllowedHosts::new(HOST.parse().expect("an address"), false, Vec::new());
    Arc::new(Guard::new(token, hosts, LIMIT))
}

/// A token with this text.
pub(crate) use super::fake::test_token;

fn app(fake: &Arc<FakeControl>) -> Router {
    router(fake.clone(), guard(), Arc::new(AuditLog::new("test", None)))
}

/// A request as the verbs send it: Host, token, and the route's content type.
fn request(method: Method, uri: &str, body: impl Into<Body>) -> Request<Body> {
    let content_type = match method {
        Method::PUT => Some("application/wasm"),
        Method::POST => Some("application/json"),
        _ => None,
    };
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder.body(body.into()).expect("a valid test request")
}

async fn send(router: Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.oneshot(request).await.expect("routers never fail");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body in memory");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

async fn call(
    fake: &Arc<FakeControl>,
    method: Method,
    uri: &str,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    send(app(fake), request(method, uri, body)).await
}

/// Asserts an error answer: `status` and `{"error": ...}` containing `needle`.
fn assert_error(answer: &(StatusCode, Value), status: StatusCode, needle: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    let message = answer.1["error"].as_str().expect("an error message");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    assert_eq!(
        answer.1.as_object().map(|o| o.len()),
        Some(1),
        "{}",
        answer.1
    );
}

#[tokio::test]
async fn healthz_is_ok() {
    let fake = Arc::default();
    let answer = call(&fake, Method::GET, "/healthz", Body::empty()).await;
    assert_eq!(answer, (StatusCode::OK, json!({"status": "ok"})));
}

#[tokio::test]
async fn readyz_says_why_not() {
    let fake = Arc::new(FakeControl::default());
    let ready = call(&fake, Method::GET, "/readyz", Body::empty()).await;
    assert_eq!(ready, (StatusCode::OK, json!({"ready": true})));

    *lock(&fake.not_ready) = vec!["tenant `acme` is loading".to_owned()];
    let answer = call(&fake, Method::GET, "/readyz", Body::empty()).await;
    let expected = json!({"ready": false, "reasons": ["tenant `acme` is loading"]});
    assert_eq!(answer, (StatusCode::SERVICE_UNAVAILABLE, expected));
}

#[tokio::test]
async fn status_is_the_host_status() {
    let fake = Arc::default();
    let (status, body) = call(&fake, Method::GET, "/v1/status", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    let parsed: HostStatus = serde_json::from_value(body.clone()).expect("a HostStatus");
    assert_eq!(parsed, sample_status());
    let shard = &body["tenants"][0]["apps"][0]["subscriptions"][0]["shards"][0];
    assert_eq!(shard["outcomes"]["retry_after"], json!(0));
    assert_eq!(shard["held_since_ms"], json!(1_000_000));
}

const SEEK: &str = "/v1/tenants/acme/apps/ledger/subscriptions/book/seek";

#[tokio::test]
async fn seek_moves_shards() {
    let fake = Arc::new(FakeControl::default());
    let answer = call(&fake, Method::POST, SEEK, r#"{"at":"horizon"}"#).await;
    assert_eq!(answer, (StatusCode::OK, json!({"moved": SHARDS})));

    let body = json!({"at": "sequence", "shard": SHARDS[1], "sequence": "4961"}).to_string();
    let answer = call(&fake, Method::POST, SEEK, body).await;
    assert_eq!(answer, (StatusCode::OK, json!({"moved": [SHARDS[1]]})));

    let answer = call(&fake, Method::POST, SEEK, r#"{"at":"timestamp","ms":5}"#).await;
    assert_eq!(answer.0, StatusCode::OK);
    let seeks = lock(&fake.seeks).clone();
    assert_eq!(seeks.last(), Some(&SeekPosition::Timestamp { ms: 5 }));
}

#[tokio::test]
async fn seek_errors_are_json() {
    let fake = Arc::default();
    let bad = call(&fake, Method::POST, SEEK, "{not json").await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "not the expected JSON");
    let unknown_at = call(&fake, Method::POST, SEEK, r#"{"at":"yesterday"}"#).await;
    assert_error(&unknown_at, StatusCode::BAD_REQUEST, "yesterday");
    let missing = call(&fake, Method::POST, SEEK, r#"{"at":"timestamp"}"#).await;
    assert_error(&missing, StatusCode::BAD_REQUEST, "ms");

    let uri = "/v1/tenants/acme/apps/ledger/subscriptions/nobody/seek";
    let answer = call(&fake, Method::POST, uri, r#"{"at":"latest"}"#).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no subscriber `nobody`");
    let uri = "/v1/tenants/acme/apps/nothing/subscriptions/book/seek";
    let answer = call(&fake, Method::POST, uri, r#"{"at":"latest"}"#).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no app `nothing`");
    let body = r#"{"at":"sequence","shard":"shardId-9","sequence":"1"}"#;
    let answer = call(&fake, Method::POST, SEEK, body).await;
    assert_error(&answer, StatusCode::CONFLICT, "cannot seek");
}

#[tokio::test]
async fn pause_and_resume() {
    let fake = Arc::new(FakeControl::default());
    let answer = call(&fake, Method::POST, "/v1/tenants/acme/pause", Body::empty()).await;
    assert_eq!(
        answer,
        (StatusCode::OK, json!({"tenant": TENANT, "paused": true}))
    );
    assert!(*lock(&fake.paused));
    let answer = call(
        &fake,
        Method::POST,
        "/v1/tenants/acme/resume",
        Body::empty(),
    )
    .await;
    assert_eq!(
        answer,
        (StatusCode::OK, json!({"tenant": TENANT, "paused": false}))
    );
    assert!(!*lock(&fake.paused));
}

#[tokio::test]
async fn unknown_tenant_is_404_with_the_name_escaped() {
    let fake = Arc::default();
    let answer = call(&fake, Method::POST, "/v1/tenants/bob/pause", Body::empty()).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no tenant `bob`");
    let answer = call(
        &fake,
        Method::POST,
        "/v1/tenants/a%1Bb/resume",
        Body::empty(),
    )
    .await;
    assert_error(&answer, StatusCode::NOT_FOUND, r"no tenant `a\u{1b}b`");
}

#[tokio::test]
async fn deploy_loads_a_component() {
    let fake = Arc::new(FakeControl::default());
    let uri = "/v1/tenants/acme/components/ledger";
    let (status, body) = call(&fake, Method::PUT, uri, &b"\0asm\x0d\0\x01\0"[..]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["app"], json!("ledger"));
    assert_eq!(body["swapped"], json!(true));
    assert_eq!(body["tenant"], json!(TENANT));
    let deploys = lock(&fake.deploys).clone();
    assert_eq!(deploys, [(TENANT.to_owned(), "ledger".to_owned(), 8)]);

    let uri = "/v1/tenants/acme/components/brand-new";
    let (status, body) = call(&fake, Method::PUT, uri, &b"\0asm"[..]).await;
    assert_eq!((status, &body["swapped"]), (StatusCode::OK, &json!(false)));
}

#[tokio::test]
async fn deploy_refusals() {
    let fake = Arc::default();
    let uri = "/v1/tenants/acme/components/ledger";
    let refused = call(&fake, Method::PUT, uri, "hello").await;
    assert_error(
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "not a WebAssembly",
    );
    let empty = call(&fake, Method::PUT, uri, Body::empty()).await;
    assert_error(&empty, StatusCode::BAD_REQUEST, "empty");
    let big = call(&fake, Method::PUT, uri, vec![0; LIMIT + 1]).await;
    assert_error(
        &big,
        StatusCode::PAYLOAD_TOO_LARGE,
        "more than the 1024 bytes",
    );
    let at_limit = call(&fake, Method::PUT, uri, vec![0; LIMIT]).await;
    assert_eq!(at_limit.0, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown = call(&fake, Method::PUT, "/v1/tenants/bob/components/x", "\0asm").await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no tenant");
}

#[tokio::test]
async fn undeploy_stops_only_uploaded_components() {
    let fake = Arc::default();
    let uri = "/v1/tenants/acme/components/fresh";
    let (status, body) = call(&fake, Method::DELETE, uri, Body::empty()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"tenant": "acme", "component": "fresh", "app": "fresh"})
    );
    let uri = "/v1/tenants/acme/components/ledger";
    let listed = call(&fake, Method::DELETE, uri, Body::empty()).await;
    assert_error(&listed, StatusCode::CONFLICT, "listed in the tenants file");
    let uri = "/v1/tenants/acme/components/ghost";
    let unknown = call(&fake, Method::DELETE, uri, Body::empty()).await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "runs no component `ghost`");
}

#[tokio::test]
async fn reload_lists_what_loaded() {
    let fake = Arc::new(FakeControl::default());
    let (status, body) = call(&fake, Method::POST, "/v1/reload", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["version"], json!("0.2.1"));
    assert_eq!(body.as_array().map(Vec::len), Some(1));

    *lock(&fake.bad_config) = true;
    let refused = call(&fake, Method::POST, "/v1/reload", Body::empty()).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "tenants file");
}

#[tokio::test]
async fn rollback() {
    let fake = Arc::default();
    let uri = "/v1/tenants/acme/apps/ledger/rollback";
    let (status, body) = call(&fake, Method::POST, uri, Body::empty()).await;
    assert_eq!(
        (status, &body["version"]),
        (StatusCode::OK, &json!("0.1.0"))
    );
    let uri = "/v1/tenants/acme/apps/fresh/rollback";
    let nothing = call(&fake, Method::POST, uri, Body::empty()).await;
    assert_error(&nothing, StatusCode::CONFLICT, "no previous version");
    let uri = "/v1/tenants/acme/apps/ghost/rollback";
    let unknown = call(&fake, Method::POST, uri, Body::empty()).await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no app `ghost`");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json() {
    let fake = Arc::default();
    let missing = call(&fake, Method::GET, "/v2/everything", Body::empty()).await;
    assert_error(&missing, StatusCode::NOT_FOUND, "no route /v2/everything");
    let wrong = call(&fake, Method::GET, "/v1/reload", Body::empty()).await;
    assert_error(&wrong, StatusCode::METHOD_NOT_ALLOWED, "GET");
}

fn options(addr: &str) -> super::AdminOptions {
    super::AdminOptions {
        addr: addr.parse().expect("an address"),
        allow_remote: false,
        tls: None,
        token: test_token(TOKEN),
        hosts: Vec::new(),
        max_upload: LIMIT,
        audit: AuditLog::new("test", None),
        tenant_tokens: None,
    }
}

/// The test certificate and key of `tests/fixtures/admin-tls`.
pub(crate) fn test_tls(key: &str) -> super::TlsFiles {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/admin-tls");
    super::TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join(key),
    }
}

#[tokio::test]
async fn serve_refuses_a_remote_address_unless_allowed_with_tls() {
    let fake = Arc::new(FakeControl::default());
    let remote = options("0.0.0.0:0");
    let error = super::serve(remote.clone(), fake.clone())
        .await
        .expect_err("a non-loopback address is refused");
    assert!(format!("{error:#}").contains("0.0.0.0:0"), "{error:#}");
    let without_tls = super::AdminOptions {
        allow_remote: true,
        ..remote.clone()
    };
    let error = super::serve(without_tls.clone(), fake.clone())
        .await
        .expect_err("remote admin without TLS is refused");
    assert!(
        error.to_string().contains("--allow-remote-admin needs TLS"),
        "{error}"
    );
    let wrong_key = super::AdminOptions {
        tls: Some(test_tls("other-key.pem")),
        ..without_tls.clone()
    };
    let error = super::serve(wrong_key, fake.clone())
        .await
        .expect_err("not its key");
    assert!(
        error.to_string().contains("cannot be used together"),
        "{error}"
    );
    let missing = super::AdminOptions {
        tls: Some(test_tls("none.pem")),
        ..without_tls.clone()
    };
    let error = super::serve(missing, fake.clone())
        .await
        .expect_err("no key file");
    assert!(error.to_string().contains("none.pem"), "{error}");
    // Loopback here: a test listens on nothing else.
    let with_tls = super::AdminOptions {
        addr: "127.0.0.1:0".parse().expect("an address"),
        tls: Some(test_tls("key.pem")),
        ..without_tls
    };
    let server = super::serve(with_tls, fake).await.expect("allowed");
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn serve_names_an_address_it_cannot_bind() {
    let fake = Arc::new(FakeControl::default());
    let first = super::serve(options("127.0.0.1:0"), fake.clone())
        .await
        .expect("a free port");
    let taken = first.local_addr();
    let error = super::serve(options(&taken.to_string()), fake)
        .await
        .expect_err("the port is taken");
    assert!(
        format!("{error:#}").contains(&taken.to_string()),
        "{error:#}"
    );
    first.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn versions_and_rollback_to() {
    let fake = Arc::default();
    let (status, body) = call(
        &fake,
        Method::GET,
        "/v1/tenants/acme/apps/ledger/versions",
        Body::empty(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["versions"][0]["came_by"], json!("upload"));
    assert_eq!(body["versions"][0]["live"], json!(true));
    assert_eq!(body["versions"].as_array().map(Vec::len), Some(3));
    let uri = "/v1/tenants/acme/apps/ledger/rollback";
    let (status, body) = call(&fake, Method::POST, uri, r#"{"to":"0.0.9"}"#).await;
    assert_eq!(
        (status, &body["version"]),
        (StatusCode::OK, &json!("0.0.9")),
        "{body}"
    );
    let unknown = call(&fake, Method::POST, uri, r#"{"to":"ffff"}"#).await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "keeps no version `ffff`");
    let typo = call(&fake, Method::POST, uri, r#"{"too":"ffff"}"#).await;
    assert_error(&typo, StatusCode::BAD_REQUEST, "unknown field `too`");
    let (status, body) = call(&fake, Method::POST, uri, "{}").await;
    assert_eq!(
        (status, &body["version"]),
        (StatusCode::OK, &json!("0.1.0")),
        "{body}"
    );
}

/// A request body that never ends: an upload still under way.
struct Endless;

impl HttpBody for Endless {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        Poll::Pending
    }
}

#[tokio::test]
async fn the_guard_says_which_check_failed() {
    let fake = Arc::new(FakeControl::default());
    let router = app(&fake);
    let status_of = |mut request: Request<Body>, edit: &dyn Fn(&mut Request<Body>)| {
        edit(&mut request);
        send(router.clone(), request)
    };
    let get = || request(Method::GET, "/v1/status", Body::empty());
    type Edit = Box<dyn Fn(&mut Request<Body>)>;
    let cases: Vec<(Edit, StatusCode, &str)> = vec![
        (
            Box::new(|r| {
                r.headers_mut().remove(header::AUTHORIZATION);
            }),
            StatusCode::UNAUTHORIZED,
            "no admin token",
        ),
        (
            Box::new(|r| {
                r.headers_mut().insert(
                    header::AUTHORIZATION,
                    format!("Bearer {TOKEN}x").parse().expect(""),
                );
            }),
            StatusCode::UNAUTHORIZED,
            "wrong admin token",
        ),
        (
            Box::new(|r| {
                r.headers_mut().insert(
                    header::AUTHORIZATION,
                    format!("Basic {TOKEN}").parse().expect(""),
                );
            }),
            StatusCode::UNAUTHORIZED,
            "not `Bearer TOKEN`",
        ),
        (
            Box::new(|r| {
                r.headers_mut()
                    .insert(header::HOST, "rebind.example:9465".parse().expect(""));
            }),
            StatusCode::MISDIRECTED_REQUEST,
            "DNS rebinding",
        ),
        (
            Box::new(|r| {
                r.headers_mut().remove(header::HOST);
            }),
            StatusCode::MISDIRECTED_REQUEST,
            "no Host header",
        ),
    ];
    for (edit, status, needle) in &cases {
        let answer = status_of(get(), edit.as_ref()).await;
        assert_error(&answer, *status, needle);
    }
    // The probes need no token, but the right Host.
    let mut probe = request(Method::GET, "/readyz", Body::empty());
    probe.headers_mut().remove(header::AUTHORIZATION);
    assert_eq!(send(router.clone(), probe).await.0, StatusCode::OK);
    let mut probe = request(Method::GET, "/healthz", Body::empty());
    probe
        .headers_mut()
        .insert(header::HOST, "rebind.example:9465".parse().expect(""));
    assert_eq!(
        send(router.clone(), probe).await.0,
        StatusCode::MISDIRECTED_REQUEST
    );
    // An unknown route is no way around the token.
    let mut unknown = request(Method::GET, "/v2/anything", Body::empty());
    unknown.headers_mut().remove(header::AUTHORIZATION);
    assert_eq!(
        send(router.clone(), unknown).await.0,
        StatusCode::UNAUTHORIZED
    );

    // A text body (a CORS "simple" request) is refused on every route that takes one.
    for (method, uri, wanted) in [
        (Method::POST, "/v1/tenants/acme/pause", "application/json"),
        (Method::POST, SEEK, "application/json"),
        (
            Method::PUT,
            "/v1/tenants/acme/components/ledger",
            "application/wasm",
        ),
    ] {
        let mut text = request(method.clone(), uri, r#"{"at":"latest"}"#);
        text.headers_mut()
            .insert(header::CONTENT_TYPE, "text/plain".parse().expect(""));
        let answer = send(router.clone(), text).await;
        assert_error(
            &answer,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!("Content-Type `text/plain` is refused here: send `{wanted}`"),
        );
        let mut untyped = request(method, uri, "x");
        untyped.headers_mut().remove(header::CONTENT_TYPE);
        untyped
            .headers_mut()
            .insert(header::CONTENT_LENGTH, "1".parse().expect(""));
        let answer = send(router.clone(), untyped).await;
        assert_error(
            &answer,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "has no Content-Type",
        );
    }
    let mut charset = request(Method::POST, SEEK, r#"{"at":"latest"}"#);
    charset.headers_mut().insert(
        header::CONTENT_TYPE,
        "Application/JSON; charset=utf-8".parse().expect(""),
    );
    assert_eq!(send(router.clone(), charset).await.0, StatusCode::OK);
    assert!(
        lock(&fake.deploys).is_empty(),
        "nothing refused reached the host"
    );
}

#[tokio::test]
async fn uploads_are_bounded_before_reading_and_one_at_a_time() {
    let fake = Arc::new(FakeControl::default());
    let router = app(&fake);
    let uri = "/v1/tenants/acme/components/ledger";
    // Refused by its length alone: the body never comes, and is never waited for.
    let mut declared = request(Method::PUT, uri, Body::new(Endless));
    declared.headers_mut().insert(
        header::CONTENT_LENGTH,
        (LIMIT + 1).to_string().parse().expect(""),
    );
    let answer = send(router.clone(), declared).await;
    assert_error(
        &answer,
        StatusCode::PAYLOAD_TOO_LARGE,
        "is 1025 bytes, more than the 1024",
    );

    // An upload under way holds the one upload slot until it is answered.
    let mut first = Box::pin(
        router
            .clone()
            .oneshot(request(Method::PUT, uri, Body::new(Endless))),
    );
    tokio::select! {
        biased;
        _ = &mut first => panic!("an endless upload was answered"),
        () = std::future::ready(()) => {}
    }
    let second = send(router.clone(), request(Method::PUT, uri, &b"\0asm"[..])).await;
    assert_error(
        &second,
        StatusCode::TOO_MANY_REQUESTS,
        "another upload is in progress",
    );
    drop(first);
    let third = send(router, request(Method::PUT, uri, &b"\0asm"[..])).await;
    assert_eq!(third.0, StatusCode::OK, "{}", third.1);
    assert_eq!(
        lock(&fake.deploys).len(),
        1,
        "only the third reached the host"
    );
}

#[tokio::test]
async fn an_upload_that_stalls_lets_the_slot_go() {
    let fake = Arc::new(FakeControl::default());
    let guard = Arc::into_inner(guard()).expect("one owner");
    let guard = Arc::new(guard.with_upload_time(std::time::Duration::from_millis(50)));
    let router = router(fake.clone(), guard, Arc::new(AuditLog::new("test", None)));
    let uri = "/v1/tenants/acme/components/ledger";
    let stalled = send(
        router.clone(),
        request(Method::PUT, uri, Body::new(Endless)),
    )
    .await;
    assert_error(
        &stalled,
        StatusCode::REQUEST_TIMEOUT,
        "the upload did not arrive within 50ms: send it again",
    );
    let next = send(router, request(Method::PUT, uri, &b"\0asm"[..])).await;
    assert_eq!(next.0, StatusCode::OK, "{}", next.1);
}

#[tokio::test]
async fn every_change_a_known_caller_asks_for_is_audited_and_read_back() {
    let dir = crate::state::tests::scratch("admin-audit");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let audit = Arc::new(AuditLog::new(
        "host-a",
        Some(crate::state::audit::AuditFile::new(&dir)),
    ));
    let fake = Arc::new(FakeControl::default());
    let api = || router(fake.clone(), guard(), audit.clone());
    let paused = send(api(), request(Method::POST, "/v1/tenants/acme/pause", "")).await;
    assert_eq!(paused.0, StatusCode::OK, "{}", paused.1);
    let seek = "/v1/tenants/acme/apps/ledger/subscriptions/nobody/seek";
    let body = r#"{"at":"horizon"}"#;
    let refused = send(api(), request(Method::POST, seek, body)).await;
    assert_eq!(refused.0, StatusCode::NOT_FOUND, "{}", refused.1);
    // Neither a read nor a request the guard refused before it knew the caller.
    send(api(), request(Method::GET, "/v1/status", Body::empty())).await;
    let anonymous = Request::builder()
        .method(Method::POST)
        .uri("/v1/tenants/acme/resume")
        .header(header::HOST, HOST)
        .body(Body::empty())
        .expect("a request");
    assert_eq!(send(api(), anonymous).await.0, StatusCode::UNAUTHORIZED);

    let (status, list) = send(api(), request(Method::GET, "/v1/audit", Body::empty())).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let entries = list["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{list}");
    let pause = &entries[0];
    assert_eq!(
        (
            &pause["host"],
            &pause["token"],
            &pause["tenant"],
            &pause["action"]
        ),
        (
            &json!("host-a"),
            &json!("operator"),
            &json!("acme"),
            &json!("pause")
        )
    );
    assert_eq!(
        (&pause["result"], &pause["status"]),
        (&json!("ok"), &json!(200))
    );
    assert_eq!(pause["answer"], json!({"tenant": "acme", "paused": true}));
    let seek = &entries[1];
    assert_eq!(
        (
            &seek["action"],
            &seek["target"],
            &seek["result"],
            &seek["status"]
        ),
        (
            &json!("seek"),
            &json!("ledger/nobody"),
            &json!("refused"),
            &json!(404)
        )
    );
    assert_eq!(seek["request"], json!({"at": "horizon"}));
    assert!(
        seek["error"].as_str().is_some_and(|e| e.contains("nobody")),
        "{seek}"
    );
    assert_eq!(
        list["kept_in"],
        json!(dir.join("audit.jsonl").display().to_string())
    );

    // Of another tenant: none.
    let other = "/v1/audit?tenant=other";
    let (_, none) = send(api(), request(Method::GET, other, Body::empty())).await;
    assert_eq!(none["entries"], json!([]), "{none}");
}

#[tokio::test]
async fn a_tenant_token_reaches_its_tenant_only_until_it_is_revoked() {
    let dir = crate::state::tests::scratch("admin-tenant-tokens");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let store: Arc<dyn crate::tokens::TokenStore> = Arc::new(crate::tokens::FileTokens::new(&dir));
    let guard = Arc::into_inner(guard()).expect("one owner");
    let guard = Arc::new(guard.with_tenant_tokens(store));
    let audit = Arc::new(AuditLog::new(
        "host-a",
        Some(crate::state::audit::AuditFile::new(&dir)),
    ));
    let fake = Arc::new(FakeControl::default());
    let api = || router(fake.clone(), guard.clone(), audit.clone());
    let as_holder = |token: &str, method: Method, uri: &str, body: &'static str| {
        let mut request = request(method, uri, body);
        let bearer = format!("Bearer {token}").parse().expect("a header value");
        request.headers_mut().insert(header::AUTHORIZATION, bearer);
        request
    };

    let made = send(
        api(),
        request(
            Method::POST,
            "/v1/tokens",
            r#"{"tenant":"acme","name":"ci"}"#,
        ),
    )
    .await;
    assert_eq!(made.0, StatusCode::OK, "{}", made.1);
    let token = made.1["token"].as_str().expect("the token").to_owned();
    let id = made.1["id"].as_str().expect("its id").to_owned();
    let unknown = send(
        api(),
        request(Method::POST, "/v1/tokens", r#"{"tenant":"nobody"}"#),
    )
    .await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no tenant `nobody`");

    // Its tenant: yes.
    let paused = send(
        api(),
        as_holder(&token, Method::POST, "/v1/tenants/acme/pause", ""),
    )
    .await;
    assert_eq!(paused.0, StatusCode::OK, "{}", paused.1);
    let (status, seen) = send(api(), as_holder(&token, Method::GET, "/v1/status", "")).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = (seen["tenants"].as_array().expect("tenants").iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["acme"], "{seen}");
    // Another tenant, and what is the operator's: a 403 naming the tenant it belongs to.
    let other = send(
        api(),
        as_holder(&token, Method::POST, "/v1/tenants/other/pause", ""),
    )
    .await;
    assert_error(&other, StatusCode::FORBIDDEN, "belongs to tenant `acme`");
    for (method, uri) in [(Method::POST, "/v1/reload"), (Method::GET, "/v1/tokens")] {
        let refused = send(api(), as_holder(&token, method, uri, "")).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "is the operator's");
    }
    let redrive = r#"{"stream":"dead","tenant":"other"}"#;
    let refused = send(
        api(),
        as_holder(&token, Method::POST, "/v1/redrives", redrive),
    )
    .await;
    assert_error(
        &refused,
        StatusCode::FORBIDDEN,
        "redrives that tenant's dead letters only",
    );
    // The redrives and the recent errors: its tenant's, whatever it asks for; another's
    // redrive is not even said to exist.
    let (_, listed) = send(api(), as_holder(&token, Method::GET, "/v1/redrives", "")).await;
    assert_eq!(
        listed["redrives"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["redrives"][0]["id"], REDRIVES[0], "{listed}");
    let redrive = async |id: &str| {
        let uri = format!("/v1/redrives/{id}");
        send(api(), as_holder(&token, Method::GET, &uri, "")).await
    };
    let own = redrive(REDRIVES[0]).await;
    assert_eq!(own.0, StatusCode::OK, "{}", own.1);
    let theirs = redrive(REDRIVES[1]).await;
    assert_error(
        &theirs,
        StatusCode::NOT_FOUND,
        "sees that tenant's redrives only",
    );
    let (_, all) = send(api(), request(Method::GET, "/v1/redrives", Body::empty())).await;
    assert_eq!(all["redrives"].as_array().map(Vec::len), Some(2), "{all}");
    let (_, errors) = send(
        api(),
        as_holder(&token, Method::GET, "/v1/errors?tenant=other", ""),
    )
    .await;
    let tenants: Vec<&Value> = (errors["errors"].as_array().into_iter().flatten())
        .map(|e| &e["tenant"])
        .collect();
    assert_eq!(tenants, [&json!("acme")], "{errors}");
    let (_, errors) = send(api(), request(Method::GET, "/v1/errors", Body::empty())).await;
    assert_eq!(
        errors["errors"].as_array().map(Vec::len),
        Some(3),
        "{errors}"
    );
    // Its audit trail: its tenant's entries whatever it asks for (the token made for it, its
    // pause), and never the token itself.
    let (_, trail) = send(
        api(),
        as_holder(&token, Method::GET, "/v1/audit?tenant=other", ""),
    )
    .await;
    let entries = trail["entries"].as_array().expect("entries");
    let actions: Vec<(&str, &str)> = (entries.iter())
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("?"),
                e["token"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [("token-create", "operator"), ("pause", id.as_str())],
        "{trail}"
    );
    assert!(entries.iter().all(|e| e["tenant"] == "acme"), "{trail}");
    assert!(
        !trail.to_string().contains(&token),
        "the token is kept nowhere: {trail}"
    );
    let kept = std::fs::read_to_string(dir.join("audit.jsonl")).expect("the audit file");
    assert!(!kept.contains(&token), "{kept}");

    let revoked = send(
        api(),
        request(Method::DELETE, &format!("/v1/tokens/{id}"), Body::empty()),
    )
    .await;
    assert_eq!(revoked.0, StatusCode::OK, "{}", revoked.1);
    let after = send(api(), as_holder(&token, Method::GET, "/v1/status", "")).await;
    assert_error(&after, StatusCode::UNAUTHORIZED, "unknown or was revoked");
}

/// The console's pages: served without a token, under a strict policy, never cached.
#[tokio::test]
async fn the_console_is_served_under_a_strict_policy() {
    let fake = Arc::new(FakeControl::default());
    for (uri, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let request = Request::builder()
            .uri(uri)
            .header(header::HOST, HOST)
            .body(Body::empty())
            .expect("a request");
        let response = app(&fake)
            .oneshot(request)
            .await
            .expect("routers never fail");
        assert_eq!(response.status(), StatusCode::OK, "{uri}");
        let value = |name: header::HeaderName| {
            (response.headers().get(name))
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(value(header::CONTENT_TYPE).starts_with(kind), "{uri}");
        let policy = value(header::CONTENT_SECURITY_POLICY);
        assert!(
            policy.contains("script-src 'self'") && !policy.contains("unsafe"),
            "{policy}"
        );
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert_eq!(value(header::CACHE_CONTROL), "no-store");
    }
    let page = include_str!("console/assets/index.html");
    assert!(
        !page.contains("<script>") && !page.contains("style="),
        "nothing inline"
    );
}

/// Signing in opens a session carried by an HttpOnly, SameSite=Strict cookie; a read in it
/// needs nothing more, a change needs its CSRF token, and a page of another origin gets
/// nothing done with it.
#[tokio::test]
async fn a_console_session_reads_and_changes_only_with_its_csrf_token() {
    let fake = Arc::new(FakeControl::default());
    let router = app(&fake);
    let post = |uri: &str, body: &'static str, headers: &[(&str, &str)]| {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::HOST, HOST)
            .header(header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::from(body)).expect("a request")
    };
    let wrong = send(
        router.clone(),
        post("/ui/session", r#"{"token":"nope"}"#, &[]),
    )
    .await;
    assert_error(&wrong, StatusCode::UNAUTHORIZED, "wrong admin token");
    let body = format!(r#"{{"token":"{TOKEN}"}}"#);
    let request = Request::builder()
        .method(Method::POST)
        .uri("/ui/session")
        .header(header::HOST, HOST)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("a request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("routers never fail");
    assert_eq!(response.status(), StatusCode::OK);
    let set_cookie = (response.headers().get(header::SET_COOKIE))
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_owned();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().expect("name=value").to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    let session: Value = serde_json::from_slice(&bytes).expect("JSON");
    let csrf = session["csrf"].as_str().expect("a CSRF token").to_owned();
    assert_eq!(session["token_id"], "operator");
    assert!(
        !String::from_utf8_lossy(&bytes).contains(TOKEN),
        "the token is not sent back"
    );

    let read = Request::builder()
        .uri("/v1/status")
        .header(header::HOST, HOST)
        .header(header::COOKIE, &cookie)
        .body(Body::empty())
        .expect("a request");
    assert_eq!(send(router.clone(), read).await.0, StatusCode::OK);
    let pause = "/v1/tenants/acme/pause";
    let without = send(router.clone(), post(pause, "", &[("cookie", &cookie)])).await;
    assert_error(&without, StatusCode::FORBIDDEN, "CSRF token");
    assert!(!*lock(&fake.paused), "nothing done");
    let foreign = [
        ("cookie", cookie.as_str()),
        ("x-csrf-token", csrf.as_str()),
        ("origin", "http://evil.example"),
    ];
    let from_elsewhere = send(router.clone(), post(pause, "", &foreign)).await;
    assert_eq!(
        from_elsewhere.0,
        StatusCode::FORBIDDEN,
        "{}",
        from_elsewhere.1
    );
    assert!(!*lock(&fake.paused), "nothing done");
    let with = send(
        router.clone(),
        post(pause, "", &[("cookie", &cookie), ("x-csrf-token", &csrf)]),
    )
    .await;
    assert_eq!(with.0, StatusCode::OK, "{}", with.1);
    assert!(*lock(&fake.paused));

    let out = Request::builder()
        .method(Method::DELETE)
        .uri("/ui/session")
        .header(header::HOST, HOST)
        .header(header::COOKIE, &cookie)
        .body(Body::empty())
        .expect("a request");
    assert_eq!(send(router.clone(), out).await.0, StatusCode::OK);
    let again = Request::builder()
        .uri("/v1/status")
        .header(header::HOST, HOST)
        .header(header::COOKIE, &cookie)
        .body(Body::empty())
        .expect("a request");
    assert_error(
        &send(router, again).await,
        StatusCode::UNAUTHORIZED,
        "session was signed out",
    );
}
