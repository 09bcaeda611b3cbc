//! Telling apart the ways a component call can fail.

use std::fmt;
use std::time::Duration;

use wasmtime::Trap;

use crate::stop::Stop;
use wasmtime::component::ResourceTableError;

/// Why a component call did not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrapKind {
    /// The call ran past its wall-clock deadline.
    Deadline,
    /// The instance tried to grow its memory past the limit.
    MemoryLimit,
    /// The wasm stack overflowed (runaway recursion).
    StackOverflow,
    /// The guest aborted: a Rust panic (panic = "abort") or an `unreachable`.
    Panic,
    /// The call ran out of fuel.
    OutOfFuel,
    /// The instance went past a table-size, instance/table/memory-count or host-resource cap.
    ResourceLimit,
    /// Any other trap: out-of-bounds access, bad cast, integer fault, a host error.
    Other,
    /// Not the guest's doing: the host stopped the call because the shard's lease was lost.
    /// The record under way is left for the lease's next holder; never counted as a failure.
    LeaseLost,
    /// Not the guest's doing: the host stopped the call because it is shutting down or the
    /// version was withdrawn. The record under way is left unsettled; never counted as a
    /// failure.
    Stopped,
}

impl TrapKind {
    /// Whether the host stopped the call (the lease lost, a shutdown, a withdrawn version):
    /// not a failure of the guest, and the record under way is not settled.
    pub fn is_hosts(self) -> bool {
        matches!(self, Self::LeaseLost | Self::Stopped)
    }

    /// Every kind a guest's call fails by (not [`LeaseLost`](Self::LeaseLost) nor
    /// [`Stopped`](Self::Stopped), the host's).
    pub const ALL: [Self; 7] = [
        Self::Deadline,
        Self::MemoryLimit,
        Self::StackOverflow,
        Self::Panic,
        Self::OutOfFuel,
        Self::ResourceLimit,
        Self::Other,
    ];

    /// A short, stable name: the `kind` label of `ruststream_traps_total`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Deadline => "deadline",
            Self::MemoryLimit => "memory_limit",
            Self::StackOverflow => "stack_overflow",
            Self::Panic => "panic",
            Self::OutOfFuel => "out_of_fuel",
            Self::ResourceLimit => "resource_limit",
            Self::Other => "other",
            Self::LeaseLost => "lease_lost",
            Self::Stopped => "stopped",
        }
    }
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Deadline => "deadline exceeded",
            Self::MemoryLimit => "memory limit exceeded",
            Self::StackOverflow => "stack overflow",
            Self::Panic => "panic",
            Self::OutOfFuel => "out of fuel",
            Self::ResourceLimit => "resource limit exceeded",
            Self::Other => "trap",
            Self::LeaseLost => "stopped: the shard's lease was lost",
            Self::Stopped => "stopped by the host",
        })
    }
}

/// The error the epoch callback raises when the host stops a call (see [`Stop`]).
#[derive(Debug, thiserror::Error)]
pub(crate) struct CallStopped(pub Stop);

impl fmt::Display for CallStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Stop::Lost => "the call was stopped: the shard's lease was lost",
            Stop::Shutdown => "the call was stopped: the host is shutting down",
            Stop::Withdrawn => "the call was stopped: its version was withdrawn",
            Stop::HandOff(_) => "the call was stopped: the shard is handed over",
        })
    }
}

impl CallStopped {
    /// The kind of failure it is.
    pub(crate) fn kind(&self) -> TrapKind {
        match self.0 {
            Stop::Lost => TrapKind::LeaseLost,
            _ => TrapKind::Stopped,
        }
    }
}

/// The error the epoch callback raises when a call outlives its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the call ran past its deadline of {0:?}")]
pub(crate) struct DeadlineExceeded(pub Duration);

/// The error the resource limiter raises when an instance's memories and tables together would
/// grow past the limit.
#[derive(Debug, thiserror::Error)]
#[error(
    "memory limit exceeded: the instance's memories and tables would hold {desired} bytes, \
     the limit is {limit} bytes"
)]
pub(crate) struct MemoryLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// The error the resource limiter raises when a table would grow past the limit.
#[derive(Debug, thiserror::Error)]
#[error("table limit exceeded: growing to {desired} elements, the limit is {limit} elements")]
pub(crate) struct TableLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// The words wasmtime's own count checks (instances, tables, memories) start their untyped
/// errors with: "resource limit exceeded: instance count too high at 21".
const COUNT_LIMIT_PREFIX: &str = "resource limit exceeded";

/// Classifies the error of a failed call.
pub(crate) fn classify(error: &wasmtime::Error) -> TrapKind {
    if let Some(stopped) = error.downcast_ref::<CallStopped>() {
        return stopped.kind();
    }
    if error.downcast_ref::<DeadlineExceeded>().is_some() {
        return TrapKind::Deadline;
    }
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return TrapKind::MemoryLimit;
    }
    let table_full = || {
        error.chain().any(|cause| {
            cause
                .downcast_ref::<ResourceTableError>()
                .is_some_and(|e| matches!(e, ResourceTableError::Full))
        })
    };
    if error.downcast_ref::<TableLimitExceeded>().is_some()
        || table_full()
        || error
            .chain()
            .any(|cause| cause.to_string().starts_with(COUNT_LIMIT_PREFIX))
    {
        return TrapKind::ResourceLimit;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => TrapKind::StackOverflow,
        Some(Trap::UnreachableCodeReached) => TrapKind::Panic,
        Some(Trap::OutOfFuel) => TrapKind::OutOfFuel,
        Some(Trap::Interrupt) => TrapKind::Deadline,
        _ => TrapKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_told_apart_from_other_failures() {
        let table = wasmtime::Error::new(TableLimitExceeded {
            desired: 40,
            limit: 1,
        });
        assert_eq!(classify(&table), TrapKind::ResourceLimit);
        let count = wasmtime::Error::msg("resource limit exceeded: instance count too high at 2")
            .context("instantiation failed");
        assert_eq!(classify(&count), TrapKind::ResourceLimit);
        let memory = wasmtime::Error::new(MemoryLimitExceeded {
            desired: 2 << 20,
            limit: 1 << 20,
        });
        assert_eq!(classify(&memory), TrapKind::MemoryLimit);
        let deadline = wasmtime::Error::new(DeadlineExceeded(Duration::from_millis(5)));
        assert_eq!(classify(&deadline), TrapKind::Deadline);
        let full = wasmtime::Error::new(ResourceTableError::Full).context("subscribe-duration");
        assert_eq!(classify(&full), TrapKind::ResourceLimit);
        let host = wasmtime::Error::msg("the host import failed");
        assert_eq!(classify(&host), TrapKind::Other);
        assert_eq!(
            classify(&wasmtime::Error::new(Trap::StackOverflow)),
            TrapKind::StackOverflow
        );
    }
}
