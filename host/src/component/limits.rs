//! Resource limits of component calls and instances.

use std::time::Duration;

/// Limits that apply to each call and instance of a component. [`Limits::default`] is what a
/// tenant gets unless its configuration overrides a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one call (a batch, or a single record) may take, host imports included.
    /// Enforced only when the runtime has deadlines enabled.
    pub call_deadline: Duration,
    /// Largest linear memory an instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// Most tables, memories and instances one component instance may create.
    pub max_tables: usize,
    pub max_memories: usize,
    pub max_instances: usize,
    /// Most table elements per table.
    pub max_table_elements: usize,
    /// Fuel one call may burn (a `handle` of a small record burns ~6 000), when the runtime
    /// meters fuel; `None` leaves calls unmetered.
    pub fuel: Option<u64>,
    /// Caps on what a call may write to the log (log import, stdout, stderr).
    pub log: LogLimits,
}

/// How much a component may log. Lines past a cap are dropped and counted, and one warning
/// per call says how many: a guest can never flood the host's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLimits {
    /// Lines per record handled in the call.
    pub lines_per_record: u32,
    /// Bytes (message and fields, or stdout/stderr text) per record handled in the call.
    pub bytes_per_record: usize,
    /// Lines per second across the tenant's instances.
    pub lines_per_second: u32,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            lines_per_record: 100,
            bytes_per_record: 16 << 10,
            lines_per_second: 1000,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_secs(5),
            memory_bytes: 64 << 20,
            max_tables: 10,
            max_memories: 4,
            max_instances: 20,
            max_table_elements: 100_000,
            fuel: None,
            log: LogLimits::default(),
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
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            deadlines: true,
            epoch_tick: Duration::from_millis(5),
            max_wasm_stack: 512 << 10,
            fuel: false,
        }
    }
}
