//! The real path: compiled components on a local Kinesis server, leases and checkpoints in a
//! local DynamoDB server (both started by the tests on 127.0.0.1).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::{
    Deployment, LeaseStore, MemoryLeaseStore, RunningApp,
    lease::LeaseKey,
    runner::{OperatorSettings, ShardState},
};
use ruststream_runtime::{Outcome, app::StartPosition};
use ruststream_tests::e2e::{
    Servers, TestHost, dynamo_store, put_json, put_witnessed, stored_checkpoint, take_over,
    wait_for_sequences_across,
};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::guests;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::{eventually, poll_for};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
/// Hash keys that land on the first and the second shard of a 2-shard stream.
const SHARD_0_KEY: &str = "0";
const SHARD_1_KEY: &str = "300000000000000000000000000000000000000";

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({ "id": id, "amount": amount })
}

/// A host running `settlement` on a one-shard `ledger` stream, its Kinesis client through
/// `faults`.
struct FaultyLedger {
    _kinesis: LocalKinesis,
    faults: Faults,
    /// A client that bypasses the faults, for the test's own puts.
    client: aws_sdk_kinesis::Client,
    host: TestHost,
    app: RunningApp,
}

impl FaultyLedger {
    async fn start() -> anyhow::Result<Self> {
        let kinesis = LocalKinesis::start().await?;
        kinesis.create_stream("ledger", 1).await?;
        let faults = Faults::new();
        let client = kinesis.client().await;
        let host = TestHost::new(faults.kinesis_client(&kinesis.endpoint()).await, "host-a")?;
        let app = host.run_in_memory(guests::SETTLEMENT, 1).await?;
        Ok(Self {
            _kinesis: kinesis,
            faults,
            client,
            host,
            app,
        })
    }

    async fn put_entries(&self, ids: std::ops::RangeInclusive<u64>) -> anyhow::Result<()> {
        for id in ids {
            put_json(&self.client, "ledger", &entry(id, id as i64), None).await?;
        }
        Ok(())
    }

    /// Puts entry `id` and waits until it is delivered: a marker behind what the test watches.
    async fn put_marker(&self, id: u64) -> anyhow::Result<()> {
        let (_, marker) = put_json(&self.client, "ledger", &entry(id, id as i64), None).await?;
        self.host
            .deliveries
            .wait_for_sequences(&[marker], WAIT)
            .await?;
        Ok(())
    }

    /// Every record delivered exactly once: `count` deliveries of `count` sequence numbers.
    fn assert_each_once(&self, count: usize) {
        let all = self.host.deliveries.all();
        let sequences: BTreeSet<_> = all.iter().map(|r| r.sequence_number.clone()).collect();
        assert_eq!(sequences.len(), count, "every record, none lost: {all:#?}");
        assert_eq!(all.len(), count, "none twice: {all:#?}");
    }
}

async fn entries_on_two_shards_are_handled_once_and_checkpointed_in_dynamodb(
    read: ReadMode,
) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 2, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let component = host.load(guests::SETTLEMENT).await?;
    let app = host
        .start(Deployment::new(component, store.clone()), 2)
        .await?;

    let mut last_by_shard = BTreeMap::new();
    for (id, key) in [(1, SHARD_0_KEY), (2, SHARD_1_KEY), (3, SHARD_0_KEY)] {
        let (shard, sequence) =
            put_json(client, "ledger", &entry(id, 10 * id as i64), Some(key)).await?;
        last_by_shard.insert(shard, sequence);
    }
    assert_eq!(last_by_shard.len(), 2, "the entries span both shards");
    let reports = host.deliveries.wait_for(3, WAIT).await?;
    app.shutdown().await;

    let sequences: BTreeSet<_> = reports.iter().map(|r| r.sequence_number.clone()).collect();
    assert_eq!(sequences.len(), 3, "each entry handled once: {reports:#?}");
    assert!(
        reports
            .iter()
            .all(|r| r.outcome == Outcome::Ack && r.attempt == 1)
    );
    assert_eq!(host.deliveries.len(), 3, "nothing delivered twice");
    for (shard, last) in &last_by_shard {
        let stored = stored_checkpoint(store.as_ref(), "ledger", shard).await?;
        assert_eq!(stored.as_ref(), Some(last), "checkpoint row of {shard}");
    }
    Ok(())
}

async fn a_restart_with_dynamodb_redelivers_from_the_held_record(
    read: ReadMode,
) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let first = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = first.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (shard, one) = put_json(client, "ledger", &entry(1, 1), None).await?;
    let (_, sticky) = put_json(client, "ledger", &entry(2, -1), None).await?;
    let (_, after) = put_json(client, "ledger", &entry(3, 2), None).await?;
    let reports = first.deliveries.wait_for(3, WAIT).await?;
    let outcomes: Vec<Outcome> = reports.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Outcome::Ack, Outcome::Retry, Outcome::Ack]);
    app.shutdown().await;
    assert_eq!(
        stored_checkpoint(store.as_ref(), "ledger", &shard).await?,
        Some(one.clone())
    );

    let second = TestHost::new(client.clone(), "host-b")?.reading(read);
    let app = second.run(guests::SETTLEMENT, store.clone(), 1).await?;
    // A marker behind them: once it is handled, the shard was read past everything a restart
    // could deliver again.
    let (_, marker) = put_json(client, "ledger", &entry(4, 3), None).await?;
    let reports = second
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&marker), WAIT)
        .await?;
    let again: Vec<&str> = reports
        .iter()
        .map(|r| r.sequence_number.as_str())
        .collect::<Vec<_>>()
        .into_iter()
        .map(|s| {
            if s == sticky {
                "sticky"
            } else if s == after {
                "after"
            } else if s == marker {
                "marker"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(again, ["sticky", "after", "marker"], "{reports:#?}");
    app.shutdown().await;
    Ok(())
}

async fn a_dropped_record_does_not_come_back_after_a_restart(read: ReadMode) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let first = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = first.run(guests::SETTLEMENT, store.clone(), 1).await?;
    put_json(client, "ledger", &entry(1, 0), None).await?;
    let reports = first.deliveries.wait_for(1, WAIT).await?;
    assert_eq!(reports[0].outcome, Outcome::Drop);
    app.shutdown().await;

    let second = TestHost::new(client.clone(), "host-b")?.reading(read);
    let app = second.run(guests::SETTLEMENT, store.clone(), 1).await?;
    // The fresh record is the marker: the dropped one stands before it on the shard, so it
    // would have been delivered first.
    let (_, fresh) = put_json(client, "ledger", &entry(2, 5), None).await?;
    let reports = second
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&fresh), WAIT)
        .await?;
    assert_eq!(reports.len(), 1, "{reports:#?}");
    assert_eq!(reports[0].sequence_number, fresh);
    app.shutdown().await;
    Ok(())
}

async fn a_restart_with_the_memory_store_opens_at_the_tip(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let client = kinesis.client().await;

    let first = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = first.run_in_memory(guests::SETTLEMENT, 1).await?;
    put_json(&client, "ledger", &entry(1, 1), None).await?;
    first.deliveries.wait_for(1, WAIT).await?;
    app.shutdown().await;

    let (_, while_down) = put_json(&client, "ledger", &entry(2, -1), None).await?;

    let second = TestHost::new(client.clone(), "host-b")?.reading(read);
    let app = second.run_in_memory(guests::SETTLEMENT, 1).await?;
    // The record written after the start is the marker: the one written while down stands
    // before it on the shard, so it would have been delivered first.
    let (_, after_start) = put_json(&client, "ledger", &entry(3, 3), None).await?;
    let reports = second
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&after_start), WAIT)
        .await?;
    let seen: Vec<String> = reports.iter().map(|r| r.sequence_number.clone()).collect();
    assert_eq!(seen, [after_start], "not {while_down}: {reports:#?}");
    app.shutdown().await;
    Ok(())
}

async fn start_positions_horizon_latest_and_timestamp(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let client = kinesis.client().await;
    for stream in ["positions.horizon", "positions.latest", "positions.stamped"] {
        kinesis.create_stream(stream, 1).await?;
    }
    put_json(
        &client,
        "positions.horizon",
        &json!({"id": "h-before"}),
        None,
    )
    .await?;
    put_json(
        &client,
        "positions.latest",
        &json!({"id": "l-before"}),
        None,
    )
    .await?;
    put_json(&client, "positions.stamped", &json!({"id": "s-old"}), None).await?;
    // Pacing the producer (both sleeps), not a wait: an `AT_TIMESTAMP` start needs the clock to
    // move between two arrivals, so the stamp lies well after `s-old` arrived and before `s-new`.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stamp = ruststream_runtime::Clock::now_ms(&ruststream_runtime::SystemClock);
    tokio::time::sleep(Duration::from_millis(200)).await;
    put_json(&client, "positions.stamped", &json!({"id": "s-new"}), None).await?;

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let mut deployment = Deployment::new(
        host.load(guests::POSITIONS).await?,
        Arc::new(MemoryLeaseStore::new()),
    );
    let at_stamp = OperatorSettings {
        start: Some(StartPosition::AtTimestamp(stamp)),
        ..OperatorSettings::default()
    };
    deployment.settings.insert("stamped".into(), at_stamp);
    let app = host.start(deployment, 3).await?;
    put_json(&client, "positions.latest", &json!({"id": "l-after"}), None).await?;
    // Each stream's last record is its marker: a record before its start position stands
    // before it on the shard, so it would have been seen first.
    let seen = || {
        let mut seen: Vec<String> = host
            .log
            .captured()
            .iter()
            .filter(|l| l.message == "seen")
            .filter_map(|l| l.field("id").map(str::to_owned))
            .collect();
        seen.sort();
        seen
    };
    let markers = ["h-before", "l-after", "s-new"];
    let all_seen = eventually(WAIT, || {
        let seen = seen();
        markers.iter().all(|m| seen.iter().any(|s| s == m))
    })
    .await;
    assert!(all_seen, "{:?}", seen());
    app.shutdown().await;
    let seen = seen();
    assert_eq!(seen, ["h-before", "l-after", "s-new"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_iterator_resumes_where_the_reader_stood() -> anyhow::Result<()> {
    let ledger = FaultyLedger::start().await?;
    ledger.put_entries(1..=1).await?;
    ledger.host.deliveries.wait_for(1, WAIT).await?;
    let iterators_before = ledger.faults.requests("GetShardIterator");
    ledger
        .faults
        .inject(&["GetRecords"], 1, Fault::expired_iterator());
    ledger.put_entries(2..=4).await?;
    ledger.host.deliveries.wait_for(4, WAIT).await?;
    // A marker read with the new iterator: the reader has moved on from the expiry, so a
    // second reopen for it would have come before.
    ledger.put_marker(5).await?;
    ledger.app.shutdown().await;

    assert_eq!(ledger.faults.injected("GetRecords"), 1);
    assert_eq!(
        ledger.faults.requests("GetShardIterator"),
        iterators_before + 1,
        "reopened once"
    );
    ledger.assert_each_once(5);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_read_backs_off_and_loses_nothing() -> anyhow::Result<()> {
    let ledger = FaultyLedger::start().await?;
    ledger
        .faults
        .inject(&["GetRecords"], 3, Fault::throughput_exceeded());
    ledger.put_entries(1..=5).await?;
    ledger.host.deliveries.wait_for(5, WAIT).await?;
    ledger.app.shutdown().await;

    assert_eq!(ledger.faults.injected("GetRecords"), 3);
    ledger.assert_each_once(5);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answer_cut_short_is_read_again_and_loses_nothing() -> anyhow::Result<()> {
    let ledger = FaultyLedger::start().await?;
    // Two answers that carry records arrive as half a body: neither the host's reading of
    // the answer nor the SDK's can take it, and the read is made again with the same
    // iterator.
    ledger.faults.cut_answers_with_records(2);
    ledger.put_entries(1..=5).await?;
    // A marker behind them: a record delivered twice would have been delivered before it.
    ledger.put_marker(6).await?;
    ledger.app.shutdown().await;

    assert_eq!(
        ledger.faults.injected("GetRecords"),
        2,
        "two answers were cut"
    );
    ledger.assert_each_once(6);
    Ok(())
}

async fn checkpoint_writes_are_coalesced(read: ReadMode) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let mut last = String::new();
    for chunk in 0..2 {
        let records = (0..500).map(|i| {
            let id = chunk * 500 + i + 1;
            aws_sdk_kinesis::types::PutRecordsRequestEntry::builder()
                .partition_key(format!("k{id}"))
                .data(aws_sdk_kinesis::primitives::Blob::new(serde_json::to_vec(
                    &entry(id, 1),
                )?))
                .build()
                .map_err(anyhow::Error::from)
        });
        let out = client
            .put_records()
            .stream_name("ledger")
            .set_records(Some(records.collect::<anyhow::Result<Vec<_>>>()?))
            .send()
            .await?;
        assert_eq!(out.failed_record_count(), Some(0));
        last = out
            .records()
            .last()
            .and_then(|r| r.sequence_number())
            .unwrap_or_default()
            .to_owned();
    }
    host.deliveries
        .wait_for(1000, Duration::from_secs(60))
        .await?;
    app.shutdown().await;

    let stats = store.stats();
    assert!(
        stats.checkpoint_writes < 100,
        "1000 records cost {} checkpoint writes",
        stats.checkpoint_writes
    );
    let shard = host.deliveries.all()[0].shard_id.clone();
    assert_eq!(
        stored_checkpoint(store.as_ref(), "ledger", &shard).await?,
        Some(last)
    );
    Ok(())
}

async fn a_host_that_loses_its_lease_stops_delivering_and_checkpointing(
    read: ReadMode,
) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (shard, first) = put_json(client, "ledger", &entry(1, 1), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;
    let key = LeaseKey::new("ledger", &shard);
    wait_for_checkpoint(store.as_ref(), &key, &first).await?;

    // Another host takes the lease over, exactly as observed.
    let thief = take_over(store.as_ref(), &key, "host-b", WAIT).await?;
    let lost = app
        .wait_for(WAIT, |s| s[0].count(&ShardState::Lost) == 1)
        .await;
    assert!(lost, "{:#?}", app.status());

    // Handled by a witness beside it: a reader still polling would have had it too.
    put_witnessed(client, guests::SETTLEMENT, "ledger", &entry(2, 2)).await?;
    assert_eq!(
        host.deliveries.len(),
        1,
        "nothing delivered after the lease was lost"
    );
    let row = store.read(&key).await?.expect("row");
    assert_eq!(row.owner.as_deref(), Some("host-b"));
    assert_eq!(row.counter, thief.counter, "host-a wrote nothing more");
    assert_eq!(row.checkpoint.as_deref(), Some(first.as_str()));
    app.shutdown().await;
    Ok(())
}

async fn two_apps_on_one_stream_keep_separate_checkpoints(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let client = kinesis.client().await;
    let ledger_store = dynamo_store(dynamo.client().await, "ruststream-ledger").await?;
    let bench_store = dynamo_store(dynamo.client().await, "ruststream-ledger-bench").await?;

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let ledger = host.launch(Deployment::new(
        host.load(guests::SETTLEMENT).await?,
        ledger_store.clone(),
    ))?;
    let bench = host.launch(Deployment::new(
        host.load(guests::BENCH_LEDGER).await?,
        bench_store.clone(),
    ))?;
    for app in [&ledger, &bench] {
        assert!(
            app.wait_for(WAIT, |s| s[0].count(&ShardState::Reading) == 1)
                .await
        );
    }
    let booked = json!({"id": 1, "amount": 5, "account": "A", "currency": "EUR", "memo": "m"});
    let refund = json!({"id": 2, "amount": -5, "account": "A", "currency": "EUR", "memo": "m"});
    let (shard, first) = put_json(&client, "ledger", &booked, None).await?;
    let (_, second) = put_json(&client, "ledger", &refund, None).await?;
    host.deliveries.wait_for(4, WAIT).await?;
    ledger.shutdown().await;
    bench.shutdown().await;

    // The ledger app holds the refund; the bench app books a refund in EUR. Each app's
    // table has its own position on the same shard.
    let outcomes = |subscriber: &str| -> Vec<Outcome> {
        host.deliveries
            .all()
            .into_iter()
            .filter(|r| r.subscriber == subscriber)
            .map(|r| r.outcome)
            .collect()
    };
    assert_eq!(outcomes("book"), [Outcome::Ack, Outcome::Retry]);
    assert_eq!(outcomes("classify"), [Outcome::Ack, Outcome::Ack]);
    assert_eq!(
        stored_checkpoint(ledger_store.as_ref(), "ledger", &shard).await?,
        Some(first)
    );
    assert_eq!(
        stored_checkpoint(bench_store.as_ref(), "ledger", &shard).await?,
        Some(second)
    );
    Ok(())
}

async fn wait_for_checkpoint(
    store: &dyn LeaseStore,
    key: &LeaseKey,
    sequence: &str,
) -> anyhow::Result<ruststream_kinesis::lease::LeaseRecord> {
    let reached = poll_for(Duration::from_secs(5), async || {
        let row = store.read(key).await;
        row.map(|row| row.filter(|row| row.checkpoint.as_deref() == Some(sequence)))
            .transpose()
    })
    .await;
    match reached {
        Some(row) => Ok(row?),
        None => anyhow::bail!("checkpoint of {key} never reached {sequence}"),
    }
}

async fn after_a_split_the_children_start_once_the_parent_is_read_to_its_end(
    read: ReadMode,
) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (parent, before) = put_json(client, "ledger", &entry(1, 1), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;

    client
        .split_shard()
        .stream_name("ledger")
        .shard_to_split(&parent)
        .new_starting_hash_key("170141183460469231731687303715884105728")
        .send()
        .await?;
    let low = put_json(client, "ledger", &entry(2, 2), Some(SHARD_0_KEY)).await?;
    let high = put_json(
        client,
        "ledger",
        &entry(3, 3),
        Some("200000000000000000000000000000000000000"),
    )
    .await?;
    assert_ne!(low.0, parent, "new records land in the children");
    assert_ne!(low.0, high.0);

    let reports = host.deliveries.wait_for(3, WAIT).await?;
    let finished = app
        .wait_for(WAIT, |s| {
            s[0].count(&ShardState::Finished) == 1 && s[0].count(&ShardState::Reading) == 2
        })
        .await;
    assert!(finished, "{:#?}", app.status());
    app.shutdown().await;

    let order: Vec<&str> = reports.iter().map(|r| r.sequence_number.as_str()).collect();
    assert_eq!(order[0], before, "the parent's record first");
    let children: BTreeSet<&str> = order[1..].iter().copied().collect();
    assert_eq!(children, BTreeSet::from([low.1.as_str(), high.1.as_str()]));
    assert_eq!(
        stored_checkpoint(store.as_ref(), "ledger", &parent)
            .await?
            .as_deref(),
        Some(ruststream_kinesis::lease::SHARD_END)
    );
    assert_eq!(
        stored_checkpoint(store.as_ref(), "ledger", &low.0).await?,
        Some(low.1.clone())
    );
    Ok(())
}

async fn two_hosts_converge_to_a_fair_share_of_the_shards(read: ReadMode) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 4, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let first = TestHost::new(client.clone(), "host-a")?.reading(read);
    let a = first.run(guests::SETTLEMENT, store.clone(), 4).await?;
    let second = TestHost::new(client.clone(), "host-b")?.reading(read);
    let b = second.launch(Deployment::new(
        second.load(guests::SETTLEMENT).await?,
        store.clone(),
    ))?;
    let reading =
        |app: &ruststream_kinesis::RunningApp| app.status()[0].count(&ShardState::Reading);
    let balanced = eventually(WAIT, || reading(&a) == 2 && reading(&b) == 2).await;
    assert!(balanced, "a: {:#?}\nb: {:#?}", a.status(), b.status());
    let owners: BTreeMap<String, usize> =
        store
            .list()
            .await?
            .into_iter()
            .fold(BTreeMap::new(), |mut owners, row| {
                *owners.entry(row.owner.unwrap_or_default()).or_default() += 1;
                owners
            });
    assert_eq!(
        owners,
        BTreeMap::from([("host-a".into(), 2), ("host-b".into(), 2)])
    );

    // Records on every shard are handled exactly once between the two hosts.
    let keys = [
        "0",
        "100000000000000000000000000000000000000",
        "200000000000000000000000000000000000000",
        "300000000000000000000000000000000000000",
    ];
    // Then a marker on each shard: a record delivered twice would have been delivered before
    // its shard's marker.
    let mut markers = Vec::new();
    for (id, key) in (1..).zip(keys.iter().chain(&keys)) {
        let (_, sequence) = put_json(client, "ledger", &entry(id, id as i64), Some(key)).await?;
        if id > 4 {
            markers.push(sequence);
        }
    }
    wait_for_sequences_across(&[&first.deliveries, &second.deliveries], &markers, WAIT).await?;
    assert_eq!(first.deliveries.len(), 4);
    assert_eq!(second.deliveries.len(), 4);
    a.shutdown().await;
    b.shutdown().await;
    Ok(())
}

async fn a_deleted_stream_stops_its_subscription_with_a_clear_error(
    read: ReadMode,
) -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-ledger").await?;
    let (client, store) = (&servers.client, &servers.store);

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (shard, sequence) = put_json(client, "ledger", &entry(1, 1), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;
    // Its consumers go with it (a fan-out subscription's, when it reads so).
    client
        .delete_stream()
        .stream_name("ledger")
        .enforce_consumer_deletion(true)
        .send()
        .await?;

    let stopped = app
        .wait_for(WAIT, |s| {
            s[0].error
                .as_deref()
                .is_some_and(|e| e.contains("stream `ledger` does not exist in region"))
                && s[0].count(&ShardState::Reading) == 0
        })
        .await;
    assert!(stopped, "{:#?}", app.status());
    // The lease was released with its checkpoint flushed.
    let row = store
        .read(&LeaseKey::new("ledger", &shard))
        .await?
        .expect("row");
    assert_eq!(row.owner, None);
    assert_eq!(row.checkpoint, Some(sequence));
    app.shutdown().await;
    Ok(())
}

in_both_read_modes!(
    entries_on_two_shards_are_handled_once_and_checkpointed_in_dynamodb,
    a_restart_with_dynamodb_redelivers_from_the_held_record,
    a_dropped_record_does_not_come_back_after_a_restart,
    a_restart_with_the_memory_store_opens_at_the_tip,
    start_positions_horizon_latest_and_timestamp,
    checkpoint_writes_are_coalesced,
    a_host_that_loses_its_lease_stops_delivering_and_checkpointing,
    two_apps_on_one_stream_keep_separate_checkpoints,
    after_a_split_the_children_start_once_the_parent_is_read_to_its_end,
    two_hosts_converge_to_a_fair_share_of_the_shards,
    a_deleted_stream_stops_its_subscription_with_a_clear_error,
);
