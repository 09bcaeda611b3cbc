//! Dead letters worth reading, through the binary: `ruststream put` writes a refund the
//! tenant never books, the host dead-letters it after its attempts (two counted copies), and
//! `ruststream tail` shows the dead letter with its origin (the last copy, and the original
//! it started as) and the producer's own headers. And the operator's
//! settings in the tenants file winning over what the component declares.

use std::process::Command;
use std::time::Duration;

use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::http::AdminApi;
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::wait::poll_for;
use ruststream_tests::{binary, guests};
use serde_json::Value;

/// `ruststream VERB ARGS` against `kinesis`: whether it succeeded, and its stdout.
fn ruststream(kinesis: &LocalKinesis, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
    let out = Command::new(binary())
        .args(args)
        .args([
            "--kinesis-endpoint",
            &kinesis.endpoint(),
            "--region",
            "us-east-1",
        ])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A host running the tenants file `config` (TOML), once `shards` shards are read.
async fn start_host(fixture: &Fixture, config: &str, shards: usize) -> anyhow::Result<BinaryHost> {
    let host = fixture.host(&fixture.tenants(config)?).start()?;
    host.wait_for_log("reading shard", shards).await?;
    Ok(host)
}

/// The first record of `stream` as `ruststream tail` shows it, once there is one.
async fn first_record(fixture: &Fixture, host: &BinaryHost, stream: &str) -> anyhow::Result<Value> {
    let first = poll_for(Duration::from_secs(60), async || {
        let (ok, text, _) = ruststream(&fixture.kinesis, &["tail", stream]).ok()?;
        let line = text.lines().next().filter(|_| ok)?;
        serde_json::from_str(line).ok()
    })
    .await;
    first.ok_or_else(|| anyhow::anyhow!("nothing in `{stream}`: {}", host.output()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_carries_its_origin_and_tail_shows_it() -> anyhow::Result<()> {
    let fixture = Fixture::builder("dead")
        .stream("refunds", 1)
        .stream("refunds.dead", 1)
        .stream("payouts", 1)
        .stream("audit", 1)
        .start()
        .await?;
    let kinesis = &fixture.kinesis;
    let config = format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\nsubscribe = [\"refunds\", \"payouts\", \"audit\"]\npublish = [\"refunds.dead\"]\n",
        guests::SETTLEMENT_RETRIES.path().display()
    );
    let host = start_host(&fixture, &config, 3).await?;

    // A payout that is fine, and a refund `reconcile` retries until its 3 attempts are spent.
    let (ok, written, error) = ruststream(
        kinesis,
        &[
            "put",
            "refunds",
            r#"{"id": 9, "amount": -5}"#,
            "--key",
            "customer-9",
            "--header",
            "trace=abc",
        ],
    )?;
    assert!(ok, "{error}");
    let (shard, sequence) = written
        .split_once(' ')
        .map(|(s, q)| (s.to_owned(), q.trim().to_owned()))
        .ok_or_else(|| anyhow::anyhow!("put printed no position: {written}"))?;

    let dead = first_record(&fixture, &host, "refunds.dead").await?;
    assert_eq!(dead["payload"]["id"], 9, "{dead}");
    assert_eq!(dead["partition_key"], "customer-9", "{dead}");
    assert_eq!(dead["headers"]["trace"], "abc", "{dead}");
    let origin = &dead["dead_letter"];
    assert_eq!(origin["stream"], "refunds", "{dead}");
    assert_eq!(origin["shard"], shard.as_str(), "{dead}");
    assert_eq!(origin["subscriber"], "reconcile", "{dead}");
    assert_eq!(origin["tenant"], "acme", "{dead}");
    assert_eq!(origin["attempts"], 3, "{dead}");
    assert_eq!(origin["reason"], "attempts-exhausted", "{dead}");
    // The last attempt was the second copy, so its sequence is not the original's.
    assert!(
        origin["sequence"].as_str().is_some_and(|s| s != sequence),
        "{dead}"
    );

    // `tail` of the source stream shows the original and its two counted copies.
    let (ok, text, error) = ruststream(kinesis, &["tail", "refunds"])?;
    assert!(ok, "{error}");
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["sequence"], sequence.as_str());
    assert_eq!(lines[2]["retry_count"], 2, "{text}");
    // The dead letter names the copy its last attempt was made on, and the original record
    // the chain of two copies started from: its shard, sequence number and arrival.
    assert_eq!(origin["sequence"], lines[2]["sequence"], "{dead}\n{text}");
    let first = &origin["first"];
    assert_eq!(first["shard"], shard.as_str(), "{dead}");
    assert_eq!(first["sequence"], sequence.as_str(), "{dead}");
    assert_eq!(
        first["arrival_ms"], lines[0]["arrival_ms"],
        "{dead}\n{text}"
    );
    assert!(first["arrival_ms"].as_u64().is_some(), "{dead}");
    // Bad input is refused before anything is written.
    let (ok, _, error) = ruststream(kinesis, &["put", "refunds", "{not json"])?;
    assert!(!ok && error.contains("record 1 is not JSON"), "{error}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_settings_win_over_the_components() -> anyhow::Result<()> {
    let fixture = Fixture::builder("operator")
        .stream("refunds", 1)
        .stream("refunds.dead", 1)
        .stream("refunds.ops", 1)
        .stream("payouts", 1)
        .stream("audit", 1)
        .start()
        .await?;
    let kinesis = &fixture.kinesis;
    // Written before the host starts: read only because the operator says `trim_horizon`.
    let (ok, _, error) = ruststream(kinesis, &["put", "refunds", r#"{"id": 4, "amount": -1}"#])?;
    assert!(ok, "{error}");
    let config = format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{}"]
        subscribe = ["refunds", "payouts", "audit"]
        publish = ["refunds.dead", "refunds.ops"]
        starting_position = "trim_horizon"
        maximum_retry_attempts = 1
        on_failure = "refunds.ops"
        [tenants.subscriptions.pay_out]
        enabled = false
        "#,
        guests::SETTLEMENT_RETRIES.path().display()
    );
    let host = start_host(&fixture, &config, 2).await?;

    // The component's three attempts lowered to two (one retry); its dead letter redirected.
    let dead = first_record(&fixture, &host, "refunds.ops").await?;
    assert_eq!(dead["payload"]["id"], 4, "{dead}");
    assert_eq!(dead["dead_letter"]["attempts"], 2, "{dead}");
    let (_, declared, _) = ruststream(kinesis, &["tail", "refunds.dead"])?;
    assert_eq!(
        declared.trim(),
        "",
        "the component's dead-letter stream stays empty"
    );
    // `pay_out` is disabled: its stream is never read; the others are.
    let text = host.output();
    assert!(text.contains("subscriber=reconcile"), "{text}");
    assert!(text.contains("subscriber=audit"), "{text}");
    let read = |name: &str| {
        text.lines()
            .any(|l| l.contains("reading shard") && l.contains(&format!("subscriber={name}")))
    };
    assert!(read("reconcile") && read("audit"), "{text}");
    assert!(!read("pay_out"), "{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_past_its_maximum_age_moves_a_held_shard_on() -> anyhow::Result<()> {
    let fixture = Fixture::builder("max-age")
        .stream("ledger", 1)
        .stream("ledger.dead", 1)
        .start()
        .await?;
    let kinesis = &fixture.kinesis;
    // The seed's `book` holds every refund; the operator gives a hold three seconds.
    let config = format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{}"]
        subscribe = ["ledger"]
        publish = ["ledger.dead"]
        maximum_record_age = "3s"
        on_failure = "ledger.dead"
        "#,
        guests::SETTLEMENT.path().display()
    );
    let host = start_host(&fixture, &config, 1).await?;
    let entries = [r#"{"id": 1, "amount": -5}"#, r#"{"id": 2, "amount": 7}"#];
    let (ok, written, error) = ruststream(kinesis, &[&["put", "ledger"][..], &entries].concat())?;
    assert!(ok, "{error}");
    let last = written
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("put printed no position: {written}"))?;

    // Held at first, then given up on with a dead letter that says why.
    let dead = first_record(&fixture, &host, "ledger.dead").await?;
    assert_eq!(dead["payload"]["id"], 1, "{dead}");
    assert_eq!(
        dead["dead_letter"]["reason"], "record-age-exceeded",
        "{dead}"
    );
    assert_eq!(dead["dead_letter"]["subscriber"], "book", "{dead}");
    let text = host.output();
    assert!(
        text.contains("retry requested"),
        "it was held first: {text}"
    );
    assert!(
        text.contains("older than the maximum record age of 3s"),
        "{text}"
    );

    // The checkpoint passes the refund: the shard is no longer held.
    let addr = host.admin_addr().await?;
    let admin = AdminApi::new(&addr, &host.state_dir())?;
    let moved = poll_for(Duration::from_secs(30), async || {
        let (_, body) = admin.call("GET", "/v1/status", None, b"").ok()?;
        let status: Value = serde_json::from_str(&body).ok()?;
        let shard = status
            .pointer("/tenants/0/apps/0/subscriptions/0/shards/0")?
            .clone();
        (shard["checkpoint"] == last.as_str() && shard["held_at"].is_null()).then_some(shard)
    })
    .await;
    assert!(
        moved.is_some(),
        "the checkpoint never passed the refund: {text}"
    );
    Ok(())
}
