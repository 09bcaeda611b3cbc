//! The `ruststream` binary end to end: tenants from a config file, local servers, and a
//! graceful stop on SIGTERM (calls finished, checkpoint flushed, lease released).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ruststream_host::lease::{DynamoLeaseStore, LeaseKey, LeaseStore};
use ruststream_tests::e2e::put_json;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use serde_json::json;

/// The binary cargo built beside this test (`cargo test --workspace` builds it for the host
/// crate's own CLI tests).
fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let binary = dir.join("ruststream");
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p ruststream-host`",
        binary.display()
    );
    binary
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_tenants_and_stops_gracefully_on_sigterm() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    kinesis.create_stream("secrets", 1).await?;
    let client = kinesis.client().await;

    let dir = std::env::temp_dir().join(format!("ruststream-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("ruststream.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            lease_store = "dynamodb"
            create_lease_table = true

            [[tenants]]
            name = "good"
            components = ["{settlement}"]
            subscribe = ["ledger"]

            [[tenants]]
            name = "evil"
            components = ["{snoop}"]
            subscribe = ["hostile"]
            "#,
            settlement = ruststream_tests::component("settlement").display(),
            snoop = ruststream_tests::component("hostile-subscribe").display(),
        ),
    )?;
    let log = dir.join("ruststream.log");
    let child = Command::new(binary())
        .args(["run", "--config"])
        .arg(&config)
        .args(["--kinesis-endpoint", &kinesis.endpoint()])
        .args(["--dynamodb-endpoint", &dynamo.endpoint()])
        .args(["--region", "us-east-1", "--owner-id", "binary-host"])
        .args([
            "--poll-interval-ms",
            "200",
            "--checkpoint-interval-ms",
            "200",
        ])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut running = Running(child);

    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-good-ledger");
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    // Records put once the shard is open at the tip are read.
    let (shard, key) = wait_for_lease(&store, &output).await?;
    for _ in 0..300 {
        if output().contains("reading shard") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(output().contains("reading shard"), "{}", output());
    let (_, sequence) = put_json(&client, "ledger", &json!({"id": 1, "amount": 5}), None).await?;
    for _ in 0..200 {
        if output().contains("booked") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(output().contains("booked"), "{}", output());

    let status = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()?;
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || running.0.wait()).await??;
    assert!(exit.success(), "exit {exit:?}: {}", output());

    let row = store.read(&key).await?.expect("the lease row");
    assert_eq!(
        row.checkpoint.as_deref(),
        Some(sequence.as_str()),
        "flushed on shutdown"
    );
    assert_eq!(row.owner, None, "released on shutdown ({shard})");
    let text = output();
    assert!(
        text.contains("tenant `evil`") && text.contains("secrets"),
        "the refusal names tenant and stream: {text}"
    );
    Ok(())
}

async fn wait_for_lease(
    store: &DynamoLeaseStore,
    output: &impl Fn() -> String,
) -> anyhow::Result<(String, LeaseKey)> {
    for _ in 0..300 {
        if let Ok(rows) = store.list().await
            && let Some(row) = rows
                .into_iter()
                .find(|r| r.owner.as_deref() == Some("binary-host"))
        {
            let shard = row.key.trim_start_matches("ledger:").to_owned();
            let key = LeaseKey::new("ledger", &shard);
            return Ok((shard, key));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the binary never took the lease: {}", output())
}
