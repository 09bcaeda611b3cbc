//! Where a record of a Python or JavaScript tenant goes, against the Rust one.
//!
//! `cargo bench -p ruststream-tests --bench polyglot` runs the seed's settlement example in Rust
//! (`guest-examples/settlement`), Python (componentize-py) and JavaScript (ComponentizeJS),
//! each through `handle`, one call per record, on this thread with the default limits, and
//! prints the CPU time per record of each and its ratio to Rust's in the same run: with the
//! calls made inside the component by the host's adapter (what a tenant gets), and made from
//! the host (`RuntimeConfig::handle_adapter` off), and the ratio of the two. (The Rust
//! example exports `handle-batch` too: the host wraps it with its adapter only when told to,
//! `HandleAdapter::All`.)
//!
//! `-- <language>` runs one of them alone (`rust`, `python`, `javascript`) with wasmtime's perf
//! map on, for a profile that names the guest's functions:
//!
//! ```text
//! perf record -F 999 -o perf.data -- target/release/deps/polyglot-<hash> python
//! perf report -i perf.data --no-children --sort dso,sym
//! ```
//!
//! docs/benchmarks.md splits those profiles into the host's side of the call, the guest's
//! bindings and its interpreter.

#[path = "common/settlement.rs"]
mod settlement;
#[path = "common/thread_cpu.rs"]
mod thread_cpu;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ruststream_runtime::component::HandleAdapter;
use ruststream_runtime::component::HandlerInstance;
use ruststream_runtime::component::compile::CompileConfig;
use ruststream_runtime::cpu::Compute;
use ruststream_runtime::log::LogSink;
use ruststream_runtime::testing::InProcessStreams;
use ruststream_runtime::{
    Delivery, LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant,
};
use ruststream_tests::bench::{self, target_dir};
use settlement::{LANGUAGES, component};
use thread_cpu::thread_cpu;

/// Records per measured run, in batches of [`BATCH`] (each record one `handle` call).
const RECORDS: usize = 4_000;
/// Records per run under a profiler: enough that loading (the perf map's writes above all)
/// is a small part of the profile.
const PROFILED_RECORDS: usize = 40_000;
const BATCH: usize = 100;

fn main() -> anyhow::Result<()> {
    let alone = settlement::named();
    let profiling = !alone.is_empty();
    let languages = if profiling { alone } else { LANGUAGES.to_vec() };
    let records = if profiling { PROFILED_RECORDS } else { RECORDS };
    println!("\npolyglot: the settlement example through `handle`, {records} records each\n");
    println!(
        "{:<12} {:>14} {:>8} {:>16} {:>13}",
        "language", "CPU/record", "× rust", "from the host", "adapter/host"
    );
    let mut rust = None;
    for language in languages {
        let per_record = measure(language, records, profiling, true)?;
        let base = *rust.get_or_insert(per_record);
        let from_host = match profiling {
            true => None,
            false => Some(measure(language, records, false, false)?),
        };
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{language:<12} {:>11.1} µs {:>7.1}× {:>13} {:>13}",
            micros(per_record),
            per_record.as_secs_f64() / base.as_secs_f64(),
            from_host.map_or(String::new(), |d| format!("{:.1} µs", micros(d))),
            from_host.map_or(String::new(), |d| format!(
                "{:.2}×",
                per_record.as_secs_f64() / d.as_secs_f64()
            )),
        );
    }
    Ok(())
}

/// This thread's CPU time per record of `language`, after a warm-up run; through the host's
/// adapter when `handle_adapter`, from the host otherwise.
fn measure(
    language: &str,
    records: usize,
    perf_map: bool,
    handle_adapter: bool,
) -> anyhow::Result<Duration> {
    let path = component(language)?;
    let config = RuntimeConfig {
        compute: Compute::Inline,
        compile: CompileConfig {
            cache: Some(target_dir()?.join("compile-cache")),
            ..CompileConfig::in_process()
        },
        perf_map,
        handle_adapter: match handle_adapter {
            true => HandleAdapter::All,
            false => HandleAdapter::Off,
        },
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config)?;
    let tenant = Tenant::trusted("polyglot");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let component = rt
        .block_on(LoadedComponent::from_file(
            &runtime,
            &path,
            tenant.policy(),
            &LogSink::new(),
        ))
        .with_context(|| format!("loading {}", path.display()))?
        .through_handle();
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let env = component.env(tenant.policy().clone(), streams, clock, LogSink::new());
    let mut instance = component.instance(env);
    let batches: Vec<Arc<Vec<Delivery>>> = (0..records / BATCH)
        .map(|n| Arc::new(bench::consume_json_batch(n * BATCH..(n + 1) * BATCH)))
        .collect();
    run(&rt, &mut instance, &batches[..1])?;
    let started = thread_cpu();
    run(&rt, &mut instance, &batches)?;
    let spent = thread_cpu().saturating_sub(started);
    Ok(spent / u32::try_from(records)?)
}

/// Hands every batch to `instance`; every record must be acked.
fn run(
    rt: &tokio::runtime::Runtime,
    instance: &mut HandlerInstance,
    batches: &[Arc<Vec<Delivery>>],
) -> anyhow::Result<()> {
    for batch in batches {
        let outcomes = rt.block_on(bench::call_batch(instance, batch))?;
        ensure!(
            outcomes.iter().all(|o| *o == Outcome::Ack),
            "every record acked: {outcomes:?}"
        );
    }
    Ok(())
}
