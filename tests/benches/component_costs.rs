//! What a component costs the host before its first record and at it: compiling, the compiled
//! artifact the cache keeps, a load from that cache, and a fresh instance.
//!
//! `cargo bench -p ruststream-tests --bench component_costs` takes the seed's settlement
//! example in Rust (`guest-examples/settlement`), Python (componentize-py) and JavaScript
//! (ComponentizeJS) and prints, for each, the medians of [`ROUNDS`] rounds:
//!
//! - `wasm`: the component's size;
//! - `artifact`: what the compile cache holds for it once compiled (what a host maps);
//! - `compile`: CPU time of every thread (compiling is parallel) of a load with an empty
//!   cache, less that of a load from the cache: what compiling costs;
//! - `cached load`: wall time of a load from the cache (the artifact mapped, an instance made
//!   to ask the component what it subscribes to);
//! - `instantiate`: this thread's CPU time of a fresh instance's first record, less that of a
//!   record on an instance that has handled one: what making an instance costs a record.
//!
//! `-- python` (or `rust`, `javascript`) measures that language alone. Each round uses its own
//! `Runtime` and cache directory, so no load shares code with another.
//! The figures are timings: compare builds (two wasmtime versions:
//! `tests/wasmtime-next/run`) by running them alternately on one machine.

#[path = "common/process_cpu.rs"]
mod common_cpu;
#[path = "common/settlement.rs"]
mod settlement;
#[path = "common/thread_cpu.rs"]
mod thread_cpu;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use common_cpu::process_cpu;
use ruststream_runtime::component::compile::CompileConfig;
use ruststream_runtime::cpu::Compute;
use ruststream_runtime::log::LogSink;
use ruststream_runtime::testing::InProcessStreams;
use ruststream_runtime::{LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant};
use ruststream_tests::bench::{self, target_dir};
use settlement::{LANGUAGES, component};
use thread_cpu::thread_cpu;

/// Rounds per figure; each compiles every component once.
const ROUNDS: usize = 3;
/// Instances made per round for `instantiate`.
const INSTANCES: usize = 10;

fn main() -> anyhow::Result<()> {
    let named = settlement::named();
    let languages = if named.is_empty() {
        LANGUAGES.to_vec()
    } else {
        named
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "\ncomponent costs (wasmtime {}, medians of {ROUNDS} rounds)\n",
        wasmtime_version()?
    );
    println!(
        "{:<12} {:>10} {:>10} {:>12} {:>12} {:>12}",
        "", "wasm", "artifact", "compile", "cached load", "instantiate"
    );
    for language in languages {
        let path = component(language)?;
        let wasm = std::fs::metadata(&path)?.len();
        let mut rounds = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            let cache = target_dir()?
                .join("component-costs")
                .join(format!("{language}-{round}"));
            let _ = std::fs::remove_dir_all(&cache);
            rounds.push(measure(&rt, &path, &cache)?);
            std::fs::remove_dir_all(&cache)
                .with_context(|| format!("removing {}", cache.display()))?;
        }
        let median = |figure: fn(&Round) -> Duration| {
            let mut all: Vec<Duration> = rounds.iter().map(figure).collect();
            all.sort();
            all[all.len() / 2]
        };
        let artifact = rounds.iter().map(|r| r.artifact).max().unwrap_or(0);
        println!(
            "{language:<12} {:>10} {:>10} {:>10.2} s {:>9.2} ms {:>9.0} µs",
            kib(wasm),
            kib(artifact),
            median(|r| r.compile).as_secs_f64(),
            median(|r| r.cached_load).as_secs_f64() * 1e3,
            median(|r| r.instantiate).as_secs_f64() * 1e6,
        );
    }
    Ok(())
}

/// The figures of one round.
struct Round {
    artifact: u64,
    compile: Duration,
    cached_load: Duration,
    instantiate: Duration,
}

/// One round of `path`, compiling into the empty cache directory `cache`.
fn measure(rt: &tokio::runtime::Runtime, path: &Path, cache: &Path) -> anyhow::Result<Round> {
    let runtime = || {
        Runtime::new(RuntimeConfig {
            compute: Compute::Inline,
            compile: CompileConfig {
                cache: Some(cache.to_path_buf()),
                ..CompileConfig::in_process()
            },
            ..RuntimeConfig::default()
        })
    };
    let tenant = Tenant::trusted("costs");
    let load = |runtime: &Runtime| {
        rt.block_on(LoadedComponent::from_file(
            runtime,
            path,
            tenant.policy(),
            &LogSink::new(),
        ))
        .with_context(|| format!("loading {}", path.display()))
    };

    let started = process_cpu();
    drop(load(&runtime()?)?);
    let cold = process_cpu().saturating_sub(started);
    let artifact = dir_size(cache)?;
    ensure!(
        artifact > 0,
        "the compile cache in {} is empty",
        cache.display()
    );

    let runtime = runtime()?;
    let started = process_cpu();
    let wall = Instant::now();
    let component = load(&runtime)?.through_handle();
    let cached_load = wall.elapsed();
    let cached = process_cpu().saturating_sub(started);

    let record = Arc::new(bench::consume_json_batch(0..1));
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let mut first = Vec::with_capacity(INSTANCES);
    let mut warm = Vec::with_capacity(INSTANCES);
    for _ in 0..INSTANCES {
        let env = component.env(
            tenant.policy().clone(),
            streams.clone(),
            clock.clone(),
            LogSink::new(),
        );
        let mut instance = component.instance(env);
        for times in [&mut first, &mut warm] {
            let started = thread_cpu();
            let outcomes = rt.block_on(bench::call_batch(&mut instance, &record))?;
            times.push(thread_cpu().saturating_sub(started));
            ensure!(outcomes == [Outcome::Ack], "the record acked: {outcomes:?}");
        }
    }
    first.sort();
    warm.sort();
    Ok(Round {
        artifact,
        compile: cold.saturating_sub(cached),
        cached_load,
        instantiate: first[INSTANCES / 2].saturating_sub(warm[INSTANCES / 2]),
    })
}

/// Bytes of every file under `dir`.
fn dir_size(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes.div_ceil(1024))
}

/// The wasmtime this benchmark was built with, as the workspace's lock file resolves it.
fn wasmtime_version() -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    let lock =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    lock.split_once("name = \"wasmtime\"\nversion = \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(version, _)| version.to_owned())
        .with_context(|| format!("{} locks no wasmtime", path.display()))
}
