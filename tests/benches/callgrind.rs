//! Instructions and host heap allocations per message, counted by callgrind: repeatable on a
//! noisy machine, where timings are not.
//!
//! `cargo bench -p ruststream-tests --bench callgrind` runs each variant under
//! `valgrind --tool=callgrind` twice, over M and 2M messages, and reports
//! (I(2M) − I(M)) / M: what one more message costs, setup and teardown cancelled out. Only
//! the measured function is counted (`--toggle-collect`): building the records a transport
//! would have read is the harness's part, not the host's. The workload is the seed's own
//! `consume_json` benchmark: a two-field JSON body `{"id":1000000,"amount":37}` decoded by the
//! seed's `book` handler (`tests/guests/bench-book/src/book.rs`).
//!
//! - `native`: that handler compiled into this binary, called per message: the baseline;
//! - `instance`: one `handle-batch` call per 1 000 messages on a component instance, default
//!   limits (deadlines on): the sandbox crossing and the guest;
//! - `handle`: the same component and messages through `handle`, one call per message (the
//!   base contract, what a component without the batch fast path gets), made by the host's
//!   adapter inside the component, one host call per batch; default limits;
//! - `handle-host`: the same with each `handle` call made by the host (a component the
//!   adapter does not fit);
//! - `no-deadline`: the same with deadlines (epoch interruption) off: what they cost;
//! - `fuel`: the same bounded by fuel instead of epochs (wasmtime's other way to interrupt a
//!   guest): what it would cost instead;
//! - `pipeline`: one `ShardPipeline` fed batches of 1 000, default limits: what the host does
//!   per record read from a shard, settlement and checkpoint included;
//! - `handle-pipeline`: the same through `handle`;
//! - `metrics`: the same with the Prometheus recorder installed, as `ruststream run` does
//!   (without one, the `metrics` macros do nothing).
//!
//! The callgrind profiles stay in `<target>/callgrind/` for `callgrind_annotate`. Variants
//! named after `--` run alone, beside `native`: `cargo bench -p ruststream-tests --bench
//! callgrind -- handle instance`.
//!
//! With `RUSTSTREAM_CALLGRIND_GUESTS=1` in the environment, each variant's line is followed by
//! the guest functions it spent the most in, per message: callgrind cannot name compiled guest
//! code, so the children turn on wasmtime's perf map and the profiles keep a count per
//! instruction (`common/guest_profile.rs`). The guests are built stripped, so their functions
//! are numbered; for names, build `bench-book` unstripped where the bench loads it (`cd
//! tests/guests && CARGO_PROFILE_RELEASE_STRIP=false cargo build --release --target
//! wasm32-wasip2 -p bench-book --target-dir ../../target/guests`), until the next build of
//! the guests replaces it.

#[path = "common/guest_profile.rs"]
mod guest_profile;

#[path = "../guests/bench-book/src/book.rs"]
#[allow(
    unreachable_pub,
    reason = "the guest's own items, public in the guest crate"
)]
mod book;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::{Pin, pin};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use anyhow::{Context as _, bail, ensure};
use ruststream_runtime::component::HandleAdapter;
use ruststream_runtime::{
    Delivery, LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant,
    component::HandlerInstance, component::compile::CompileConfig, cpu::Compute, log::LogSink,
    testing::InProcessStreams,
};
use ruststream_tests::bench::{self, block_on, target_dir};
use ruststream_tests::guests;

/// Messages of the smaller run; the larger one has twice as many.
const MESSAGES: usize = 10_000;
const BATCH: usize = 1_000;
const CHILD: &str = "--child";
/// Set (to anything) to split each variant's guest instructions by function.
const GUESTS: &str = "RUSTSTREAM_CALLGRIND_GUESTS";
/// Guest functions shown per variant.
const GUEST_LINES: usize = 6;
const VARIANTS: [&str; 9] = [
    "native",
    "instance",
    "handle",
    "handle-host",
    "no-deadline",
    "fuel",
    "pipeline",
    "handle-pipeline",
    "metrics",
];

/// Counts allocations made while [`COUNTING`] is set: the host's heap traffic per message.
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; counting has no effect
// on the memory returned.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|arg| arg == CHILD) {
        Some(at) => {
            let variant = args.get(at + 1).context("--child needs a variant")?;
            let messages = args.get(at + 2).context("--child needs a count")?.parse()?;
            let cache = args.get(at + 3).context("--child needs a cache dir")?;
            child(variant, messages, Path::new(cache))
        }
        None => {
            // `cargo bench ... -- handle instance`: those variants alone (and `native`, the
            // baseline); cargo's own `--bench` flag is not a variant.
            let only: Vec<&str> = (args.iter().skip(1))
                .map(String::as_str)
                .filter(|arg| VARIANTS.contains(arg))
                .collect();
            parent(&only)
        }
    }
}

/// Runs every variant (or `only` those, beside `native`) at M and 2M messages under callgrind
/// and prints the marginal costs.
fn parent(only: &[&str]) -> anyhow::Result<()> {
    let valgrind = Command::new("valgrind").arg("--version").output();
    ensure!(
        valgrind.is_ok_and(|out| out.status.success()),
        "valgrind is not installed: `apt-get install valgrind` (`.ci/run` does)"
    );
    let out_dir = target_dir()?.join("callgrind");
    let cache = out_dir.join("artifacts");
    std::fs::create_dir_all(&cache)?;
    // Compile outside valgrind; the children load the cached artifact.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            load(&cache, true).await?;
            load_adapter(&cache, HandleAdapter::All).await?;
            load_adapter(&cache, HandleAdapter::Off).await?;
            load(&cache, false).await
        })?;

    println!("\ncallgrind: marginal cost of one message, (I(2M) − I(M)) / M, M = {MESSAGES}\n");
    println!(
        "{:<16} {:>14} {:>13} {:>9} {:>9}",
        "variant", "instr/message", "allocs/msg", "× native", "× batch"
    );
    let mut native = None;
    let mut measured = HashMap::new();
    let chosen = VARIANTS
        .into_iter()
        .filter(|v| only.is_empty() || *v == "native" || only.contains(v));
    for variant in chosen {
        let small = measure(variant, MESSAGES, &cache, &out_dir)?;
        let large = measure(variant, 2 * MESSAGES, &cache, &out_dir)?;
        let per = |a: u64, b: u64| (b as f64 - a as f64) / MESSAGES as f64;
        let instructions = per(small.instructions, large.instructions);
        let allocations = per(small.allocations, large.allocations);
        let base = *native.get_or_insert(instructions);
        measured.insert(variant, instructions);
        // `handle` against `handle-batch` on the same build: the instance alone, and through
        // a pipeline.
        let batch = match variant {
            "handle" | "handle-host" => measured.get("instance"),
            "handle-pipeline" => measured.get("pipeline"),
            _ => None,
        };
        let against_batch = batch.map_or(String::new(), |batch| {
            format!("{:.2}×", instructions / batch)
        });
        println!(
            "{variant:<16} {instructions:>14.0} {allocations:>13.3} {:>8.2}× {against_batch:>9}",
            instructions / base
        );
        print_guest_functions(&small.guests, &large.guests);
    }
    println!("\nprofiles: {}", out_dir.display());
    if split_guests() {
        // The map of the components compiled above, which nothing else reads.
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", std::process::id()));
    }
    Ok(())
}

struct Counts {
    instructions: u64,
    allocations: u64,
    /// Instructions by guest function, when [`GUESTS`] is set.
    guests: HashMap<String, u64>,
}

fn split_guests() -> bool {
    std::env::var_os(GUESTS).is_some()
}

/// The guest functions that cost the most per message, from the runs of M and 2M messages.
fn print_guest_functions(small: &HashMap<String, u64>, large: &HashMap<String, u64>) {
    let mut costs: Vec<(f64, &str)> = large
        .iter()
        .map(|(name, &count)| {
            let before = small.get(name).copied().unwrap_or(0);
            (
                (count as f64 - before as f64) / MESSAGES as f64,
                name.as_str(),
            )
        })
        .filter(|(per_message, _)| *per_message >= 0.5)
        .collect();
    costs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = costs.iter().map(|(cost, _)| cost).sum();
    if !costs.is_empty() {
        println!("{:<16} {total:>14.0}  in the guest, of which:", "");
    }
    for (cost, name) in costs.into_iter().take(GUEST_LINES) {
        let name: String = name.chars().take(120).collect();
        println!("{:<16} {cost:>14.0}  {name}", "");
    }
}

fn measure(variant: &str, messages: usize, cache: &Path, out_dir: &Path) -> anyhow::Result<Counts> {
    let profile = out_dir.join(format!("{variant}-{messages}.out"));
    let mut valgrind = Command::new("valgrind");
    if split_guests() {
        valgrind.arg("--dump-instr=yes");
    }
    let output = valgrind
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg("--toggle-collect=*measured_poll*")
        .arg(std::env::current_exe()?)
        .args([CHILD, variant, &messages.to_string()])
        .arg(cache)
        // glibc copies large buffers with `rep movsb` or with a vector loop, chosen by size
        // and by the buffers' addresses; callgrind counts `rep movsb` once per byte moved, so
        // the batch copies' count moved by ~150 per message between builds with no change
        // in the work. The vector loop throughout keeps counts comparable.
        .env(
            "GLIBC_TUNABLES",
            "glibc.cpu.x86_rep_movsb_threshold=4294967295",
        )
        .output()
        .context("running valgrind")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "{variant} ({messages} messages) failed under valgrind:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let allocations = stdout
        .lines()
        .find_map(|line| line.strip_prefix("allocations "))
        .context("the child reported no allocation count")?
        .trim()
        .parse()?;
    let guests = if split_guests() && variant != "native" {
        guest_profile::guest_functions(&profile)?
    } else {
        HashMap::new()
    };
    Ok(Counts {
        instructions: total_instructions(&profile)?,
        allocations,
        guests,
    })
}

/// The `totals:` (or `summary:`) line of a callgrind profile: instructions counted.
fn total_instructions(profile: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(profile)
        .with_context(|| format!("reading {}", profile.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|count| count.split_whitespace().next())
        .with_context(|| format!("no totals in {}", profile.display()))?
        .parse()
        .with_context(|| format!("bad totals in {}", profile.display()))
}

async fn load(cache: &Path, deadlines: bool) -> anyhow::Result<LoadedComponent> {
    load_with(cache, deadlines, false).await
}

/// As [`load`] with deadlines, wrapped with the host's `handle` adapter as `adapter` says (by
/// default it is not: `bench-book` exports `handle-batch`).
async fn load_adapter(cache: &Path, adapter: HandleAdapter) -> anyhow::Result<LoadedComponent> {
    load_config(cache, true, false, adapter).await
}

/// As [`load`], metering fuel when `fuel` is set.
async fn load_with(cache: &Path, deadlines: bool, fuel: bool) -> anyhow::Result<LoadedComponent> {
    load_config(cache, deadlines, fuel, HandleAdapter::default()).await
}

async fn load_config(
    cache: &Path,
    deadlines: bool,
    fuel: bool,
    handle_adapter: HandleAdapter,
) -> anyhow::Result<LoadedComponent> {
    let config = RuntimeConfig {
        deadlines,
        fuel,
        handle_adapter,
        // On the measured thread: callgrind's toggle counts the thread that polls, and a
        // compute pool's threads would go uncounted.
        compute: Compute::Inline,
        compile: CompileConfig {
            cache: Some(cache.to_owned()),
            // In process: our own guest examples are trusted, and a bench binary does not
            // serve the compile worker.
            ..CompileConfig::in_process()
        },
        // Names compiled guest code for the guest split (an engine setting, so the artifacts
        // the parent compiles are the ones the children load).
        perf_map: split_guests(),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config)?;
    let path = guests::BENCH_BOOK.path();
    let tenant = Tenant::trusted("bench");
    LoadedComponent::from_file(&runtime, &path, tenant.policy(), &LogSink::new())
        .await
        .with_context(|| format!("loading {}", path.display()))
}

/// Runs `messages` through `variant`, counting only inside [`measured_poll`], and prints the
/// allocations made there.
fn child(variant: &str, messages: usize, cache: &Path) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handled = rt.block_on(async {
        match variant {
            "native" => Ok(native_run(messages)),
            "instance" => instance_run(&load(cache, true).await?, messages).await,
            "handle" => {
                let component = load_adapter(cache, HandleAdapter::All)
                    .await?
                    .through_handle();
                instance_run(&component, messages).await
            }
            "handle-host" => {
                let component = load_adapter(cache, HandleAdapter::Off)
                    .await?
                    .through_handle();
                instance_run(&component, messages).await
            }
            "no-deadline" => instance_run(&load(cache, false).await?, messages).await,
            "fuel" => instance_run(&load_with(cache, false, true).await?, messages).await,
            "pipeline" => pipeline_run(&load(cache, true).await?, messages).await,
            "handle-pipeline" => {
                let component = load_adapter(cache, HandleAdapter::All)
                    .await?
                    .through_handle();
                pipeline_run(&component, messages).await
            }
            "metrics" => {
                let recorder =
                    metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
                metrics::set_global_recorder(recorder)?;
                pipeline_run(&load(cache, true).await?, messages).await
            }
            other => bail!("unknown variant {other}"),
        }
    })?;
    ensure!(
        handled == messages,
        "{variant}: {handled} of {messages} handled"
    );
    println!("allocations {}", ALLOCATIONS.load(Ordering::Relaxed));
    Ok(())
}

/// Counts `future`'s polls, and only them: what a transport or the executor does between
/// polls is not the host's per-message cost.
async fn measured<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    std::future::poll_fn(|cx| measured_poll(future.as_mut(), cx)).await
}

/// The function callgrind's `--toggle-collect` names: everything below it is counted. Not
/// generic and never inlined, so its symbol exists whatever the future.
#[inline(never)]
fn measured_poll<T>(future: Pin<&mut dyn Future<Output = T>>, cx: &mut Context<'_>) -> Poll<T> {
    COUNTING.store(true, Ordering::Relaxed);
    let poll = future.poll(cx);
    COUNTING.store(false, Ordering::Relaxed);
    poll
}

fn native_run(messages: usize) -> usize {
    let payloads: Vec<Vec<u8>> = (0..messages).map(bench::consume_json_payload).collect();
    block_on(measured(async {
        payloads
            .iter()
            .filter(|payload| native(payload) == Outcome::Ack)
            .count()
    }))
}

/// What a native service does per message: decode, then the handler.
fn native(payload: &[u8]) -> Outcome {
    let outcome = match serde_json::from_slice::<book::Entry>(payload) {
        Ok(entry) => block_on(book::book::call(&entry)),
        Err(_) => ruststream::HandlerOutcome::drop(),
    };
    if outcome.is_ack() {
        Outcome::Ack
    } else {
        Outcome::Drop
    }
}

async fn instance_run(component: &LoadedComponent, messages: usize) -> anyhow::Result<usize> {
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let tenant = Tenant::trusted("bench");
    let mut instance =
        component.instance(component.env(tenant.policy().clone(), streams, clock, LogSink::new()));
    let mut acked = 0;
    // A first call outside the count: the instance is created lazily.
    let warm = Arc::new(bench::consume_json_batch(0..1));
    call(&mut instance, &warm).await?;
    for start in (0..messages).step_by(BATCH) {
        let batch = Arc::new(bench::consume_json_batch(start..start + BATCH));
        acked += measured(call(&mut instance, &batch)).await?;
    }
    Ok(acked)
}

async fn call(
    instance: &mut HandlerInstance,
    deliveries: &Arc<Vec<Delivery>>,
) -> anyhow::Result<usize> {
    let outcomes = bench::call_batch(instance, deliveries).await?;
    Ok(outcomes.iter().filter(|o| **o == Outcome::Ack).count())
}

async fn pipeline_run(component: &LoadedComponent, messages: usize) -> anyhow::Result<usize> {
    let mut pipeline = bench::pipeline(component, Arc::new(Tenant::trusted("bench")))?;
    // The first batch outside the count: the instance is created lazily.
    let mut next = 0;
    for first in [true, false] {
        let count = if first { 1 } else { messages };
        for start in (next..next + count).step_by(BATCH) {
            let batch = bench::consume_json_batch(start..(start + BATCH).min(next + count));
            if first {
                pipeline.deliver(batch).await;
            } else {
                measured(pipeline.deliver(batch)).await;
            }
        }
        next += count;
    }
    ensure!(pipeline.is_settled(), "records left unhandled");
    let last = bench::consume_json_sequence(next - 1);
    ensure!(
        pipeline.checkpoint() == Some(last.as_str()),
        "the checkpoint is not at the last record"
    );
    Ok(messages)
}
