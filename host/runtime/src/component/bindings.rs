//! Host-side bindings generated from `wit/ruststream.wit`, world `batch-subscriber`: the host's
//! imports (`host`, `progress`) and both export interfaces (`handler`, `batch`). A component
//! of world `subscriber` exports `handler` alone; the host loads each interface on its own
//! (`GuestIndices`), so one set of bindings serves both forms.
//!
//! Exports take borrowed arguments so a batch is lifted into the guest straight from the host's
//! own buffers, without an intermediate copy of every payload.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "batch-subscriber",
    imports: {
        "ruststream:handler/host.publish": async,
        default: trappable,
    },
    exports: { default: async },
    ownership: Borrowing { duplicate_if_necessary: true },
});

use std::time::Duration;

use crate::outcome::Outcome;

/// The version of the WIT package these bindings were generated from: the one place the host
/// names it (with `wit/ruststream.wit`'s package line).
macro_rules! contract_version {
    () => {
        "1.0.0"
    };
}
pub(crate) use contract_version;

impl From<ruststream::handler::types::HandlerOutcome> for Outcome {
    fn from(outcome: ruststream::handler::types::HandlerOutcome) -> Self {
        use ruststream::handler::types::HandlerOutcome;
        match outcome {
            HandlerOutcome::Ack => Outcome::Ack,
            HandlerOutcome::Drop => Outcome::Drop,
            HandlerOutcome::Retry => Outcome::Retry,
            HandlerOutcome::RetryAfter(ms) => Outcome::RetryAfter(Duration::from_millis(ms)),
        }
    }
}
