//! Tests of the client: POSITION parsing, URLs and path segments, and every request over real
//! HTTP on loopback against the admin server with the fake host.

use hyper::StatusCode;

use ruststream_common::sync::lock;

use super::*;
use ruststream_fleet::admin::fake::{
    FakeAdmin, SHARDS, TENANT, sample_status, test_certificate, test_token,
};

const TOKEN: &str = "client-test-token-0123456789abcdef0123";

#[test]
fn positions() {
    let parse = |input| parse_position(input).expect(input);
    assert_eq!(parse("horizon"), SeekPosition::Horizon);
    assert_eq!(parse("latest"), SeekPosition::Latest);
    assert_eq!(
        parse("at-timestamp:1700000000000"),
        SeekPosition::Timestamp {
            ms: 1_700_000_000_000
        }
    );
    let sequence = SeekPosition::Sequence {
        shard: "shardId-000000000001".to_owned(),
        sequence: "49590338271490256608559692538361571095921575989136588802".to_owned(),
    };
    assert_eq!(
        parse(
            "at-sequence:shardId-000000000001:49590338271490256608559692538361571095921575989136588802"
        ),
        sequence
    );
}

#[test]
fn bad_positions_say_what_is_wrong() {
    let cases = [
        ("", "unknown position"),
        ("Horizon", "unknown position"),
        ("at-timestamp:", "milliseconds"),
        ("at-timestamp:-5", "milliseconds"),
        ("at-sequence:shard", "SHARD:SEQ"),
        ("at-sequence::123", "SHARD is empty"),
        ("at-sequence:shard:", "decimal"),
        ("at-sequence:shard:12a", "decimal"),
        ("\x1b[2J", r"`\u{1b}[2J`"),
    ];
    for (input, needle) in cases {
        let error = parse_position(input).expect_err(input).to_string();
        assert!(error.contains(needle), "{input:?}: {error}");
        assert!(error.contains("at-sequence:SHARD:SEQ"), "{error}");
    }
}

#[test]
fn urls_and_segments() {
    assert_eq!(
        base_url("http://127.0.0.1:9465/").expect("ok"),
        ("http://127.0.0.1:9465".to_owned(), false)
    );
    assert_eq!(
        base_url("http://[::1]:1/admin").expect("ok"),
        ("http://[::1]:1/admin".to_owned(), false)
    );
    assert_eq!(
        base_url("https://admin.example.com:9465").expect("ok"),
        ("https://admin.example.com:9465".to_owned(), true)
    );
    base_url("http://localhost:9465").expect("loopback by name");
    for (url, needle) in [
        ("http://10.0.0.5:9465", "in clear: use https://"),
        ("http://admin.example.com:9465", "in clear"),
        ("127.0.0.1:9465", "give http://"),
        ("http://localhost/?a=b", "query"),
        ("not a url", "not a URL"),
    ] {
        let error = base_url(url).expect_err(url).to_string();
        assert!(error.contains(needle), "{url}: {error}");
    }
    assert_eq!(segment("acme"), "acme");
    assert_eq!(segment("a/b?c d"), "a%2Fb%3Fc%20d");
    assert_eq!(segment("é"), "%C3%A9");
}

#[test]
fn server_errors_keep_the_servers_message() {
    let body = br#"{"error":"no tenant `bob`"}"#;
    let error = answer::<PauseState>("u", StatusCode::NOT_FOUND, body).expect_err("an error");
    assert_eq!(error.to_string(), "no tenant `bob` (404 Not Found)");
    let error = answer::<PauseState>("u", StatusCode::BAD_GATEWAY, b"<html>\x1b").expect_err("");
    assert_eq!(error.to_string(), r"<html>\u{1b} (502 Bad Gateway)");
    let error = answer::<PauseState>("u", StatusCode::OK, b"[]").expect_err("not a PauseState");
    assert!(matches!(error, ClientError::Decode { .. }), "{error}");
}

fn credentials(token: &str) -> Credentials {
    Credentials {
        token: test_token(token),
        token_from: "/where/the/token/was".into(),
        ca: None,
    }
}

async fn started() -> (FakeAdmin, AdminClient) {
    let server = FakeAdmin::serve(TOKEN).await.expect("a free port");
    let url = format!("http://{}", server.local_addr());
    let client = AdminClient::new(&url, credentials(TOKEN)).expect("a URL");
    (server, client)
}

#[tokio::test]
async fn every_request_over_loopback() {
    let (server, client) = started().await;

    assert_eq!(client.status().await.expect("a status"), sample_status());

    let moved = client.seek(TENANT, "ledger", "book", &SeekPosition::Latest);
    assert_eq!(moved.await.expect("a seek"), SHARDS);

    let paused = client.pause(TENANT).await.expect("a pause");
    assert_eq!((paused.tenant.as_str(), paused.paused), (TENANT, true));
    assert!(client.status().await.expect("a status").tenants[0].paused);
    let resumed = client.resume(TENANT).await.expect("a resume");
    assert!(!resumed.paused);

    let deployed = client.deploy(TENANT, "ledger", b"\0asm\x0d\0\x01\0".to_vec());
    let deployed = deployed.await.expect("a deploy");
    assert_eq!((deployed.app.as_str(), deployed.swapped), ("ledger", true));
    let asked = lock(&server.control().deploys).clone();
    assert_eq!(asked, [(TENANT.to_owned(), "ledger".to_owned(), 8)]);

    let gone = client.undeploy(TENANT, "fresh").await.expect("an undeploy");
    assert_eq!(gone.app, "fresh");
    let reloaded = client.reload().await.expect("a reload");
    assert_eq!(reloaded.len(), 1);
    let back = client
        .rollback(TENANT, "ledger", None)
        .await
        .expect("a rollback");
    assert_eq!(back.version, "0.1.0");
    let back = client.rollback(TENANT, "ledger", Some("0.0.9-h")).await;
    assert_eq!(back.expect("a rollback to").version, "0.0.9");
    let kept = client
        .versions(TENANT, "ledger")
        .await
        .expect("the versions");
    assert_eq!(kept.versions.len(), 3);

    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn refusals_over_loopback_are_one_line_errors() {
    let (server, client) = started().await;

    let error = client.pause("bob").await.expect_err("unknown tenant");
    assert_eq!(error.to_string(), "no tenant `bob` (404 Not Found)");
    let error = client
        .deploy(TENANT, "x", b"nope".to_vec())
        .await
        .expect_err("refused");
    let ClientError::Server { status, message } = error else {
        panic!("not a server error: {error}")
    };
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        message,
        "component `x` of tenant `acme` refused: not a WebAssembly component"
    );
    let error = client
        .rollback(TENANT, "fresh", None)
        .await
        .expect_err("nothing to roll back");
    assert!(error.to_string().ends_with("(409 Conflict)"), "{error}");
    // A name with a slash in it stays one path segment, so it reaches the host as typed.
    let error = client.pause("a/b").await.expect_err("unknown tenant");
    assert_eq!(error.to_string(), "no tenant `a/b` (404 Not Found)");

    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn a_host_not_running_is_a_connect_error() {
    let (server, client) = started().await;
    server.shutdown().await.expect("a clean stop");
    let error = client.status().await.expect_err("nothing listens");
    assert!(matches!(error, ClientError::Connect { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("cannot reach the admin API at http://127.0.0.1:")
    );
}

#[tokio::test]
async fn a_refused_token_says_where_it_was_read() {
    let (server, _) = started().await;
    let url = format!("http://{}", server.local_addr());
    let client =
        AdminClient::new(&url, credentials("another-token-0123456789abcdef012345")).expect("a URL");
    let error = client.status().await.expect_err("the wrong token");
    let text = error.to_string();
    assert!(
        text.starts_with("wrong admin token (the token was read from /where/the/token/was"),
        "{text}"
    );
    assert!(text.ends_with("(401 Unauthorized)"), "{text}");
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn https_with_the_hosts_certificate() {
    let server = FakeAdmin::serve_tls(TOKEN).await.expect("a free port");
    let (cert, key) = test_certificate();
    let port = server.local_addr().port();
    let trusting = Credentials {
        ca: Some(cert),
        ..credentials(TOKEN)
    };
    // The certificate names 127.0.0.1 and localhost.
    for host in ["127.0.0.1", "localhost"] {
        let client =
            AdminClient::new(&format!("https://{host}:{port}"), trusting.clone()).expect("a URL");
        assert_eq!(client.status().await.expect("a status"), sample_status());
    }
    let plain =
        AdminClient::new(&format!("http://127.0.0.1:{port}"), trusting.clone()).expect("a URL");
    plain.status().await.expect_err("plain HTTP to a TLS port");
    let not_trusting = Credentials {
        ca: Some(key),
        ..credentials(TOKEN)
    };
    let error = AdminClient::new(&format!("https://127.0.0.1:{port}"), not_trusting)
        .expect_err("a key is no certificate");
    assert!(
        error.to_string().contains("holds no certificate"),
        "{error}"
    );
    server.shutdown().await.expect("a clean stop");
}
