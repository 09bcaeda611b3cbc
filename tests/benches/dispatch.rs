//! Per-record cost of dispatching through a component, against the same handler as native Rust
//! measured in the same run.
//!
//! `cargo bench -p ruststream-tests --bench dispatch` prints, for each variant, the median
//! ns/record over interleaved rounds and its ratio to the native baseline:
//!
//! - `native`: `serde_json` decode + the handler body, compiled into this binary;
//! - `batch of N`: one `handle-batch` crossing per N records;
//! - `one call per record`: a `handle-batch` crossing per record (a batch of one);
//!
//! each with the default limits (epoch deadlines on) and with deadlines off, which shows what
//! the sandbox's limits cost. The machine is noisy: rounds are interleaved so drift hits every
//! variant alike, and medians are reported.

#[path = "../guests/bench-ledger/src/ledger.rs"]
#[allow(
    unreachable_pub,
    reason = "the guest's own items, public in the guest crate"
)]
mod ledger;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use ruststream_runtime::component::HandlerInstance;
use ruststream_runtime::{
    Delivery, LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant, log::LogSink,
    testing::InProcessStreams,
};
use ruststream_tests::bench::{self, block_on};
use ruststream_tests::guests;

const RECORDS_PER_ROUND: usize = 20_000;
const ROUNDS: usize = 25;
const WARMUP_ROUNDS: usize = 2;

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let payloads = payloads(RECORDS_PER_ROUND);
    let deliveries: Vec<Delivery> = payloads.iter().enumerate().map(delivery).collect();
    let chunks: BTreeMap<usize, Vec<Arc<Vec<Delivery>>>> = [1, 100, 1000]
        .into_iter()
        .map(|size| {
            (
                size,
                deliveries
                    .chunks(size)
                    .map(|c| Arc::new(c.to_vec()))
                    .collect(),
            )
        })
        .collect();

    let mut variants = vec![Variant::native()];
    for deadlines in [true, false] {
        let component = load(deadlines).await?;
        for batch in [100, 1000, 1] {
            variants.push(Variant::component(&component, batch, deadlines));
        }
    }

    let mut samples = vec![Vec::with_capacity(ROUNDS); variants.len()];
    for round in 0..WARMUP_ROUNDS + ROUNDS {
        for (variant, samples) in variants.iter_mut().zip(&mut samples) {
            let ns = variant.round(&payloads, &chunks).await?;
            if round >= WARMUP_ROUNDS {
                samples.push(ns);
            }
        }
    }
    report(&variants, &mut samples);
    Ok(())
}

async fn load(deadlines: bool) -> anyhow::Result<LoadedComponent> {
    let config = RuntimeConfig {
        deadlines,
        // In process: our own guest examples are trusted, and a bench binary does not
        // serve the compile worker.
        ..RuntimeConfig::in_process()
    };
    let runtime = Runtime::new(config)?;
    let path = guests::BENCH_LEDGER.path();
    let tenant = Arc::new(Tenant::trusted("bench"));
    LoadedComponent::from_file(&runtime, &path, tenant.policy(), &LogSink::new())
        .await
        .with_context(|| format!("loading {}", path.display()))
}

struct Variant {
    name: String,
    batch: usize,
    /// `None` for the native baseline.
    instance: Option<HandlerInstance>,
}

impl Variant {
    fn native() -> Self {
        Self {
            name: "native (same handler, in process)".into(),
            batch: 1,
            instance: None,
        }
    }

    fn component(component: &LoadedComponent, batch: usize, deadlines: bool) -> Self {
        let clock = Arc::new(SystemClock);
        let streams = Arc::new(InProcessStreams::new(clock.clone()));
        let tenant = Arc::new(Tenant::trusted("bench"));
        let instance = component.instance(component.env(
            tenant.policy().clone(),
            streams,
            clock,
            LogSink::new(),
        ));
        let calls = match batch {
            1 => "one call per record".to_owned(),
            n => format!("batch of {n}"),
        };
        let limits = if deadlines {
            "default limits"
        } else {
            "no deadlines"
        };
        Self {
            name: format!("component, {calls}, {limits}"),
            batch,
            instance: Some(instance),
        }
    }

    /// Runs one round over every record; returns ns per record.
    async fn round(
        &mut self,
        payloads: &[Vec<u8>],
        chunks: &BTreeMap<usize, Vec<Arc<Vec<Delivery>>>>,
    ) -> anyhow::Result<f64> {
        let start = Instant::now();
        let acked = match &mut self.instance {
            None => payloads
                .iter()
                .filter(|p| native(p) == Outcome::Ack)
                .count(),
            Some(instance) => {
                let chunks = chunks.get(&self.batch).context("no chunks of that size")?;
                dispatch(instance, chunks).await?
            }
        };
        let ns = start.elapsed().as_nanos() as f64 / payloads.len() as f64;
        // Every variant must do the same work: most entries are acked.
        anyhow::ensure!(
            acked * 10 >= payloads.len() * 9,
            "{}: only {acked} acks",
            self.name
        );
        Ok(ns)
    }
}

async fn dispatch(
    instance: &mut HandlerInstance,
    chunks: &[Arc<Vec<Delivery>>],
) -> anyhow::Result<usize> {
    let mut acked = 0;
    for deliveries in chunks {
        let outcomes = bench::call_batch(instance, deliveries).await?;
        acked += outcomes.iter().filter(|o| **o == Outcome::Ack).count();
    }
    Ok(acked)
}

/// The native baseline: what a native Rust service does per record.
fn native(payload: &[u8]) -> Outcome {
    let outcome = match serde_json::from_slice::<ledger::Entry>(payload) {
        Ok(entry) => block_on(ledger::classify::call(&entry)),
        Err(_) => ruststream::HandlerOutcome::drop(),
    };
    if outcome.is_ack() {
        Outcome::Ack
    } else {
        Outcome::Drop
    }
}

/// ~100-byte ledger entries; one in 50 is empty (dropped).
fn payloads(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let amount = if i % 50 == 0 { 0 } else { (i as i64 % 9000) + 1 };
            format!(
                r#"{{"id":{},"amount":{amount},"account":"DE{:020}","currency":"EUR","memo":"invoice {i}"}}"#,
                i + 1,
                i * 7919
            )
            .into_bytes()
        })
        .collect()
}

fn delivery((i, payload): (usize, &Vec<u8>)) -> Delivery {
    Delivery {
        sequence_number: format!("4960{:052}", i + 1).into(),
        partition_key: format!("account-{}", i % 64).into(),
        arrival_ms: 1_767_225_600_000 + i as u64,
        payload: payload.clone().into(),
        headers: Vec::new(),
        retry_count: 0,
        due_at_ms: None,
        copy: None,
    }
}

fn report(variants: &[Variant], samples: &mut [Vec<f64>]) {
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    let native = medians[0];
    println!(
        "\ndispatch: {RECORDS_PER_ROUND} records per round, median of {ROUNDS} interleaved rounds\n"
    );
    println!("{:<52} {:>10} {:>9}", "variant", "ns/record", "× native");
    for (variant, (median, samples)) in variants.iter().zip(medians.iter().zip(samples.iter())) {
        let spread = samples.last().unwrap_or(median) - samples.first().unwrap_or(median);
        println!(
            "{:<52} {:>10.1} {:>8.2}×   (min {:.1}, spread {:.1})",
            variant.name,
            median,
            median / native,
            samples.first().unwrap_or(median),
            spread
        );
    }
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}
