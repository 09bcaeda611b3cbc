//! Hostile: answers `retry_after` with the largest delay the contract can carry for every
//! record, and declares neither `max_attempts` nor a dead-letter stream.
//!
//! `Duration::from_millis(u64::MAX)` crosses as `retry-after(18446744073709551615)`: the SDK
//! passes it through unchanged (it only saturates a `Duration` past `u64::MAX` ms to
//! `u64::MAX`). A due time of now + `u64::MAX` ms overflows any timestamp.
//!
//! The host must not overflow computing the due time (no panic, no wrap to a due time in the
//! past), must cap the delay at its own maximum (or refuse it, per its documented policy), and
//! must not park the record, or hold its shard, forever.

use std::time::Duration;

use ruststream::prelude::*;

/// The largest delay there is.
const FOREVER: Duration = Duration::from_millis(u64::MAX);

/// Retries every record in a few hundred million years.
#[subscriber(KinesisStream::new("hostile"))]
async fn postpone(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::retry_after(FOREVER)
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-delay", "0.1.0")).with_broker(broker, |b| {
        b.include(postpone);
    })
}
