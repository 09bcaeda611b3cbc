//! Contract 1.0 over the `ruststream` binary: a component that exports only `handle` (plain
//! `wit-bindgen`, no SDK) runs the seed's settlement table on the local servers, and `check`
//! says which form each component is called in.

use std::process::Command;
use std::time::Duration;

use ruststream_host::{DynamoLeaseStore, LeaseStore, lease::LeaseKey};
use ruststream_tests::e2e::put_json;
use ruststream_tests::process::run_host;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::{eventually, poll_for};
use ruststream_tests::{binary, guests};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_only_component_runs_the_seed_table_through_the_binary() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let client = kinesis.client().await;
    let dir = std::env::temp_dir().join(format!("ruststream-contract-{}", std::process::id()));
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
            name = "plain"
            components = ["{plain}"]
            subscribe = ["ledger"]
            "#,
            plain = guests::SETTLEMENT_PLAIN.path().display(),
        ),
    )?;
    let log = dir.join("ruststream.log");
    let mut running = run_host(
        &config,
        &kinesis,
        &log,
        &[
            "--dynamodb-endpoint",
            &dynamo.endpoint(),
            "--owner-id",
            "contract-host",
            "--checkpoint-interval-ms",
            "200",
        ],
    )?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-plain-ledger");
    let key = poll_for(Duration::from_secs(30), async || {
        let rows = store.list().await.ok()?;
        let row = rows
            .into_iter()
            .find(|r| r.owner.as_deref() == Some("contract-host"))?;
        let shard = row.key.trim_start_matches("ledger:").to_owned();
        Some(LeaseKey::new("ledger", &shard))
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the binary never took the lease: {}", output()))?;
    let reading = eventually(Duration::from_secs(15), || {
        output().contains("reading shard")
    })
    .await;
    assert!(reading, "{}", output());

    // The seed's table: booked, retired, held (a refund), booked behind the hold.
    let mut sequences = Vec::new();
    for (id, amount) in [(1, 5), (2, 0), (3, -3), (4, 9)] {
        let entry = json!({ "id": id, "amount": amount });
        sequences.push(put_json(&client, "ledger", &entry, None).await?.1);
    }
    let settled = eventually(Duration::from_secs(20), || {
        let text = output();
        text.matches("booked").count() >= 2 && text.contains("cannot requeue")
    })
    .await;
    assert!(settled, "{}", output());
    let checkpointed = poll_for(Duration::from_secs(10), async || {
        let row = store.read(&key).await.ok()??;
        (row.checkpoint.as_deref() == Some(sequences[1].as_str())).then_some(())
    })
    .await;
    assert!(
        checkpointed.is_some(),
        "the checkpoint passes the dropped entry and stops at the refund: {}",
        output()
    );

    let status = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()?;
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || running.0.wait()).await??;
    assert!(exit.success(), "exit {exit:?}: {}", output());

    let text = output();
    let booked: Vec<&str> = text.lines().filter(|l| l.contains("booked")).collect();
    assert_eq!(booked.len(), 2, "{text}");
    assert!(booked[0].contains(&sequences[0]), "{}", booked[0]);
    assert!(booked[1].contains(&sequences[3]), "{}", booked[1]);
    let held = text
        .lines()
        .find(|l| l.contains("cannot requeue"))
        .unwrap_or_default();
    assert!(held.contains(&sequences[2]), "{held}");
    let row = store.read(&key).await?.expect("the lease row");
    assert_eq!(row.checkpoint.as_deref(), Some(sequences[1].as_str()));
    Ok(())
}

#[test]
fn check_says_which_form_a_component_is_called_in() -> anyhow::Result<()> {
    let out = Command::new(binary())
        .arg("check")
        .arg(guests::SETTLEMENT.path())
        .arg(guests::SETTLEMENT_PLAIN.path())
        .arg("--compile-cache")
        .arg(ruststream_tests::compile_cache_dir())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let form_after = |component: &str| {
        let at = lines
            .iter()
            .position(|l| l.starts_with("ok ") && l.contains(component))?;
        lines[at..].iter().find(|l| l.contains("calls: ")).copied()
    };
    assert_eq!(
        form_after("settlement.wasm").map(str::trim),
        Some("calls: handle-batch (batch fast path)"),
        "{text}"
    );
    assert_eq!(
        form_after("settlement_plain.wasm").map(str::trim),
        Some("calls: handle (one record per call)"),
        "{text}"
    );
    Ok(())
}
