//! Deploys at fleet scale: how long a deploy through one host takes to be live on every host
//! of three, and what following the fleet's desired state costs a host at rest.
//!
//! `cargo build --release -p ruststream-cli && cargo bench -p ruststream-tests --bench
//! fleet_deploys`. Each fleet gets a fresh kinesis-local, dynalite and moto (S3); three
//! `ruststream run` processes on one lease namespace run tenant `acme`'s `versioned` app
//! (`tests/guests/versioned`) on a 3-shard stream. [`ROUNDS`] deploys alternate v2 and v1.
//!
//! - **fleet**: the hosts share deploys (`[host] component_bucket`): one `ruststream deploy`
//!   through host `a`, timed from the verb's answer (the change recorded) until every host's
//!   `status` shows the new version. Each deploy waits 0-1.4 s first (700 ms steps), so that
//!   the deploys sample every point of the hosts' poll.
//! - **baseline, per host** (the same run): the hosts' deploys are their own, as before fleet
//!   deploys; an operator reaches the three with three `ruststream deploy` calls, one after
//!   another, timed from the first call until every host's `status` shows the new version.
//!
//! Then, with nothing changing for [`REST`], each host's desired-state calls
//! (`ruststream_desired_state_calls_total`, scraped before and after) per minute.

use std::time::{Duration, Instant};

use ruststream_tests::fleet::{Deploys, FleetOf, all_run};
use ruststream_tests::guests;
use ruststream_tests::neighbour::verb;

const HOSTS: [&str; 3] = ["a", "b", "c"];
/// Deploys timed per mode (`RUSTSTREAM_FLEET_DEPLOY_ROUNDS` overrides).
const ROUNDS: usize = 20;
const REST: Duration = Duration::from_secs(60);
const DESIRED_CALLS: &str = "ruststream_desired_state_calls_total";

fn main() -> anyhow::Result<()> {
    let rounds = std::env::var("RUSTSTREAM_FLEET_DEPLOY_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ROUNDS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let versions = [guests::VERSIONED_V2.path(), guests::VERSIONED_V1.path()];
        let hashes = versions
            .iter()
            .map(|path| {
                std::fs::read(path)
                    .map(|b| ruststream_runtime::component::compile::content_hash(&b))
            })
            .collect::<Result<Vec<_>, _>>()?;

        let per_host = FleetOf::start("bench-per-host", &HOSTS, Deploys::PerHost).await?;
        let mut baseline = Vec::new();
        for round in 0..rounds {
            let path = versions[round % 2].display().to_string();
            let start = Instant::now();
            for host in &per_host.hosts {
                let (ok, said) =
                    verb(host, &["deploy", "acme", &path, "--name", "versioned"]).await?;
                anyhow::ensure!(ok, "deploy: {said}");
            }
            all_run(&per_host.hosts, &hashes[round % 2]).await?;
            baseline.push(start.elapsed());
        }
        per_host.stop().await?;

        let fleet = FleetOf::start("bench-fleet", &HOSTS, Deploys::Fleet).await?;
        let mut shared = Vec::new();
        for round in 0..rounds {
            let path = versions[round % 2].display().to_string();
            // Each deploy at another point of the hosts' 2 s poll: right after one round
            // converged, the next would always land just after a poll.
            tokio::time::sleep(Duration::from_millis((round as u64 * 700) % 2000)).await;
            let (ok, said) = verb(
                &fleet.hosts[0],
                &["deploy", "acme", &path, "--name", "versioned"],
            )
            .await?;
            anyhow::ensure!(ok, "deploy: {said}");
            shared.push(all_run(&fleet.hosts, &hashes[round % 2]).await?);
        }
        // At rest: nothing deployed, no rollout judged (each rollout above was kept or
        // superseded), for REST.
        let mut before = Vec::new();
        for host in &fleet.hosts {
            before.push(host.scrape().await?.sum(DESIRED_CALLS, &[]));
        }
        tokio::time::sleep(REST).await;
        let mut at_rest = Vec::new();
        for (host, before) in fleet.hosts.iter().zip(before) {
            let scrape = host.scrape().await?;
            let per_op = ["Scan", "GetItem", "PutItem"]
                .map(|op| (op, scrape.sum(DESIRED_CALLS, &[("operation", op)])));
            at_rest.push((
                (scrape.sum(DESIRED_CALLS, &[]) - before) * 60.0 / REST.as_secs_f64(),
                per_op,
            ));
        }
        fleet.stop().await?;

        println!("deploy → every host of 3 live, {rounds} deploys each");
        println!("| mode | p50 | p99 | max |");
        println!("|---|---:|---:|---:|");
        let (base_p50, _) = report("per host, three deploys (baseline)", &mut baseline);
        let (fleet_p50, _) = report("fleet, one deploy", &mut shared);
        println!(
            "fleet / baseline at p50: {:.2}",
            fleet_p50.as_secs_f64() / base_p50.as_secs_f64()
        );
        println!(
            "desired-state calls per host per minute at rest ({}s):",
            REST.as_secs()
        );
        for (host, (rate, per_op)) in HOSTS.iter().zip(at_rest) {
            println!("  host {host}: {rate:.1}/min (totals since start: {per_op:?})");
        }
        Ok(())
    })
}

/// Prints one row of percentiles of `times`; returns its p50 and p99.
fn report(mode: &str, times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    let (p50, p99) = (at(0.5), at(0.99));
    let max = times.last().copied().unwrap_or_default();
    println!("| {mode} | {p50:.2?} | {p99:.2?} | {max:.2?} |");
    (p50, p99)
}
