//! Stored positions the stream gave, and stored positions nobody can attribute: a shard opened
//! at the tip pins its first record's sequence number before delivering it (not the host's
//! clock), and rows keyed by a bare shard id (`ruststream-kinesis` 0.6) are refused until they
//! are migrated.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use ruststream_kinesis::{
    Deployment, LeaseStore,
    lease::{LeaseError, LeaseKey},
    runner::ShardState,
};
use ruststream_runtime::{Clock, Outcome, SystemClock};
use ruststream_tests::e2e::{Servers, TestHost, put_json, put_witnessed, stored_checkpoint};
use ruststream_tests::guests;
use ruststream_tests::skew::kinesis_client_ahead;
use ruststream_tests::wait::eventually;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
/// How far ahead of Kinesis the host's clock runs.
const AHEAD: Duration = Duration::from_secs(5);

/// The system clock, `AHEAD` later.
struct ClockAhead;

impl Clock for ClockAhead {
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms() + AHEAD.as_millis() as u64
    }
}

/// A host whose clock runs `AHEAD` of the stream's.
async fn host_ahead(servers: &Servers, owner: &str) -> anyhow::Result<TestHost> {
    let client = kinesis_client_ahead(&servers.kinesis.endpoint(), AHEAD).await;
    let mut host = TestHost::new(client, owner)?;
    host.host = host.host.with_clock(Arc::new(ClockAhead));
    Ok(host)
}

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({"id": id, "amount": amount})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_first_record_is_read_again_after_a_restart_when_the_clock_runs_ahead()
-> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-pin-ahead").await?;
    let (client, store) = (&servers.client, &servers.store);
    let first = host_ahead(&servers, "host-a").await?;
    let app = first.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let shard = ruststream_kinesis::kinesis::list_shards(client, "ledger").await?[0]
        .shard_id
        .clone();
    // Opened at the tip, nothing read yet: pinned provisionally at the open time.
    let provisional = stored_checkpoint(store.as_ref(), "ledger", &shard).await?;
    assert!(
        provisional
            .as_deref()
            .is_some_and(|p| p.starts_with("AT_TIMESTAMP:")),
        "{provisional:?}"
    );

    // The first record is held, so nothing is ever checkpointed past it.
    let (_, refund) = put_json(client, "ledger", &entry(1, -5), None).await?;
    let (_, booked) = put_json(client, "ledger", &entry(2, 5), None).await?;
    let outcomes: Vec<Outcome> = first
        .deliveries
        .wait_for(2, WAIT)
        .await?
        .iter()
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, [Outcome::Retry, Outcome::Ack]);
    assert_eq!(
        stored_checkpoint(store.as_ref(), "ledger", &shard).await?,
        Some(format!("AT_SEQUENCE:{refund}")),
        "pinned at the first record, before it was delivered"
    );
    app.shutdown().await;

    // Restarted (its clock still ahead), the shard opens at that record, not at the tip.
    let second = host_ahead(&servers, "host-b").await?;
    let app = second.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let again = second.deliveries.wait_for(2, WAIT).await?;
    let sequences: Vec<&str> = again.iter().map(|r| r.sequence_number.as_str()).collect();
    assert_eq!(sequences, [refund.as_str(), booked.as_str()]);
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_rows_are_refused_until_migrated() -> anyhow::Result<()> {
    const TABLE: &str = "ruststream-legacy";
    let servers = Servers::start("ledger", 1, TABLE).await?;
    let (client, store) = (&servers.client, servers.store.clone());
    // A 0.6 service read up to `handled` and wrote its checkpoint under the bare shard id;
    // `waiting` came after it, before this host started.
    let (shard, handled) = put_json(client, "ledger", &entry(1, 1), None).await?;
    let (_, waiting) = put_json(client, "ledger", &entry(2, 2), None).await?;
    let dynamo = servers.dynamo.client().await;
    let legacy_row = |owner: Option<&str>, expiry_ms: u64| {
        let mut put = dynamo
            .put_item()
            .table_name(TABLE)
            .item("lease_key", AttributeValue::S(shard.clone()))
            .item("checkpoint", AttributeValue::S(handled.clone()))
            .item("lease_counter", AttributeValue::N("7".into()))
            .item("lease_expiry", AttributeValue::N(expiry_ms.to_string()));
        if let Some(owner) = owner {
            put = put.item("lease_owner", AttributeValue::S(owner.to_owned()));
        }
        put.send()
    };
    legacy_row(Some("native-0.6"), 1_000).await?;

    let host = TestHost::new(client.clone(), "host-a")?;
    let component = host.load(guests::SETTLEMENT).await?;
    let app = host.host.start(Deployment::new(component, store.clone()))?;
    let refused = app
        .wait_for(WAIT, |s| {
            s[0].error.as_ref().is_some_and(|e| e.contains(TABLE))
        })
        .await;
    assert!(refused, "{:#?}", app.status());
    let error = app.status()[0].error.clone().unwrap_or_default();
    assert!(
        error.contains(&format!("`{shard}`")),
        "names the row: {error}"
    );
    assert!(
        error.contains("adopt_legacy_rows"),
        "names the migration: {error}"
    );
    // Handled by a witness beside it: a reader of the refused subscription would have had it.
    let later = put_witnessed(client, guests::SETTLEMENT, "ledger", &entry(3, 3)).await?;
    assert!(host.deliveries.is_empty(), "nothing read while refused");
    let key = LeaseKey::new("ledger", &shard);
    assert_eq!(store.read(&key).await?, None, "no lease taken");

    // A 0.6 service still holding its row is not migrated from under it.
    legacy_row(Some("native-0.6"), SystemClock.now_ms() + 60_000).await?;
    let held = store.adopt_legacy_rows("ledger").await;
    assert!(
        matches!(held, Err(LeaseError::LegacyRowHeld { .. })),
        "{held:?}"
    );

    // Stopped, it is migrated, and the host reads on from the 0.6 checkpoint.
    legacy_row(None, 1_000).await?;
    assert_eq!(
        store.adopt_legacy_rows("ledger").await?,
        vec![shard.clone()]
    );
    let read_on = eventually(WAIT, || host.deliveries.len() >= 2).await;
    assert!(read_on, "{:#?}", app.status());
    let delivered: Vec<String> = host
        .deliveries
        .all()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    assert_eq!(delivered, [waiting, later], "from the 0.6 checkpoint on");
    assert_eq!(app.status()[0].error, None, "no longer refused");
    assert_eq!(app.status()[0].count(&ShardState::Reading), 1);
    app.shutdown().await;
    Ok(())
}
