//! Tests of the routes over the fake host, without a socket: each route's status code and body
//! shape, and the JSON errors for bad bodies, unknown names and routes, and oversized uploads.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::fake::{FakeControl, SHARDS, TENANT, sample_status};
use super::model::{HostStatus, SeekPosition};
use super::routes::router;

/// The component size limit in these tests: small, so the 413 test sends little.
const LIMIT: usize = 1024;

fn app(fake: &Arc<FakeControl>) -> Router {
    router(fake.clone(), LIMIT)
}

async fn call(
    fake: &Arc<FakeControl>,
    method: Method,
    uri: &str,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(body.into())
        .expect("a valid test request");
    let response = app(fake)
        .oneshot(request)
        .await
        .expect("routers never fail");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body in memory");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
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

    *fake.not_ready.lock().unwrap() = vec!["tenant `acme` is loading".to_owned()];
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
    let seeks = fake.seeks.lock().unwrap().clone();
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
    assert!(*fake.paused.lock().unwrap());
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
    assert!(!*fake.paused.lock().unwrap());
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
    let deploys = fake.deploys.lock().unwrap().clone();
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
    assert_error(&big, StatusCode::PAYLOAD_TOO_LARGE, "length limit");
    let at_limit = call(&fake, Method::PUT, uri, vec![0; LIMIT]).await;
    assert_eq!(at_limit.0, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown = call(&fake, Method::PUT, "/v1/tenants/bob/components/x", "\0asm").await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no tenant");
}

#[tokio::test]
async fn reload_lists_what_loaded() {
    let fake = Arc::new(FakeControl::default());
    let (status, body) = call(&fake, Method::POST, "/v1/reload", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["version"], json!("0.2.1"));
    assert_eq!(body.as_array().map(Vec::len), Some(1));

    *fake.bad_config.lock().unwrap() = true;
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

#[tokio::test]
async fn serve_refuses_a_remote_address_unless_allowed() {
    let fake = Arc::new(FakeControl::default());
    let remote = "0.0.0.0:0".parse().expect("an address");
    let error = super::serve(remote, false, fake.clone())
        .await
        .expect_err("a non-loopback address is refused");
    assert!(format!("{error:#}").contains("0.0.0.0:0"), "{error:#}");
    let server = super::serve(remote, true, fake).await.expect("allowed");
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn serve_names_an_address_it_cannot_bind() {
    let fake = Arc::new(FakeControl::default());
    let first = super::serve(
        "127.0.0.1:0".parse().expect("an address"),
        false,
        fake.clone(),
    )
    .await
    .expect("a free port");
    let taken = first.local_addr();
    let error = super::serve(taken, false, fake)
        .await
        .expect_err("the port is taken");
    assert!(
        format!("{error:#}").contains(&taken.to_string()),
        "{error:#}"
    );
    first.shutdown().await.expect("a clean stop");
}
