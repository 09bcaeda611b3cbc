//! Tests of the client: POSITION parsing, URLs and path segments, and every request over real
//! HTTP on loopback against the admin server with the fake host.

use std::sync::Arc;

use hyper::StatusCode;

use super::*;
use crate::admin::fake::{FakeControl, SHARDS, TENANT, sample_status};
use crate::admin::serve;
use crate::http_server::HttpServer;

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
        "http://127.0.0.1:9465"
    );
    assert_eq!(
        base_url("http://[::1]:1/admin").expect("ok"),
        "http://[::1]:1/admin"
    );
    for (url, needle) in [
        ("https://127.0.0.1:9465", "no TLS"),
        ("127.0.0.1:9465", "give http://"),
        ("http://x/?a=b", "query"),
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

async fn started() -> (Arc<FakeControl>, HttpServer, AdminClient) {
    let fake = Arc::new(FakeControl::default());
    let addr = "127.0.0.1:0".parse().expect("an address");
    let server = serve(addr, false, fake.clone()).await.expect("a free port");
    let client = AdminClient::new(&format!("http://{}", server.local_addr())).expect("a URL");
    (fake, server, client)
}

#[tokio::test]
async fn every_request_over_loopback() {
    let (fake, server, client) = started().await;

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
    let asked = fake.deploys.lock().unwrap().clone();
    assert_eq!(asked, [(TENANT.to_owned(), "ledger".to_owned(), 8)]);

    let reloaded = client.reload().await.expect("a reload");
    assert_eq!(reloaded.len(), 1);
    let back = client.rollback(TENANT, "ledger").await.expect("a rollback");
    assert_eq!(back.version, "0.1.0");

    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn refusals_over_loopback_are_one_line_errors() {
    let (_fake, server, client) = started().await;

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
        .rollback(TENANT, "fresh")
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
    let (_fake, server, client) = started().await;
    server.shutdown().await.expect("a clean stop");
    let error = client.status().await.expect_err("nothing listens");
    assert!(matches!(error, ClientError::Connect { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("cannot reach the admin API at http://127.0.0.1:")
    );
}
