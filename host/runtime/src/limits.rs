//! Resource limits of a tenant's components (calls, instances, output, copies and writes), and
//! the engine's settings with the compiler's (who compiles, within which bounds). The first
//! are public as `tenant::{Limits, ...}`, the others as `component::RuntimeConfig` and
//! `component::compile::{Compiler, ...}`.

use std::path::PathBuf;
use std::time::Duration;

/// Limits that apply to each call and instance of a tenant's components, and to what the host
/// writes for the tenant. [`Limits::default`] is what a tenant gets unless its configuration
/// overrides a value; `docs/sandbox.md` ("Defaults, and why") gives the reason for each default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Time one record of a call (a batch, or a single record) may take, host imports
    /// included. Instantiation and `describe` get the same deadline. On a compute pool it is
    /// the call's own time (its CPU, and its time blocked in imports; never the time it waited
    /// for a compute slot), else wall-clock time (see [`cpu`](crate::cpu)). Enforced only when
    /// the runtime has deadlines enabled; time spent blocked in a host import is bounded either
    /// way.
    pub call_deadline: Duration,
    /// The tenant's share of the compute threads against other tenants wanting more than
    /// there is, as cgroup v2's `cpu.weight` (1-10000, default 100): a tenant with 200 gets
    /// twice the CPU of one with 100, however many shards, subscriptions or shadows each runs.
    pub cpu_weight: u32,
    /// Most bytes one instance may hold in all its linear memories and tables together (a
    /// table element counts 8 bytes: a reference, as wasmtime stores it).
    pub memory_bytes: usize,
    /// Most bytes the tenant's instances on one host may reserve together, each reserving its
    /// [`memory_bytes`](Self::memory_bytes) while it exists: a shadow instance that does not
    /// fit is not created (its records are skipped), and a live instance is never refused
    /// (past the budget it runs, with one warning). `None`: no budget; what is reserved is
    /// still counted (see [`MemoryBudget`](crate::tenant::MemoryBudget)).
    pub memory_budget: Option<usize>,
    /// Most tables one component instance may create.
    pub max_tables: usize,
    /// Most linear memories one component instance may create.
    pub max_memories: usize,
    /// Most core instances one component instance may create.
    pub max_instances: usize,
    /// Most elements per table.
    pub max_table_elements: usize,
    /// Most host resources (streams, pollables, ...) one instance may hold at once: each lives
    /// in host memory, outside the instance's memory cap.
    pub max_host_resources: usize,
    /// Fuel one call may burn (a `handle` of a small record burns ~6 000), when the runtime
    /// meters fuel; `None` leaves calls unmetered.
    pub fuel: Option<u64>,
    /// Caps on what a call may write to the log (log import, stdout, stderr), and on what the
    /// host logs because of the tenant.
    pub log: LogLimits,
    /// Bounds on the delays of counted copies.
    pub copies: CopyLimits,
    /// The tenant's write quota: guest publishes, counted copies and dead letters together.
    pub writes: WriteLimits,
    /// Most subscriptions one component may declare.
    pub max_subscriptions: usize,
    /// Most metric series the tenant's subscriptions may have labelled as their own; past it
    /// further subscriptions share `subscriber="_other"` (see
    /// [`metrics::subscription_labels`](crate::metrics::subscription_labels)).
    pub max_metric_series: usize,
}

/// What one table element weighs against [`Limits::memory_bytes`]: a reference, as wasmtime
/// stores it.
pub(crate) const TABLE_ELEMENT_BYTES: usize = 8;

/// How much a component may log. Lines past a cap are dropped and counted, and one warning
/// per call says how many: a guest can never flood the host's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLimits {
    /// Lines per record handled in the call.
    pub lines_per_record: u32,
    /// Bytes (message and fields, or stdout/stderr text) per record handled in the call.
    pub bytes_per_record: usize,
    /// Lines one call may log in all, however many records it handles.
    pub lines_per_call: u32,
    /// Bytes one call may log or write to stdout/stderr in all: what the host keeps in memory
    /// for a call, however many records it handles.
    pub bytes_per_call: usize,
    /// Lines per second across the tenant's instances.
    pub lines_per_second: u32,
    /// Lines per second of each kind the host itself logs because of the tenant (refused
    /// publishes, held records, traps, ...); the rest are counted and summarised.
    pub host_lines_per_second: u32,
}

impl LogLimits {
    /// Bytes a call of `records` records may log, or write to stdout and to stderr.
    pub fn call_bytes(&self, records: usize) -> usize {
        self.bytes_per_record
            .saturating_mul(records.max(1))
            .min(self.bytes_per_call)
    }

    /// Lines a call of `records` records may log.
    pub fn call_lines(&self, records: usize) -> u64 {
        (u64::from(self.lines_per_record) * records.max(1) as u64)
            .min(u64::from(self.lines_per_call))
    }
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            lines_per_record: 100,
            bytes_per_record: 16 << 10,
            lines_per_call: 1_000,
            bytes_per_call: 256 << 10,
            lines_per_second: 1_000,
            host_lines_per_second: 20,
        }
    }
}

/// Bounds on counted copies, so a handler cannot stop a shard for good or loop a record
/// through the stream as fast as the host can publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyLimits {
    /// Longest delay a copy may ask for (`retry_after`, `on_trap = retry_after`); longer ones
    /// are clamped with a warning. Due times read from a stream are clamped to the record's
    /// arrival plus this delay, whoever wrote them.
    pub max_delay: Duration,
    /// Least time between two copies of one record: the second and later copies wait at least
    /// this long, whatever the handler asked.
    pub min_copy_delay: Duration,
    /// Longest a copy read before its due time may hold its shard's checkpoint: then it is
    /// carried forward (published again at the tip with the same due time) and the checkpoint
    /// moves on.
    pub max_hold: Duration,
}

impl Default for CopyLimits {
    fn default() -> Self {
        Self {
            max_delay: Duration::from_secs(15 * 60),
            min_copy_delay: Duration::from_secs(1),
            max_hold: Duration::from_secs(60),
        }
    }
}

/// The records and bytes per second the host writes for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteLimits {
    /// Records per second; a second's worth may go at once.
    pub records_per_second: u32,
    /// Bytes per second, as written to the stream (envelope and partition key included); a
    /// second's worth, and never less than one record of the largest size, may go at once.
    pub bytes_per_second: u64,
}

impl Default for WriteLimits {
    /// One Kinesis shard's write capacity.
    fn default() -> Self {
        Self {
            records_per_second: 1_000,
            bytes_per_second: 1 << 20,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_secs(5),
            cpu_weight: crate::cpu::DEFAULT_CPU_WEIGHT,
            memory_bytes: 64 << 20,
            memory_budget: None,
            max_tables: 8,
            max_memories: 2,
            max_instances: 32,
            max_table_elements: 100_000,
            max_host_resources: 1_000,
            fuel: None,
            log: LogLimits::default(),
            copies: CopyLimits::default(),
            writes: WriteLimits::default(),
            max_subscriptions: 64,
            max_metric_series: 1_000,
        }
    }
}

/// Engine-wide settings, fixed when the [`Runtime`](super::Runtime) is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Whether calls have wall-clock deadlines (epoch interruption). Costs ~20-30% per call;
    /// turning it off is only for measuring that cost.
    pub deadlines: bool,
    /// How often the epoch advances: the granularity of deadlines and of yields to the executor.
    pub epoch_tick: Duration,
    /// Largest wasm stack a call may use, in bytes; deeper recursion traps as a stack overflow.
    pub max_wasm_stack: usize,
    /// Whether calls are metered with fuel (then [`Limits::fuel`] applies). Costs ~25% per
    /// call on top of deadlines, so it is off by default: deadlines already bound a call.
    pub fuel: bool,
    /// Where and within which bounds components are compiled.
    pub compile: CompileConfig,
    /// Where guest calls run: a pool of compute threads shared by tenant (the default), or
    /// the caller's executor.
    pub compute: crate::cpu::Compute,
    /// Whether compiled guest code is named for `perf` (`/tmp/perf-<pid>.map`, wasmtime's
    /// perf map), so a profile splits a call between the host, a guest's bindings and its
    /// interpreter. Off by default: the map grows with every component loaded.
    pub perf_map: bool,
    /// Which components are wrapped with the host's `handle` adapter when they are compiled,
    /// so that `handle` is called inside the component, one host call per batch (decision 54).
    pub handle_adapter: HandleAdapter,
}

/// Which components the host wraps with its `handle` adapter (decision 54).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandleAdapter {
    /// None: every `handle` call is made from the host, as for a component the adapter does
    /// not fit. For measuring what the adapter saves.
    Off,
    /// Those the host calls through `handle`: the ones without the batch fast path. One with
    /// it never needs the adapter, which would only cost memory.
    #[default]
    HandleOnly,
    /// Every one, so that a component with the batch fast path can be called through `handle`
    /// by the adapter too ([`LoadedComponent::through_handle`](crate::LoadedComponent::through_handle)):
    /// for comparing the two paths on one build.
    All,
}

impl RuntimeConfig {
    /// The defaults, but compiling in this process ([`Compiler::InProcess`]): only for
    /// components whose author is trusted, or in a program that does not serve the compile
    /// worker (tests, benchmarks).
    pub fn in_process() -> Self {
        Self {
            compile: CompileConfig::in_process(),
            ..Self::default()
        }
    }

    /// The same configuration, guest calls running on the caller's executor
    /// ([`Compute::Inline`](crate::cpu::Compute::Inline)).
    pub fn inline(self) -> Self {
        Self {
            compute: crate::cpu::Compute::Inline,
            ..self
        }
    }
}

impl Default for RuntimeConfig {
    /// Deadlines on, fuel off, and components compiled by the bounded worker run as this
    /// program ([`Compiler::default`]).
    fn default() -> Self {
        Self {
            deadlines: true,
            epoch_tick: Duration::from_millis(5),
            max_wasm_stack: 512 << 10,
            fuel: false,
            compile: CompileConfig::default(),
            compute: crate::cpu::Compute::default(),
            perf_map: false,
            handle_adapter: HandleAdapter::default(),
        }
    }
}

/// How components are compiled: in this process or in a bounded worker process, with or
/// without a cache of compiled artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompileConfig {
    /// Who compiles.
    pub compiler: Compiler,
    /// Size bounds checked before compiling, and the worker's budget.
    pub limits: CompileLimits,
    /// A directory of compiled artifacts, keyed by the component's content hash and the
    /// engine's configuration; `None` compiles every load.
    pub cache: Option<PathBuf>,
}

impl CompileConfig {
    /// The defaults, but compiling in this process: see [`Compiler::InProcess`].
    pub fn in_process() -> Self {
        Self {
            compiler: Compiler::InProcess,
            ..Self::default()
        }
    }
}

/// Who compiles components. The default is the bounded worker run as this program
/// ([`Compiler::this_program`]), which the program's `main` must serve (see the crate docs,
/// "The compile worker"); compiling in process is an explicit opt-in for trusted code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compiler {
    /// This process, bounded only by the size checks. Only for components whose author is
    /// trusted (a tenant testing its own code with `TestApp`, benchmarks): a few kilobytes of
    /// hostile WebAssembly can keep Cranelift busy for minutes or make it allocate gigabytes,
    /// and here that is the host's CPU and memory.
    InProcess,
    /// A worker process (`program compile-worker ...`) under `setrlimit` and a timeout, whose
    /// artifact this process then loads: for untrusted components.
    Worker {
        /// The executable, run with
        /// [`WORKER_COMMAND`](crate::component::compile::WORKER_COMMAND) as its first argument:
        /// its `main` must then call
        /// [`compile_worker`](crate::component::compile::compile_worker).
        program: PathBuf,
    },
}

impl Compiler {
    /// The bounded worker, run as this program ([`std::env::current_exe`]): the default.
    pub fn this_program() -> Self {
        // Where the executable's path cannot be read, `/proc/self/exe` names the same file to
        // the kernel; if that is missing too, starting the worker fails with a clear
        // `CompileError::WorkerIo` on the first compile, never a silent in-process compile.
        let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        Self::Worker { program }
    }

    /// In this process: the explicit opt-in for trusted code (see [`Compiler::InProcess`]).
    pub fn in_process() -> Self {
        Self::InProcess
    }
}

impl Default for Compiler {
    /// [`Compiler::this_program`]: untrusted code is the crate's promise, so the bounded
    /// worker is what a program gets unless it opts out.
    fn default() -> Self {
        Self::this_program()
    }
}

/// Bounds on compiling one component.
///
/// The worker's time budget grows with the component's size, up to a ceiling: a runtime such
/// as CPython (componentize-py, 18 MB) or StarlingMonkey (componentize-js, 12 MB) inside a
/// component takes Cranelift tens of seconds of CPU, and minutes of wall time on a loaded
/// machine, while a compile bomb is small: it gets the small component's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileLimits {
    /// Largest component file.
    pub max_bytes: usize,
    /// Most functions in all its core modules together.
    pub max_functions: usize,
    /// Largest function body.
    pub max_function_bytes: usize,
    /// Wall-clock time the worker may take for a component of up to one MiB.
    pub timeout: Duration,
    /// Wall-clock time added for each MiB past the first.
    pub timeout_per_mib: Duration,
    /// Most wall-clock time the worker may take, whatever the component's size.
    pub timeout_ceiling: Duration,
    /// CPU time the worker may use (`RLIMIT_CPU`) for a component of up to one MiB.
    pub cpu: Duration,
    /// CPU time added for each MiB past the first.
    pub cpu_per_mib: Duration,
    /// Most CPU time the worker may use, whatever the component's size.
    pub cpu_ceiling: Duration,
    /// Address space the worker may map (`RLIMIT_AS`).
    pub memory_bytes: u64,
}

/// The time one compile may take: [`CompileLimits::budget`] for a component's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileBudget {
    /// Wall-clock time.
    pub timeout: Duration,
    /// CPU time (whole seconds, as `RLIMIT_CPU` counts).
    pub cpu: Duration,
}

impl CompileLimits {
    /// The budget of a component of `bytes` bytes: the small component's, plus the per-MiB
    /// growth for each MiB (or part of one) past the first, each capped at its ceiling (and
    /// never below the small component's).
    pub fn budget(&self, bytes: usize) -> CompileBudget {
        let extra_mib =
            u32::try_from(bytes.div_ceil(1 << 20).saturating_sub(1)).unwrap_or(u32::MAX);
        let grow = |base: Duration, per_mib: Duration, ceiling: Duration| {
            base.saturating_add(per_mib.saturating_mul(extra_mib))
                .min(ceiling.max(base))
        };
        let cpu = grow(self.cpu, self.cpu_per_mib, self.cpu_ceiling);
        CompileBudget {
            timeout: grow(self.timeout, self.timeout_per_mib, self.timeout_ceiling),
            cpu: Duration::from_secs(cpu.as_secs().max(1)),
        }
    }
}

impl Default for CompileLimits {
    fn default() -> Self {
        Self {
            max_bytes: 32 << 20,
            max_functions: 100_000,
            max_function_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
            timeout_per_mib: Duration::from_secs(20),
            timeout_ceiling: Duration::from_secs(600),
            cpu: Duration::from_secs(20),
            cpu_per_mib: Duration::from_secs(3),
            cpu_ceiling: Duration::from_secs(120),
            memory_bytes: 1 << 30,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_compiler_is_the_bounded_worker_run_as_this_program() {
        let exe = std::env::current_exe().expect("the test binary's path");
        let expected = Compiler::Worker { program: exe };
        assert_eq!(Compiler::default(), expected);
        assert_eq!(RuntimeConfig::default().compile.compiler, expected);
        assert_eq!(
            RuntimeConfig::in_process().compile.compiler,
            Compiler::InProcess
        );
        assert_eq!(
            RuntimeConfig::in_process(),
            RuntimeConfig {
                compile: CompileConfig::in_process(),
                ..RuntimeConfig::default()
            }
        );
    }

    #[test]
    fn the_compile_budget_grows_with_the_size_up_to_its_ceiling() {
        let limits = CompileLimits::default();
        let small = limits.budget(8 << 10);
        assert_eq!(small.cpu, limits.cpu);
        assert_eq!(small.timeout, limits.timeout);
        assert_eq!(limits.budget(1 << 20), small);
        // An 18 MB CPython component: 17 MiB past the first.
        let python = limits.budget(18 << 20);
        assert_eq!(python.cpu, Duration::from_secs(20 + 17 * 3));
        assert_eq!(python.timeout, Duration::from_secs(30 + 17 * 20));
        let ceiling = limits.budget(usize::MAX);
        assert_eq!(ceiling.cpu, limits.cpu_ceiling);
        assert_eq!(ceiling.timeout, limits.timeout_ceiling);
    }
}
