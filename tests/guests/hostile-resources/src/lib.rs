//! Hostile: on every record, creates 4 million host resources (pollables from
//! `wasi:clocks/monotonic-clock.subscribe-duration`) and never drops them (`mem::forget`:
//! the handles stay in the instance's resource table), then acks.
//!
//! Each handle is a host-side allocation in the instance's table that lives as long as the
//! instance, so one record grows the host's memory by hundreds of MiB outside the guest's
//! linear-memory cap.
//!
//! The host must cap the instance's resource table (a limit on live handles), failing the
//! call with a trap it counts as a failed attempt, and free everything when it replaces the
//! instance.

use ruststream::prelude::*;
use wasip2::clocks::monotonic_clock;

/// Handles leaked per record.
const LEAKS: u32 = 4_000_000;

/// Leaks pollables, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn hoard(_record: &Raw) -> HandlerOutcome {
    for _ in 0..LEAKS {
        std::mem::forget(monotonic_clock::subscribe_duration(1));
    }
    tracing::info!(leaked = LEAKS, "leaked pollables");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-resources", "0.1.0")).with_broker(broker, |b| {
        b.include(hoard);
    })
}
