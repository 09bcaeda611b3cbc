//! Hostile: recurses without bound on every record, with a stack array in each frame.
//!
//! The host must contain the stack overflow as a trap (`Trap::StackOverflow`, "call stack
//! exhausted"), report it as a stack overflow, count it as a failed attempt of the record,
//! replace the instance and keep running.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Words of the array each frame keeps alive across its recursive call.
const FRAME: usize = 32;

/// Recurses until the stack runs out. The exit condition is opaque to the compiler (it never
/// holds in practice), so the recursion is neither flagged nor turned into a loop.
///
/// Each frame's array stays live across the call and lives in wasm locals, so it is the
/// engine's native stack that runs out (`Trap::StackOverflow`), well before the 1 MiB shadow
/// stack in linear memory would (a shadow-stack overflow shows up as an out-of-bounds access).
#[inline(never)]
fn descend(depth: u64) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    let frame: [u64; FRAME] =
        std::array::from_fn(|i| std::hint::black_box(depth.wrapping_mul(i as u64 + 1)));
    let below = std::hint::black_box(descend(std::hint::black_box(depth + 1)));
    frame
        .iter()
        .fold(below, |sum, word| sum.wrapping_add(*word))
}

/// Never returns.
#[subscriber(KinesisStream::new("hostile"))]
async fn recurse(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "recursing without bound");
    let depth = descend(std::hint::black_box(entry.id));
    tracing::info!(entry.id, depth, "came back (must not happen)");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-recursion", "0.1.0")).with_broker(broker, |b| {
        b.include(recurse);
    })
}
