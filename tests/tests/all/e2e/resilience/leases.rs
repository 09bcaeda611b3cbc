//! Leases: a host that lost its lease stops before its next call, a lease store that stops
//! answering costs the lease within its duration, the final checkpoint is flushed before the
//! lease goes, and balancing hands leases over without a record handled twice.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ruststream_kinesis::{DynamoLeaseStore, LeaseStore, lease::LeaseKey, runner::ShardState};
use ruststream_tests::e2e::{
    Servers, TestHost, dynamo_store, put_json, put_json_batch, put_witnessed, quick_config,
    take_over, wait_for_sequences_across,
};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::guests;
use ruststream_tests::wait::eventually;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// Servers with the pacer's two streams, `paced` with `shards` shards.
/// Explicit hash keys, one on each of four shards.
const SHARD_KEYS: [&str; 4] = [
    "0",
    "100000000000000000000000000000000000000",
    "200000000000000000000000000000000000000",
    "300000000000000000000000000000000000000",
];

async fn pacer_servers(shards: i32, table: &str) -> anyhow::Result<Servers> {
    let servers = Servers::start("paced", shards, table).await?;
    servers.kinesis.create_stream("singly", 1).await?;
    Ok(servers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_stops_before_its_next_call_once_its_lease_is_lost() -> anyhow::Result<()> {
    let servers = pacer_servers(1, "ruststream-lost").await?;
    let (client, store) = (&servers.client, &servers.store);
    let host = TestHost::new(client.clone(), "host-a")?;
    let app = host.run(guests::PACER, store.clone(), 2).await?;
    // Five records in one read, handed to the component one call each, 800 ms apiece.
    let steps: Vec<_> = (1..=5)
        .map(|id| json!({"id": id, "sleep_ms": 800}))
        .collect();
    put_json_batch(client, "singly", &steps).await?;
    host.deliveries.wait_for(1, WAIT).await?;

    let rows = store.list().await?;
    let row = rows
        .iter()
        .find(|r| r.key.starts_with("singly:"))
        .expect("the lease row");
    let key = LeaseKey::new("singly", row.key.trim_start_matches("singly:"));
    take_over(store.as_ref(), &key, "host-b", WAIT).await?;
    let lost = app
        .wait_for(WAIT, |s| s.iter().any(|s| s.count(&ShardState::Lost) == 1))
        .await;
    assert!(lost, "{:#?}", app.status());
    // `Lost` is the state a shard's worker leaves behind when it has ended (the call in flight
    // finished, no next one begun): a host calling on after the loss would reach it only after
    // its last record, and by then all five would be handled.
    let handled = host.deliveries.len();
    assert!(
        handled < 5,
        "{handled} of 5 records handled after the lease was lost"
    );
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_stops_at_its_next_record_once_the_lease_is_lost() -> anyhow::Result<()> {
    let servers = pacer_servers(1, "ruststream-lost-call").await?;
    let (client, store) = (&servers.client, &servers.store);
    let host = TestHost::new(client.clone(), "host-a")?;
    let app = host.run(guests::PACER, store.clone(), 2).await?;
    // Thirty slow but healthy records in one call, 400 ms apiece: with per-record deadlines
    // the call would go on for 12 s whatever happens to the lease.
    let steps: Vec<_> = (1..=30)
        .map(|id| json!({"id": id, "sleep_ms": 400}))
        .collect();
    put_json_batch(client, "paced", &steps).await?;
    let paced = || {
        host.log
            .captured()
            .iter()
            .filter(|l| l.message == "paced")
            .count()
    };
    assert!(eventually(WAIT, || paced() >= 2).await, "the call started");

    let rows = store.list().await?;
    let row = rows
        .iter()
        .find(|r| r.key.starts_with("paced:"))
        .expect("the lease row");
    let key = LeaseKey::new("paced", row.key.trim_start_matches("paced:"));
    take_over(store.as_ref(), &key, "host-b", WAIT).await?;
    let lost = app
        .wait_for(WAIT, |s| s.iter().any(|s| s.count(&ShardState::Lost) == 1))
        .await;
    assert!(lost, "{:#?}", app.status());
    let at_loss = paced();
    let stopped = eventually(WAIT, || {
        host.log
            .captured()
            .iter()
            .any(|l| l.message.contains("lease was lost during a call"))
    })
    .await;
    assert!(stopped, "the call was never stopped");
    let after = paced() - at_loss;
    assert!(
        after <= 1,
        "{after} records started after the loss was known"
    );
    let settled = host.deliveries.len();
    assert!(
        settled < 30,
        "the call ran to its end: {settled} records settled"
    );
    let stored = store.read(&key).await?.and_then(|row| row.checkpoint);
    assert_eq!(
        stored.as_deref(),
        row.checkpoint.as_deref(),
        "nothing stored once the lease was lost"
    );
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_store_that_stops_answering_costs_the_lease_within_its_duration()
-> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-unused").await?;
    let faults = Faults::new();
    let dynamo = faults.dynamo_client(&servers.dynamo.endpoint()).await;
    let store = dynamo_store(dynamo, "ruststream-hung").await?;
    let client = &servers.client;
    let host = TestHost::new(client.clone(), "host-a")?;
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    put_json(client, "ledger", &json!({"id": 1, "amount": 1}), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;

    // Every write from now on hangs: renewals never come back.
    faults.inject(&["UpdateItem"], 1_000, Fault::hang());
    let hung = Instant::now();
    let lost = app
        .wait_for(WAIT, |s| s[0].count(&ShardState::Lost) == 1)
        .await;
    assert!(lost, "{:#?}", app.status());
    let ttl = quick_config("host-a").lease_ttl;
    assert!(
        hung.elapsed() < ttl,
        "lost after {:?}, the lease lives {ttl:?}",
        hung.elapsed()
    );
    // Handled by a witness beside it: a reader still polling would have had it too.
    put_witnessed(
        client,
        guests::SETTLEMENT,
        "ledger",
        &json!({"id": 2, "amount": 2}),
    )
    .await?;
    assert_eq!(
        host.deliveries.len(),
        1,
        "nothing delivered once the lease is lost"
    );
    faults.clear_faults();
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_checkpoint_is_flushed_with_retries_before_the_lease_is_released()
-> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-unused").await?;
    let faults = Faults::new();
    let dynamo = faults.dynamo_client(&servers.dynamo.endpoint()).await;
    let store: std::sync::Arc<DynamoLeaseStore> = dynamo_store(dynamo, "ruststream-flush").await?;
    let client = &servers.client;
    // Checkpoints are written at most once a minute: the last ones wait for the final flush.
    // The lease outlives the retried flush by far (each try is several SDK attempts with
    // backoff): past its `lost_after` the host rightly stops writing, and a loaded machine must
    // not get there.
    let mut config = quick_config("host-a");
    config.checkpoint_interval = Duration::from_secs(60);
    config.lease_ttl = Duration::from_secs(30);
    config.renew_interval = Duration::from_secs(2);
    config.shutdown_grace = Duration::from_secs(30);
    let host = TestHost::with_config(client.clone(), config)?;
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (shard, first) = put_json(client, "ledger", &json!({"id": 1, "amount": 1}), None).await?;
    let key = LeaseKey::new("ledger", &shard);
    let flushed_first = ruststream_tests::wait::eventually_async(WAIT, async || {
        let row = store.read(&key).await.ok().flatten();
        row.and_then(|r| r.checkpoint).as_deref() == Some(first.as_str())
    })
    .await;
    assert!(flushed_first);
    put_json(client, "ledger", &json!({"id": 2, "amount": 2}), None).await?;
    let (_, last) = put_json(client, "ledger", &json!({"id": 3, "amount": 3}), None).await?;
    host.deliveries.wait_for(3, WAIT).await?;

    // The final flush fails twice over (the SDK tries each call three times) before it lands.
    faults.inject(&["UpdateItem"], 5, Fault::internal_failure());
    app.shutdown().await;
    let row = store.read(&key).await?.expect("the lease row");
    assert_eq!(
        row.checkpoint.as_deref(),
        Some(last.as_str()),
        "flushed in the end"
    );
    assert_eq!(row.owner, None, "released once flushed");
    assert_eq!(faults.pending_faults(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balancing_hands_leases_over_without_a_record_handled_twice() -> anyhow::Result<()> {
    let servers = pacer_servers(4, "ruststream-handoff").await?;
    let (client, store) = (&servers.client, &servers.store);
    let first = TestHost::new(client.clone(), "host-a")?;
    let a = first.run(guests::PACER, store.clone(), 5).await?;

    // Records flow without pause, each taking 20 ms, while a second host joins.
    let producer = {
        let client = client.clone();
        tokio::spawn(async move {
            for round in 0..40u64 {
                let steps: Vec<_> = (0..10)
                    .map(|n| json!({"id": round * 10 + n, "sleep_ms": 20}))
                    .collect();
                put_json_batch(&client, "paced", &steps).await?;
                // The producer's pace, not a wait.
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            anyhow::Ok(())
        })
    };
    let paced = |host: &TestHost| {
        let all = host.deliveries.all().into_iter();
        all.filter(|r| r.stream == "paced").count()
    };
    // The second host joins once records flow through the first.
    let flowing = eventually(WAIT, || paced(&first) >= 20).await;
    assert!(flowing, "{} paced records handled", paced(&first));
    let second = TestHost::new(client.clone(), "host-b")?;
    let b = second.host.start(ruststream_kinesis::Deployment::new(
        second.load(guests::PACER).await?,
        store.clone(),
    ))?;
    producer.await??;
    let all = eventually(WAIT, || paced(&first) + paced(&second) >= 400).await;
    assert!(all, "{} + {} of 400", paced(&first), paced(&second));
    // A marker on each shard, handled by whichever host reads it: a record handled twice
    // would have been delivered before its shard's marker.
    let mut markers = Vec::new();
    for (n, key) in (0..).zip(SHARD_KEYS) {
        let marker = json!({"id": 1_000 + n, "quiet": true});
        markers.push(put_json(client, "paced", &marker, Some(key)).await?.1);
    }
    wait_for_sequences_across(&[&first.deliveries, &second.deliveries], &markers, WAIT).await?;

    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for report in first
        .deliveries
        .all()
        .into_iter()
        .chain(second.deliveries.all())
    {
        if report.stream == "paced" {
            *times.entry(report.sequence_number).or_default() += 1;
        }
    }
    let twice: Vec<_> = times.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "handled twice: {twice:?}");
    assert_eq!(times.len(), 400 + SHARD_KEYS.len());
    assert!(
        paced(&second) > 0,
        "the second host took its share: a {:#?}\nb {:#?}",
        a.status(),
        b.status()
    );
    let handed = a.status()[0].count(&ShardState::HandedOver("host-b".into()));
    assert!(handed >= 1, "{:#?}", a.status());
    a.shutdown().await;
    b.shutdown().await;
    Ok(())
}
