//! Telling apart the ways a component call can fail.

use std::fmt;
use std::time::Duration;

use wasmtime::Trap;

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
    /// Any other trap: out-of-bounds access, bad cast, integer fault, a host error.
    Other,
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Deadline => "deadline exceeded",
            Self::MemoryLimit => "memory limit exceeded",
            Self::StackOverflow => "stack overflow",
            Self::Panic => "panic",
            Self::OutOfFuel => "out of fuel",
            Self::Other => "trap",
        })
    }
}

/// The error the epoch callback raises when a call outlives its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the call ran past its deadline of {0:?}")]
pub(crate) struct DeadlineExceeded(pub Duration);

/// The error the resource limiter raises when memory would grow past the limit.
#[derive(Debug, thiserror::Error)]
#[error("memory limit exceeded: growing to {desired} bytes, the limit is {limit} bytes")]
pub(crate) struct MemoryLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// Classifies the error of a failed call.
pub(crate) fn classify(error: &wasmtime::Error) -> TrapKind {
    if error.downcast_ref::<DeadlineExceeded>().is_some() {
        return TrapKind::Deadline;
    }
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return TrapKind::MemoryLimit;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => TrapKind::StackOverflow,
        Some(Trap::UnreachableCodeReached) => TrapKind::Panic,
        Some(Trap::OutOfFuel) => TrapKind::OutOfFuel,
        Some(Trap::Interrupt) => TrapKind::Deadline,
        _ => TrapKind::Other,
    }
}
