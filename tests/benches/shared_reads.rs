//! Many subscriptions on one shard: put→handled latency and GetRecords calls per second, for
//! 1, 100 and 1 000 subscriptions in one tenant and spread over as many tenants.
//!
//! `cargo bench -p ruststream-tests --bench shared_reads` (`-- 1 100` for chosen sizes only).
//! Each scenario starts a fresh kinesis-local with a one-shard `ledger` stream and a recording
//! proxy in front of it, and one host in this process (default [`HostConfig`], leases in
//! memory) reading through the proxy, all its subscriptions with the host's one client (one
//! credentials identity). Every subscription runs the `ledger-audit` component (it acks every
//! entry). Once every subscription reads, records are put at [`RATE`] a second for
//! [`WINDOW`]; then the run waits (at most [`DRAIN`]) until every subscription handled every
//! record. Latency is handled time minus the record's arrival time at the stream (the
//! server's clock: the same machine); a record a subscription had not handled by the end
//! counts as slower than the slowest measured. GetRecords per second are counted by the proxy
//! over the put window.
//!
//! It also times handing one answer of [`RATE`] records to 1 000 readers (each reader's batch
//! is its own vector of the shared records: a reference count per field, never a copy of the
//! data).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ruststream_kinesis::{
    Deployment, Host, HostConfig, MemoryLeaseStore, RunningApp, runner::ShardState,
};
use ruststream_runtime::{
    Delivery, LoadedComponent, Runtime, RuntimeConfig, Tenant, log::LogSink, record::Bytes,
    record::Text,
};
use ruststream_tests::bench::HandledLatencies;
use ruststream_tests::e2e::put_json;
use ruststream_tests::guests;
use ruststream_tests::proxy::RecordingProxy;
use ruststream_tests::servers::{LocalKinesis, sdk_config};
use serde_json::json;

/// Records put a second.
const RATE: u32 = 10;
/// How long records are put.
const WINDOW: Duration = Duration::from_secs(20);
/// How long the run waits, after the window, for every record to be handled everywhere.
const DRAIN: Duration = Duration::from_secs(60);
const START_TIMEOUT: Duration = Duration::from_secs(600);
const SIZES: [usize; 3] = [1, 100, 1_000];

struct Figures {
    subscriptions: usize,
    tenants: usize,
    p50: Option<Duration>,
    p99: Option<Duration>,
    max: Option<Duration>,
    unhandled: usize,
    reads_per_second: f64,
    start: Duration,
}

fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        SIZES.to_vec()
    } else {
        sizes
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            // In process: our own guest examples are trusted, and a bench binary does not
            // serve the compile worker.
            let runtime = Runtime::new(RuntimeConfig::in_process())?;
            let mut all = Vec::new();
            for &subscriptions in &sizes {
                all.push(scenario(&runtime, subscriptions, 1).await?);
                if subscriptions > 1 {
                    all.push(scenario(&runtime, subscriptions, subscriptions).await?);
                }
            }
            report(&all);
            hand_out();
            Ok(())
        })
}

/// One run: `subscriptions` subscriptions of `tenants` tenants (spread evenly).
async fn scenario(
    runtime: &Runtime,
    subscriptions: usize,
    tenants: usize,
) -> anyhow::Result<Figures> {
    eprintln!("{subscriptions} subscriptions, {tenants} tenant(s): starting");
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", kinesis.port())).await?;
    let producer = kinesis.client().await;
    let client = aws_sdk_kinesis::Client::new(&sdk_config(&proxy.endpoint()).await);
    let latencies = HandledLatencies::new();
    let config = HostConfig {
        owner_id: "bench".into(),
        ..HostConfig::default()
    };
    let host = Host::new(client, config).with_observer(latencies.observer());
    let log = LogSink::new();
    let started = Instant::now();
    let mut apps = Vec::new();
    for n in 0..subscriptions {
        let tenant = Arc::new(Tenant::trusted(format!("tenant-{}", n % tenants)));
        let path = guests::LEDGER_AUDIT.path();
        let component = LoadedComponent::from_file(runtime, &path, tenant.policy(), &log).await?;
        let deployment =
            Deployment::new(component, Arc::new(MemoryLeaseStore::new())).for_tenant(tenant);
        apps.push(host.start(deployment)?);
    }
    wait_reading(&apps, started).await?;
    let start = started.elapsed();
    eprintln!("  all reading after {start:.1?}; putting {RATE} records a second for {WINDOW:?}");

    let window = Instant::now();
    let mut put = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
    while window.elapsed() < WINDOW {
        tick.tick().await;
        put_json(&producer, "ledger", &json!({"id": put, "amount": 1}), None).await?;
        put += 1;
    }
    let window_end = Instant::now();
    let expected = put * subscriptions;
    let drained = Instant::now();
    while latencies.handled() < expected && drained.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reads = proxy
        .requests()
        .into_iter()
        .filter(|r| r.target.ends_with(".GetRecords"))
        .filter(|r| r.at >= window && r.at <= window_end)
        .count();
    for app in &apps {
        app.abort();
    }
    let latencies = latencies.take_sorted();
    let unhandled = expected.saturating_sub(latencies.len());
    let at = |quantile: f64| -> Option<Duration> {
        let rank = ((expected as f64) * quantile).ceil() as usize;
        latencies
            .get(rank.saturating_sub(1))
            .map(|ms| Duration::from_millis(*ms))
    };
    Ok(Figures {
        subscriptions,
        tenants,
        p50: at(0.5),
        p99: at(0.99),
        max: latencies.last().map(|ms| Duration::from_millis(*ms)),
        unhandled,
        reads_per_second: reads as f64 / (window_end - window).as_secs_f64(),
        start,
    })
}

/// Waits until every subscription reads its shard.
async fn wait_reading(apps: &[RunningApp], started: Instant) -> anyhow::Result<()> {
    loop {
        let reading = apps
            .iter()
            .filter(|app| {
                app.status()
                    .iter()
                    .any(|s| s.count(&ShardState::Reading) > 0)
            })
            .count();
        if reading == apps.len() {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < START_TIMEOUT,
            "{reading} of {} subscriptions reading after {:?}",
            apps.len(),
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn report(all: &[Figures]) {
    println!(
        "\nshared reads: one shard of kinesis-local, {RATE} records/s for {WINDOW:?}, \
         default host config, one client\n"
    );
    println!(
        "{:>13} {:>8} {:>10} {:>10} {:>10} {:>10} {:>14} {:>9}",
        "subscriptions", "tenants", "p50", "p99", "max", "unhandled", "GetRecords/s", "start"
    );
    // A quantile past what was handled by the end is longer than the run let it be.
    let show =
        |d: Option<Duration>| d.map_or_else(|| format!(">{:?}", DRAIN), |d| format!("{d:.2?}"));
    for f in all {
        let p99 = show(f.p99);
        println!(
            "{:>13} {:>8} {:>10} {:>10} {:>10} {:>10} {:>14.2} {:>9.1?}",
            f.subscriptions,
            f.tenants,
            show(f.p50),
            p99,
            show(f.max),
            f.unhandled,
            f.reads_per_second,
            f.start
        );
    }
}

/// Times handing one answer of `RATE` records to 1 000 readers, as each sharer's batch is
/// made: a vector of its own, the records' buffers shared.
fn hand_out() {
    let data = Bytes::from(vec![b'x'; 100]);
    let strings = Text::from("49590338271490256608559692538361571095921575989136588898k");
    let answer: Vec<Delivery> = (0..RATE as usize)
        .map(|i| {
            Delivery::from_stream(
                strings.slice(0..56),
                strings.slice(56..57),
                i as u64,
                data.clone(),
            )
        })
        .collect();
    let rounds = 200;
    let started = Instant::now();
    for _ in 0..rounds {
        let batches: Vec<Vec<Delivery>> = (0..1_000).map(|_| answer.clone()).collect();
        std::hint::black_box(batches);
    }
    let per_answer = started.elapsed() / rounds;
    println!(
        "\nhanding one answer of {RATE} records to 1 000 readers: {per_answer:.1?} \
         ({:.0} ns per record per reader)",
        per_answer.as_nanos() as f64 / (1_000.0 * f64::from(RATE))
    );
}
