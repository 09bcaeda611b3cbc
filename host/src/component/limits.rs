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
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            deadlines: true,
            epoch_tick: Duration::from_millis(5),
            max_wasm_stack: 512 << 10,
        }
    }
}
