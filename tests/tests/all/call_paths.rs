//! The two ways records reach a component, `handle-batch` and `handle` once per record: what
//! each allocates on the host per record, and whose output is whose.
//!
//! Allocations are counted by a global allocator while a thread asks for it: the
//! `handle-batch` path allocates nothing per record on the host side, and the `handle` path
//! one: wasmtime's, the box of the fiber each `call_async` runs on
//! (`wasmtime::runtime::fiber::make_fiber_unchecked`, found by a backtrace per counted
//! allocation). The host's own part allocates nothing. A count, not a timing: it is the same
//! on a loaded machine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use anyhow::Context as _;
use ruststream_runtime::component::HandleAdapter;
use ruststream_runtime::component::HandlerInstance;
use ruststream_runtime::component::compile::CompileConfig;
use ruststream_runtime::cpu::Compute;
use ruststream_runtime::log::LogSink;
use ruststream_runtime::testing::InProcessStreams;
use ruststream_runtime::{
    Delivery, LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant,
};
use ruststream_tests::{Guest, bench, guests};

/// Counts the allocations of the threads that set [`COUNTING`]; forwards every call to the
/// system allocator unchanged.
struct CountingAlloc;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; counting touches only
// thread-local cells, which never allocate (const-initialised).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count() {
    // `try_with`: a thread being torn down has no cells left, and counts nothing.
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The allocations this thread made while running `f`.
fn allocations_of<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let value = f();
    COUNTING.with(|c| c.set(false));
    (value, ALLOCATIONS.with(Cell::get) - before)
}

/// How a test calls a component.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// `handle-batch`.
    Batch,
    /// `handle`, one call per record, made by the host's adapter inside the component.
    Handle,
    /// `handle`, one call per record, made by the host.
    HandleFromHost,
}

/// `guest` called along `along`, on this thread (no compute pool), deadlines and the default
/// limits on, logging to `log`.
async fn instance(guest: Guest, along: Path, log: LogSink) -> anyhow::Result<HandlerInstance> {
    let config = RuntimeConfig {
        compute: Compute::Inline,
        compile: CompileConfig::in_process(),
        handle_adapter: match along {
            Path::Batch => HandleAdapter::default(),
            Path::Handle => HandleAdapter::All,
            Path::HandleFromHost => HandleAdapter::Off,
        },
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config)?;
    let path = guest.path();
    let tenant = Tenant::trusted("allocations");
    let component = LoadedComponent::from_file(&runtime, &path, tenant.policy(), &LogSink::new())
        .await
        .with_context(|| format!("loading {}", path.display()))?;
    let component = match along {
        Path::Batch => component,
        Path::Handle | Path::HandleFromHost => component.through_handle(),
    };
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let env = component.env(tenant.policy().clone(), streams, clock, log);
    Ok(component.instance(env))
}

/// Hands `deliveries` to `instance` in one batch call; the outcomes.
fn call(
    rt: &tokio::runtime::Runtime,
    instance: &mut HandlerInstance,
    deliveries: &Arc<Vec<Delivery>>,
) -> anyhow::Result<Vec<Outcome>> {
    rt.block_on(bench::call_batch(instance, deliveries))
}

/// Records `range` of the seed's `consume_json` workload, shared.
fn batch(range: std::ops::Range<usize>) -> Arc<Vec<Delivery>> {
    Arc::new(bench::consume_json_batch(range))
}

/// What one more record costs in host allocations: a batch of `2n` against one of `n`.
fn allocations_per_record(path: Path) -> anyhow::Result<f64> {
    const N: usize = 200;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut instance = rt.block_on(instance(guests::BENCH_BOOK, path, LogSink::new()))?;
    // Outside the count: the instance is made at the first call, and buffers grow to a batch.
    for warm in [batch(0..1), batch(0..2 * N)] {
        call(&rt, &mut instance, &warm)?;
    }
    let (small, large) = (batch(0..N), batch(0..2 * N));
    let (outcomes, small) = allocations_of(|| call(&rt, &mut instance, &small));
    anyhow::ensure!(
        outcomes?.iter().all(|o| *o == Outcome::Ack),
        "every record acked"
    );
    let (outcomes, large) = allocations_of(|| call(&rt, &mut instance, &large));
    anyhow::ensure!(outcomes?.len() == 2 * N, "every record handled");
    Ok((large as f64 - small as f64) / N as f64)
}

#[test]
fn handle_allocates_nothing_per_record() -> anyhow::Result<()> {
    // One host call per batch: the host's adapter calls `handle` inside the component.
    let per_record = allocations_per_record(Path::Handle)?;
    assert!(
        per_record < 0.05,
        "the handle path allocates {per_record:.2} times per record on the host"
    );
    Ok(())
}

#[test]
fn handle_from_the_host_allocates_nothing_of_its_own_per_record() -> anyhow::Result<()> {
    let per_record = allocations_per_record(Path::HandleFromHost)?;
    // wasmtime's fiber box per call is the one; any allocation of ours per record would add
    // another (the call's setup per record cost one more before it was made once per batch).
    assert!(
        per_record < 1.05,
        "handle called from the host allocates {per_record:.2} times per record on the host: \
         one is wasmtime's fiber per call, the rest are ours"
    );
    Ok(())
}

#[test]
fn handle_batch_allocates_nothing_per_record() -> anyhow::Result<()> {
    let per_record = allocations_per_record(Path::Batch)?;
    assert!(
        per_record < 0.05,
        "the handle-batch path allocates {per_record:.2} times per record on the host"
    );
    Ok(())
}

/// Each `handle` call of a run writes to stdout and stderr under its own record: every line is
/// logged with the sequence number of the record whose call wrote it.
#[test]
fn each_handle_call_s_output_is_logged_under_its_own_record() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Inside the component the host notes whose each write is as it is made; from the host,
    // it logs a record's output before the next call.
    for path in [Path::Handle, Path::HandleFromHost] {
        let log = LogSink::capturing();
        let mut instance = rt.block_on(instance(guests::HOSTILE_ESCAPE, path, log.clone()))?;
        let records = batch(0..3);
        let outcomes = call(&rt, &mut instance, &records)?;
        anyhow::ensure!(outcomes.len() == 3, "every record handled: {outcomes:?}");
        let sequences: Vec<&str> = records.iter().map(|r| r.sequence_number.as_str()).collect();
        for fd in ["stdout", "stderr"] {
            let tagged: Vec<Option<String>> = (log.captured().into_iter())
                .filter(|line| line.field("fd") == Some(fd))
                .map(|line| line.sequence_number)
                .collect();
            let expected: Vec<Option<String>> =
                sequences.iter().map(|s| Some((*s).to_owned())).collect();
            assert_eq!(
                tagged, expected,
                "{path:?}, {fd}: one line per record, under its record"
            );
        }
    }
    Ok(())
}
