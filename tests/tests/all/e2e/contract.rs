//! Contract 1.0 over the `ruststream` binary: a component that exports only `handle` (plain
//! `wit-bindgen`, no SDK) runs the seed's settlement table on the local servers, and `check`
//! says which form each component is called in.

use std::process::Command;

use ruststream_kinesis::LeaseStore;
use ruststream_kinesis::kinesis::ReadMode;
use ruststream_tests::fixture::{Fixture, WAIT};
use ruststream_tests::wait::poll_for;
use ruststream_tests::{binary, guests};
use serde_json::json;

async fn a_handle_only_component_runs_the_seed_table_through_the_binary(
    read: ReadMode,
) -> anyhow::Result<()> {
    let fixture = Fixture::builder("contract")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    let read = match read {
        ReadMode::Polling => "polling",
        ReadMode::FanOut => "fan-out",
    };
    let tenants = fixture.tenants(&format!(
        "[[tenants]]\nname = \"plain\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n\
         read = \"{read}\"\n",
        guests::SETTLEMENT_PLAIN.path().display(),
    ))?;
    let host = fixture
        .host(&tenants)
        .dynamo_leases()
        .owner("contract-host")
        .args(&["--checkpoint-interval", "200ms"])
        .start()?;
    let table = "ruststream-plain-ledger";
    let key = fixture
        .wait_for_lease(table, "ledger", "contract-host")
        .await?;
    host.wait_for_log("reading shard", 1).await?;

    // The seed's table: booked, retired, held (a refund), booked behind the hold.
    let entries = [(1, 5), (2, 0), (3, -3), (4, 9)];
    let sequences = fixture
        .put_all(
            "ledger",
            entries.map(|(id, amount)| json!({ "id": id, "amount": amount })),
        )
        .await?;
    host.wait_until(WAIT, "two bookings and a hold", |text| {
        text.matches("booked").count() >= 2 && text.contains("cannot requeue")
    })
    .await?;
    let store = fixture.lease_store(table).await;
    let checkpointed = poll_for(WAIT, async || {
        let row = store.read(&key).await.ok()??;
        (row.checkpoint.as_deref() == Some(sequences[1].as_str())).then_some(())
    })
    .await;
    assert!(
        checkpointed.is_some(),
        "the checkpoint passes the dropped entry and stops at the refund: {}",
        host.output()
    );

    let text = host.stop().await?;
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
        Some(
            "calls: handle (one record per call), inside the component by the host's adapter, in its own memory"
        ),
        "{text}"
    );
    Ok(())
}

in_both_read_modes!(a_handle_only_component_runs_the_seed_table_through_the_binary);
