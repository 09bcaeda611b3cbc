//! Polling against enhanced fan-out, side by side on the same server and records: put →
//! handled latency and CPU per record.
//!
//! `cargo bench -p ruststream-tests --bench read_modes`. Each mode gets a fresh kinesis-local
//! with a one-shard `ledger` stream and one host in this process (default [`HostConfig`],
//! leases in memory) running the `ledger-audit` component (it acks every entry) in that mode.
//! Once the shard is read, [`RATE`] records a second are put for [`WINDOW`]; then the run waits
//! (at most [`DRAIN`]) until every record is handled. Latency is handled time minus the
//! record's arrival at the stream (the server's clock: the same machine). CPU is this
//! process's (the host, and the producer, which is the same in both) over the window and the
//! drain, per record. The two modes alternate for [`ROUNDS`] rounds, so a noisy minute hits
//! both.

#[path = "common/process_cpu.rs"]
mod common_cpu;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::runner::{OperatorSettings, ShardState};
use ruststream_kinesis::{Deployment, Host, HostConfig, MemoryLeaseStore};
use ruststream_runtime::{LoadedComponent, Runtime, RuntimeConfig, Tenant, log::LogSink};
use ruststream_tests::bench::HandledLatencies;
use ruststream_tests::e2e::put_json;
use ruststream_tests::guests;
use ruststream_tests::servers::LocalKinesis;
use serde_json::json;

use common_cpu::process_cpu;

/// Records put a second.
const RATE: u32 = 20;
/// How long records are put.
const WINDOW: Duration = Duration::from_secs(20);
/// How long the run waits, after the window, for every record to be handled.
const DRAIN: Duration = Duration::from_secs(30);
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Rounds of (polling, fan-out).
const ROUNDS: usize = 2;

struct Figures {
    latencies: Vec<u64>,
    expected: usize,
    cpu: Duration,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            // In process: our own guest example is trusted, and a bench binary does not
            // serve the compile worker.
            let runtime = Runtime::new(RuntimeConfig::in_process())?;
            let mut by_mode: HashMap<&str, Vec<Figures>> = HashMap::new();
            for round in 0..ROUNDS {
                for (name, mode) in [
                    ("polling", ReadMode::Polling),
                    ("fan-out", ReadMode::FanOut),
                ] {
                    eprintln!("round {round}: {name}");
                    let figures = scenario(&runtime, mode).await?;
                    by_mode.entry(name).or_default().push(figures);
                }
            }
            report(&by_mode);
            Ok(())
        })
}

async fn scenario(runtime: &Runtime, mode: ReadMode) -> anyhow::Result<Figures> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let client = kinesis.client().await;
    let latencies = HandledLatencies::new();
    let config = HostConfig {
        owner_id: "bench".into(),
        ..HostConfig::default()
    };
    let host = Host::new(client.clone(), config).with_observer(latencies.observer());
    let tenant = Arc::new(Tenant::trusted("bench"));
    let log = LogSink::new();
    let path = guests::LEDGER_AUDIT.path();
    let component = LoadedComponent::from_file(runtime, &path, tenant.policy(), &log).await?;
    let mut deployment =
        Deployment::new(component, Arc::new(MemoryLeaseStore::new())).for_tenant(tenant);
    deployment.settings.insert(
        "audit".to_owned(),
        OperatorSettings {
            read: Some(mode),
            ..OperatorSettings::default()
        },
    );
    let app = host.start(deployment)?;
    let started = Instant::now();
    while !app
        .status()
        .iter()
        .any(|s| s.count(&ShardState::Reading) > 0)
    {
        anyhow::ensure!(
            started.elapsed() < START_TIMEOUT,
            "the shard was never read"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The first subscription (fan-out: a consumer's registration) is not what is measured.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let cpu = process_cpu();
    let window = Instant::now();
    let mut put = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
    while window.elapsed() < WINDOW {
        tick.tick().await;
        put_json(&client, "ledger", &json!({"id": put, "amount": 1}), None).await?;
        put += 1;
    }
    let drained = Instant::now();
    while latencies.handled() < put && drained.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu = process_cpu().saturating_sub(cpu);
    app.abort();
    Ok(Figures {
        latencies: latencies.take_sorted(),
        expected: put,
        cpu,
    })
}

fn report(by_mode: &HashMap<&str, Vec<Figures>>) {
    println!(
        "\nread modes: one shard of kinesis-local, {RATE} records/s for {WINDOW:?}, one \
         subscription, {ROUNDS} rounds each, alternating\n"
    );
    println!(
        "{:>8} {:>8} {:>8} {:>8} {:>10} {:>14}",
        "mode", "p50", "p99", "max", "unhandled", "CPU/record"
    );
    let mut p50s = HashMap::new();
    for name in ["polling", "fan-out"] {
        let Some(runs) = by_mode.get(name) else {
            continue;
        };
        let mut latencies: Vec<u64> = runs.iter().flat_map(|r| r.latencies.clone()).collect();
        latencies.sort_unstable();
        let expected: usize = runs.iter().map(|r| r.expected).sum();
        let cpu: Duration = runs.iter().map(|r| r.cpu).sum();
        // A record not handled by the end counts as slower than any measured.
        let at = |quantile: f64| {
            let rank = ((expected as f64) * quantile).ceil() as usize;
            latencies.get(rank.saturating_sub(1)).copied()
        };
        let show =
            |ms: Option<u64>| ms.map_or_else(|| format!(">{DRAIN:?}"), |ms| format!("{ms} ms"));
        p50s.insert(name, at(0.5));
        println!(
            "{:>8} {:>8} {:>8} {:>8} {:>10} {:>11.0} µs",
            name,
            show(at(0.5)),
            show(at(0.99)),
            show(latencies.last().copied()),
            expected.saturating_sub(latencies.len()),
            cpu.as_micros() as f64 / expected.max(1) as f64
        );
    }
    if let (Some(Some(polling)), Some(Some(fan_out))) = (p50s.get("polling"), p50s.get("fan-out")) {
        println!(
            "\nfan-out p50 / polling p50: {:.2}",
            *fan_out as f64 / (*polling).max(1) as f64
        );
    }
}
