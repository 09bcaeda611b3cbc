//! Reads of a shard are shared and fair: subscriptions of one host at the same place in a shard
//! share one GetRecords, turns on a shard are divided by tenant, throttles are waited out
//! without giving the lease up, and a Kinesis call that stalls after connecting times out and
//! is made again. A recording proxy in front of kinesis-local counts (and stalls) the calls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ruststream_kinesis::{
    Deployment, HostConfig, LeaseStore as _, MemoryLeaseStore, RunningApp,
    kinesis::ReaderConfig,
    lease::LeaseRecord,
    runner::{OperatorSettings, ShardState},
};
use ruststream_runtime::{Tenant, app::StartPosition, pipeline::DeliveryReport};
use ruststream_tests::e2e::{TestHost, put_json, put_json_batch, quick_config};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::guests;
use ruststream_tests::proxy::RecordingProxy;
use ruststream_tests::servers::{LocalKinesis, sdk_config};
use ruststream_tests::wait::{eventually, eventually_async};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// kinesis-local with a `ledger` stream of one shard, and a recording proxy in front of it.
struct Proxied {
    _kinesis: LocalKinesis,
    proxy: RecordingProxy,
    /// A client that bypasses the proxy, for the test's own puts.
    client: aws_sdk_kinesis::Client,
}

impl Proxied {
    async fn start(stream: &str) -> anyhow::Result<Self> {
        let kinesis = LocalKinesis::start().await?;
        kinesis.create_stream(stream, 1).await?;
        let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", kinesis.port())).await?;
        let client = kinesis.client().await;
        Ok(Self {
            _kinesis: kinesis,
            proxy,
            client,
        })
    }

    /// A client of the server through the proxy.
    async fn proxied_client(&self) -> aws_sdk_kinesis::Client {
        aws_sdk_kinesis::Client::new(&sdk_config(&self.proxy.endpoint()).await)
    }

    /// A host reading through the proxy.
    async fn host(&self, config: HostConfig) -> anyhow::Result<TestHost> {
        TestHost::with_config(self.proxied_client().await, config)
    }

    /// GetRecords calls that went out between `from` and `to`.
    fn reads_between(&self, from: Instant, to: Instant) -> Vec<Instant> {
        self.proxy
            .calls("GetRecords")
            .into_iter()
            .map(|r| r.at)
            .filter(|at| *at >= from && *at <= to)
            .collect()
    }
}

/// Starts `guest` on `host` for `tenant`, with `settings` for its subscriber, once its shard is
/// read.
async fn start_for(
    host: &TestHost,
    guest: ruststream_tests::Guest,
    tenant: &str,
    settings: Option<(&str, OperatorSettings)>,
) -> anyhow::Result<RunningApp> {
    let tenant = Arc::new(Tenant::trusted(tenant));
    let component = host.load_for(guest, &tenant).await?;
    let mut deployment =
        Deployment::new(component, Arc::new(MemoryLeaseStore::new())).for_tenant(tenant);
    if let Some((subscriber, settings)) = settings {
        deployment.settings.insert(subscriber.to_owned(), settings);
    }
    host.start(deployment, 1).await
}

/// Sequence numbers each tenant handled, in the order it handled them.
fn handled_by_tenant(reports: &[DeliveryReport]) -> BTreeMap<String, Vec<String>> {
    let mut handled: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for report in reports {
        handled
            .entry(report.tenant.clone())
            .or_default()
            .push(report.sequence_number.clone());
    }
    handled
}

/// Reads per second over `reads`, at least two.
fn rate(reads: &[Instant]) -> f64 {
    let span = reads
        .last()
        .zip(reads.first())
        .map(|(last, first)| last.duration_since(*first))
        .unwrap_or_default();
    (reads.len().saturating_sub(1)) as f64 / span.as_secs_f64().max(1e-3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_at_the_tip_share_one_read() -> anyhow::Result<()> {
    const SUBSCRIPTIONS: usize = 32;
    const RECORDS: usize = 10;
    let servers = Proxied::start("ledger").await?;
    let host = servers.host(quick_config("host-a")).await?;
    let mut apps = Vec::new();
    for n in 0..SUBSCRIPTIONS {
        apps.push(start_for(&host, guests::LEDGER_AUDIT, &format!("t{n:02}"), None).await?);
    }
    let started = Instant::now();
    let mut put = Vec::new();
    for id in 0..RECORDS {
        let (_, sequence) = put_json(
            &servers.client,
            "ledger",
            &json!({"id": id, "amount": 1}),
            None,
        )
        .await?;
        put.push(sequence);
        // Each record reaches every subscription before the next is put.
        let expected = SUBSCRIPTIONS * (id + 1);
        host.deliveries.wait_for(expected, WAIT).await?;
    }
    let reads = servers.reads_between(started, Instant::now());
    for app in &apps {
        app.shutdown().await;
    }

    eprintln!(
        "sharing: {} reads in {:?}, {:.1}/s",
        reads.len(),
        started.elapsed(),
        rate(&reads)
    );
    let handled = handled_by_tenant(&host.deliveries.all());
    assert_eq!(handled.len(), SUBSCRIPTIONS);
    for (tenant, sequences) in &handled {
        assert_eq!(
            sequences, &put,
            "{tenant} handled every record once, in order"
        );
    }
    // Unshared, every subscription needs a read of its own for each record: at least
    // 32 x 10 reads, paced to 5 a second (64 s).
    assert!(
        reads.len() <= SUBSCRIPTIONS * RECORDS / 4,
        "{} GetRecords for {RECORDS} records to {SUBSCRIPTIONS} subscriptions",
        reads.len()
    );
    assert!(rate(&reads) <= 5.5, "{:.1} reads a second", rate(&reads));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_one_subscription_gets_as_many_turns_as_one_with_sixty_four()
-> anyhow::Result<()> {
    const BACKLOG: usize = 300;
    const BATCH: i32 = 10;
    let servers = Proxied::start("ledger").await?;
    let mut config = quick_config("host-a");
    config.reader.get_records_limit = BATCH;
    let host = servers.host(config).await?;
    // A backlog of 30 full reads, which only tenant b reads: tenant a opens after it.
    let entries: Vec<serde_json::Value> = (0..BACKLOG)
        .map(|id| json!({"id": id, "amount": 1}))
        .collect();
    put_json_batch(&servers.client, "ledger", &entries).await?;
    // Tenant a: 64 subscriptions at the tip, polling.
    let a = Arc::new(Tenant::trusted("a"));
    let mut apps = Vec::new();
    for _ in 0..64 {
        let component = host.load_for(guests::LEDGER_AUDIT, &a).await?;
        let deployment =
            Deployment::new(component, Arc::new(MemoryLeaseStore::new())).for_tenant(a.clone());
        apps.push(host.start(deployment, 1).await?);
    }
    let from_horizon = OperatorSettings {
        start: Some(StartPosition::Horizon),
        ..OperatorSettings::default()
    };
    let started = Instant::now();
    apps.push(
        start_for(
            &host,
            guests::LEDGER_AUDIT,
            "b",
            Some(("audit", from_horizon)),
        )
        .await?,
    );
    host.deliveries.wait_for(BACKLOG, WAIT * 3).await?;
    let reads = servers.reads_between(started, Instant::now());
    for app in &apps {
        app.shutdown().await;
    }

    eprintln!("fairness: {} reads in {:?}", reads.len(), started.elapsed());
    // b made at least 30 reads (10 records each); everything else in the window was a's.
    let b_reads = BACKLOG / BATCH as usize;
    let a_reads = reads.len().saturating_sub(b_reads);
    assert!(
        a_reads <= 2 * b_reads,
        "tenant b read {b_reads} times while tenant a read {a_reads} times ({} in {:?})",
        reads.len(),
        started.elapsed()
    );
    assert!(rate(&reads) <= 5.5, "{:.1} reads a second", rate(&reads));
    Ok(())
}

/// Quick timings with short backoff pauses and call timeouts, so a test of 25 throttles or of
/// stalled calls takes seconds.
fn impatient(owner: &str) -> HostConfig {
    let quick = quick_config(owner);
    HostConfig {
        reader: ReaderConfig {
            backoff_first: Duration::from_millis(50),
            backoff_max: Duration::from_millis(300),
            get_records_timeout: Duration::from_secs(1),
            get_shard_iterator_timeout: Duration::from_secs(1),
            list_shards_timeout: Duration::from_secs(1),
            ..quick.reader
        },
        publish_timeout: Duration::from_secs(1),
        ..quick
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttles_past_twenty_reads_keep_the_lease_and_lose_nothing() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let faults = Faults::new();
    let client = kinesis.client().await;
    let host = TestHost::with_config(
        faults.kinesis_client(&kinesis.endpoint()).await,
        impatient("host-a"),
    )?;
    let app = host.run_in_memory(guests::LEDGER_AUDIT, 1).await?;
    let iterators = faults.requests("GetShardIterator");
    faults.inject(&["GetRecords"], 25, Fault::throughput_exceeded());
    for id in 1..=5 {
        put_json(&client, "ledger", &json!({"id": id, "amount": 1}), None).await?;
    }
    host.deliveries.wait_for(5, WAIT).await?;
    let status = app.status();
    app.shutdown().await;

    assert_eq!(faults.injected("GetRecords"), 25);
    assert_eq!(
        faults.requests("GetShardIterator"),
        iterators,
        "the shard was never given up and opened again"
    );
    let shard = status[0].shards.values().next().map(|s| s.state.clone());
    assert_eq!(shard, Some(ShardState::Reading), "{status:#?}");
    assert_eq!(host.deliveries.len(), 5, "{:#?}", host.deliveries.all());
    Ok(())
}

/// A host of `ledger-audit` reading `ledger` through the proxy, with short call timeouts.
async fn impatient_host(servers: &Proxied) -> anyhow::Result<TestHost> {
    servers.host(impatient("host-a")).await
}

async fn put_entries(servers: &Proxied, ids: std::ops::RangeInclusive<u64>) -> anyhow::Result<()> {
    for id in ids {
        put_json(
            &servers.client,
            "ledger",
            &json!({"id": id, "amount": 1}),
            None,
        )
        .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_get_records_times_out_and_is_made_again() -> anyhow::Result<()> {
    let servers = Proxied::start("ledger").await?;
    let host = impatient_host(&servers).await?;
    let app = host.run_in_memory(guests::LEDGER_AUDIT, 1).await?;
    servers.proxy.stall(&["GetRecords"], 2);
    put_entries(&servers, 1..=3).await?;
    host.deliveries.wait_for(3, WAIT).await?;
    app.shutdown().await;
    assert_eq!(servers.proxy.stalled("GetRecords"), 2);
    assert_eq!(host.deliveries.len(), 3, "{:#?}", host.deliveries.all());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_get_shard_iterator_times_out_and_is_made_again() -> anyhow::Result<()> {
    let servers = Proxied::start("ledger").await?;
    let host = impatient_host(&servers).await?;
    servers.proxy.stall(&["GetShardIterator"], 1);
    let app = host.run_in_memory(guests::LEDGER_AUDIT, 1).await?;
    put_entries(&servers, 1..=3).await?;
    host.deliveries.wait_for(3, WAIT).await?;
    app.shutdown().await;
    assert_eq!(servers.proxy.stalled("GetShardIterator"), 1);
    assert_eq!(host.deliveries.len(), 3, "{:#?}", host.deliveries.all());
    Ok(())
}

/// Waits for a reader to ask for its shard's iterator, which the proxy stalls, and asserts that
/// no lease row is `shown` meanwhile; then clears the stall and waits for one to be. What shows
/// a shard open where its reader reads (a checkpoint, a seek's mark) must wait for the reader:
/// records stored after it is shown are read.
async fn shown_only_once_the_iterator_is_had(
    servers: &Proxied,
    store: &MemoryLeaseStore,
    shown: impl Fn(&LeaseRecord) -> bool,
) -> anyhow::Result<()> {
    let stalled = eventually(WAIT, || servers.proxy.stalled("GetShardIterator") >= 1).await;
    assert!(stalled, "the shard's iterator was never asked for");
    let rows = store.list().await?;
    assert!(
        !rows.iter().any(&shown),
        "shown before the reader had its iterator: {rows:?}"
    );
    servers.proxy.clear_stalls();
    let shown = eventually_async(WAIT, async || {
        store.list().await.is_ok_and(|rows| rows.iter().any(&shown))
    })
    .await;
    assert!(shown, "never shown once the reader had its iterator");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_opened_at_the_tip_shows_a_checkpoint_only_once_it_reads_what_is_stored_next()
-> anyhow::Result<()> {
    // A checkpoint on a shard opened at the tip is what shows it open, to the fleet, an
    // operator or a producer waiting for it. Pinned while the reader's iterator was still
    // being had, it let the records stored meanwhile fall behind an iterator at the tip had
    // after them: the chaos test's second tenant lost a record so.
    let servers = Proxied::start("ledger").await?;
    let host = impatient_host(&servers).await?;
    servers.proxy.stall_until_cleared(&["GetShardIterator"]);
    let store = Arc::new(MemoryLeaseStore::new());
    let tenant = Arc::new(Tenant::trusted("tip"));
    let component = host.load_for(guests::LEDGER_AUDIT, &tenant).await?;
    let app = host.launch(Deployment::new(component, store.clone()).for_tenant(tenant))?;
    shown_only_once_the_iterator_is_had(&servers, &store, |row| row.checkpoint.is_some()).await?;
    put_entries(&servers, 1..=3).await?;
    host.deliveries.wait_for(3, WAIT).await?;
    app.shutdown().await;
    assert_eq!(host.deliveries.len(), 3, "{:#?}", host.deliveries.all());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_seek_to_the_tip_shows_on_a_shard_taken_after_it_only_once_its_reader_is_open()
-> anyhow::Result<()> {
    // A fleet seek stores where it moved a shard, with its mark: what shows the shard moved.
    // On a shard taken after the seek, it was stored while the reader's iterator at the tip
    // was still being had, so records stored meanwhile fell behind it, as with the tip's pin.
    let servers = Proxied::start("ledger").await?;
    let (host_a, host_b) = (
        servers.host(impatient("host-a")).await?,
        servers.host(impatient("host-b")).await?,
    );
    let store = Arc::new(MemoryLeaseStore::new());
    let tenant = Arc::new(Tenant::trusted("tip"));
    let launch = async |host: &TestHost| -> anyhow::Result<RunningApp> {
        let component = host.load_for(guests::LEDGER_AUDIT, &tenant).await?;
        host.launch(Deployment::new(component, store.clone()).for_tenant(tenant.clone()))
    };
    let held_by = async |owner: &str| {
        store.list().await.is_ok_and(|rows| {
            rows.iter()
                .any(|row| row.owner.as_deref() == Some(owner) && row.checkpoint.is_some())
        })
    };
    let first = launch(&host_a).await?;
    assert!(
        eventually_async(WAIT, async || held_by("host-a").await).await,
        "host-a never read the shard"
    );
    let second = launch(&host_b).await?;
    // Recorded on the host that holds nothing: it moves the shard when it takes it.
    let moved = second
        .seek_marked("audit", StartPosition::Latest, 7)
        .await?;
    assert!(moved.is_empty(), "host-b held {moved:?}");

    servers.proxy.stall_until_cleared(&["GetShardIterator"]);
    first.shutdown().await;
    shown_only_once_the_iterator_is_had(&servers, &store, |row| row.seek_mark.is_some()).await?;
    let rows = store.list().await?;
    assert!(
        rows.iter().all(|row| row.seek_mark == Some(7)),
        "another seek shown: {rows:?}"
    );
    put_entries(&servers, 1..=3).await?;
    host_b.deliveries.wait_for(3, WAIT).await?;
    second.shutdown().await;
    assert_eq!(host_b.deliveries.len(), 3, "{:#?}", host_b.deliveries.all());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_list_shards_times_out_and_is_made_again() -> anyhow::Result<()> {
    let servers = Proxied::start("ledger").await?;
    let host = impatient_host(&servers).await?;
    servers.proxy.stall(&["ListShards"], 1);
    let app = host.run_in_memory(guests::LEDGER_AUDIT, 1).await?;
    put_entries(&servers, 1..=3).await?;
    host.deliveries.wait_for(3, WAIT).await?;
    app.shutdown().await;
    assert_eq!(servers.proxy.stalled("ListShards"), 1);
    assert_eq!(host.deliveries.len(), 3, "{:#?}", host.deliveries.all());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_list_shards_blocks_neither_another_subscription_nor_a_shutdown()
-> anyhow::Result<()> {
    let servers = Proxied::start("ledger").await?;
    let host = impatient_host(&servers).await?;
    let first = start_for(&host, guests::LEDGER_AUDIT, "a", None).await?;
    // From now on every listing hangs; the first subscription's next round runs into one.
    servers.proxy.stall_until_cleared(&["ListShards"]);
    let stalled = eventually(WAIT, || servers.proxy.stalled("ListShards") >= 1).await;
    assert!(stalled, "no listing was stalled");

    let second = start_for(&host, guests::LEDGER_AUDIT, "b", None).await?;
    put_entries(&servers, 1..=2).await?;
    let reports = host.deliveries.wait_for(4, WAIT).await?;
    let handled = handled_by_tenant(&reports);
    assert_eq!(handled.get("a").map(Vec::len), Some(2), "{handled:?}");
    assert_eq!(handled.get("b").map(Vec::len), Some(2), "{handled:?}");

    // Listings are still stalled: shutdown finishes within the grace period all the same.
    let grace = host.host.config().shutdown_grace;
    let stopping = Instant::now();
    let stopped = tokio::time::timeout(grace, async {
        first.shutdown().await;
        second.shutdown().await;
    })
    .await;
    assert!(
        stopped.is_ok(),
        "shutdown took longer than its grace ({grace:?})"
    );
    assert!(servers.proxy.stalled("ListShards") >= 1);
    assert!(stopping.elapsed() < grace);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_put_record_of_a_copy_times_out_and_is_made_again() -> anyhow::Result<()> {
    let servers = Proxied::start("paced").await?;
    let host = impatient_host(&servers).await?;
    let app = host.run_in_memory(guests::PACER, 1).await?;
    servers.proxy.stall(&["PutRecord", "PutRecords"], 1);
    // A copy due in 200 ms: its PutRecord stalls once.
    put_json(
        &servers.client,
        "paced",
        &json!({"id": 1, "after_ms": 200, "quiet": true}),
        None,
    )
    .await?;
    let copied = eventually(WAIT, || {
        host.deliveries.all().iter().any(|r| r.attempt == 2)
    })
    .await;
    app.shutdown().await;
    assert!(copied, "the copy never came: {:#?}", host.deliveries.all());
    assert_eq!(servers.proxy.stalled("PutRecord"), 1);
    Ok(())
}
