//! Client CPU per record reading a local Kinesis server: the host running the `book`
//! component beside a bare aws-sdk-kinesis GetRecords loop with the same pacing (one read per
//! shard every 200 ms, Kinesis's 5 reads/s), in the same run.
//!
//! `cargo bench -p ruststream-tests --bench kinesis_cpu`. For 5 000 and then 20 000 records
//! of ~100 bytes on a 4-shard stream (a fresh server each), both readers read every record
//! from the horizon, five times each, interleaved; CPU is this process's user + system time
//! (`getrusage`) from start to the last record, the server's own excluded (it is another
//! process), and the run of median CPU is reported. The marginal figure,
//! (CPU(20 000) − CPU(5 000)) / 15 000, is the cost of one more record with start-up
//! (leases, shard listing, iterators) cancelled out.
//!
//! With `RUSTSTREAM_NATIVE_BENCH` naming the binary of `benches-native/seed-kinesis` (the
//! seed's native framework with the same handler linked in; CI does not build it), that
//! binary reads the same records in the same run, as a third reader: its own CPU time, as
//! it reports it.

#[path = "common/process_cpu.rs"]
mod common_cpu;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::ensure;
use aws_sdk_kinesis::types::ShardIteratorType;
use ruststream_kinesis::{
    Deployment, Host, HostConfig, MemoryLeaseStore, kinesis::MIN_READ_INTERVAL,
    runner::OperatorSettings,
};
use ruststream_runtime::{
    LoadedComponent, Runtime, RuntimeConfig, Tenant, app::StartPosition, log::LogSink,
    pipeline::DeliveryReport,
};
use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::guests;
use ruststream_tests::servers::LocalKinesis;

use common_cpu::process_cpu;

const SIZES: [usize; 2] = [5_000, 20_000];
/// Reads of the same records per size, host and bare loop interleaved; medians are reported.
const REPEATS: usize = 5;
const SHARDS: i32 = 4;
const STREAM: &str = "ledger";
const WAIT: Duration = Duration::from_secs(600);

/// CPU and wall-clock time of one reader over one stream.
#[derive(Clone, Copy)]
struct Run {
    cpu: Duration,
    wall: Duration,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            let mut results = Vec::new();
            for records in SIZES {
                results.push((records, measure(records).await?));
            }
            report(&results);
            Ok(())
        })
}

/// The median runs of each reader over one set of records.
struct Measured {
    host: Run,
    bare: Run,
    native: Option<Run>,
}

/// Puts `records` on a fresh server, then reads them with the host, the bare loop and (when
/// given) the native framework, [`REPEATS`] times each, interleaved.
async fn measure(records: usize) -> anyhow::Result<Measured> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream(STREAM, SHARDS).await?;
    let client = kinesis.client().await;
    put_all(&client, records).await?;
    let native_bench = std::env::var_os("RUSTSTREAM_NATIVE_BENCH");
    let (mut host, mut bare, mut native) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        host.push(host_read(&client, records).await?);
        bare.push(bare_read(&client, records).await?);
        if let Some(program) = &native_bench {
            native.push(native_read(program, &kinesis.endpoint(), records).await?);
        }
    }
    Ok(Measured {
        host: median(&mut host),
        bare: median(&mut bare),
        native: (!native.is_empty()).then(|| median(&mut native)),
    })
}

/// Runs the native framework's reader over the stream; the CPU and wall time it reports.
async fn native_read(
    program: &std::ffi::OsStr,
    endpoint: &str,
    records: usize,
) -> anyhow::Result<Run> {
    let output = tokio::process::Command::new(program)
        .args(["--endpoint", endpoint, "--stream", STREAM, "--records"])
        .arg(records.to_string())
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "the native reader failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let field = |name: &str| -> anyhow::Result<u64> {
        let value = stdout
            .split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| {
                anyhow::anyhow!("no `{name}` in the native reader's output: {stdout}")
            })?;
        Ok(value.parse()?)
    };
    Ok(Run {
        cpu: Duration::from_micros(field("cpu_us")?),
        wall: Duration::from_micros(field("wall_us")?),
    })
}

/// The run of median CPU time.
fn median(runs: &mut [Run]) -> Run {
    runs.sort_by_key(|run| run.cpu);
    runs[runs.len() / 2]
}

async fn host_read(client: &aws_sdk_kinesis::Client, records: usize) -> anyhow::Result<Run> {
    // In process: our own guest examples are trusted, and a bench binary does not
    // serve the compile worker.
    let runtime = Runtime::new(RuntimeConfig::in_process())?;
    let tenant = Arc::new(Tenant::trusted("bench"));
    let log = LogSink::new();
    let path = guests::BENCH_BOOK.path();
    let component = LoadedComponent::from_file(&runtime, &path, tenant.policy(), &log).await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = handled.clone();
    let host = Host::new(client.clone(), HostConfig::default())
        .with_log(log)
        .with_observer(Arc::new(move |_: &DeliveryReport| {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
    let mut deployment =
        Deployment::new(component, Arc::new(MemoryLeaseStore::new())).for_tenant(tenant);
    let from_horizon = OperatorSettings {
        start: Some(StartPosition::Horizon),
        ..OperatorSettings::default()
    };
    deployment.settings.insert("book".into(), from_horizon);

    let started = Clock::start();
    let app = host.start(deployment)?;
    let deadline = Instant::now() + WAIT;
    while handled.load(Ordering::Relaxed) < records {
        ensure!(
            Instant::now() < deadline,
            "the host handled too few records"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let run = started.stop();
    app.shutdown().await;
    Ok(run)
}

/// Reads every shard from the horizon with a plain GetRecords loop, one read per shard every
/// [`MIN_READ_INTERVAL`] at most, as the host's reader does.
async fn bare_read(client: &aws_sdk_kinesis::Client, records: usize) -> anyhow::Result<Run> {
    let shards = ruststream_kinesis::kinesis::list_shards(client, STREAM).await?;
    let started = Clock::start();
    let readers: Vec<_> = shards
        .into_iter()
        .map(|shard| {
            let client = client.clone();
            tokio::spawn(async move { read_shard(&client, &shard.shard_id).await })
        })
        .collect();
    let mut read = 0;
    for reader in readers {
        read += reader.await??;
    }
    let run = started.stop();
    ensure!(read >= records, "read {read} of {records}");
    Ok(run)
}

/// Reads one shard until it is caught up (an empty read at the tip); the records read.
async fn read_shard(client: &aws_sdk_kinesis::Client, shard: &str) -> anyhow::Result<usize> {
    let mut iterator = client
        .get_shard_iterator()
        .stream_name(STREAM)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await?
        .shard_iterator;
    let mut read = 0;
    while let Some(it) = iterator.take() {
        let not_before = tokio::time::Instant::now() + MIN_READ_INTERVAL;
        let page = client
            .get_records()
            .shard_iterator(it)
            .limit(10_000)
            .send()
            .await?;
        if page.records().is_empty() && page.millis_behind_latest().unwrap_or(0) == 0 {
            break;
        }
        read += page.records().len();
        iterator = page.next_shard_iterator;
        tokio::time::sleep_until(not_before).await;
    }
    Ok(read)
}

/// Puts `records` entries of ~100 bytes; `book` reads `id` and `amount`, serde skips the memo.
async fn put_all(client: &aws_sdk_kinesis::Client, records: usize) -> anyhow::Result<()> {
    let entries: Vec<serde_json::Value> = (0..records)
        .map(|i| {
            serde_json::json!({
                "id": 1_000_000 + i,
                "amount": i % 9000 + 1,
                "memo": format!("invoice {i:08} of the ledger benchmark, padded"),
            })
        })
        .collect();
    put_json_batch(client, STREAM, &entries).await
}

/// Wall-clock and process CPU time from a start.
struct Clock {
    wall: Instant,
    cpu: Duration,
}

impl Clock {
    fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: process_cpu(),
        }
    }

    fn stop(self) -> Run {
        Run {
            cpu: process_cpu().saturating_sub(self.cpu),
            wall: self.wall.elapsed(),
        }
    }
}

fn report(results: &[(usize, Measured)]) {
    println!(
        "\nkinesis CPU: {SHARDS} shards, kinesis-local on loopback, every reader from the horizon\n"
    );
    println!(
        "{:>8} {:>12} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "records",
        "host µs/rec",
        "bare µs/rec",
        "native µs/rec",
        "host rec/s",
        "bare rec/s",
        "native rec/s"
    );
    let per = |run: &Run, records: usize| run.cpu.as_secs_f64() * 1e6 / records as f64;
    let rate = |run: &Run, records: usize| records as f64 / run.wall.as_secs_f64();
    let or_dash = |value: Option<f64>, digits: usize| {
        value.map_or_else(|| "—".to_owned(), |v| format!("{v:.digits$}"))
    };
    for (records, m) in results {
        let native = m.native.as_ref();
        println!(
            "{records:>8} {:>12.2} {:>12.2} {:>14} {:>12.0} {:>12.0} {:>12}",
            per(&m.host, *records),
            per(&m.bare, *records),
            or_dash(native.map(|n| per(n, *records)), 2),
            rate(&m.host, *records),
            rate(&m.bare, *records),
            or_dash(native.map(|n| rate(n, *records)), 0),
        );
    }
    let [(small, s), (large, l)] = results else {
        return;
    };
    let extra = (large - small) as f64;
    let marginal = |l: &Run, s: &Run| (l.cpu.as_secs_f64() - s.cpu.as_secs_f64()) * 1e6 / extra;
    let (host, bare) = (marginal(&l.host, &s.host), marginal(&l.bare, &s.bare));
    println!(
        "\nmarginal CPU per record ({small} → {large}): host {host:.2} µs, bare loop {bare:.2} µs \
         (host / bare {:.2}×)",
        host / bare
    );
    if let (Some(nl), Some(ns)) = (&l.native, &s.native) {
        let native = marginal(nl, ns);
        println!(
            "native framework {native:.2} µs (native / bare {:.2}×, host / native {:.2}×)",
            native / bare,
            host / native
        );
    }
    println!(
        "wall-clock rate at {large}, host / bare loop: {:.2}×",
        rate(&l.host, *large) / rate(&l.bare, *large)
    );
}
