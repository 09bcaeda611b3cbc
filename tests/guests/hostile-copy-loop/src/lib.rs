//! Hostile: answers `retry_after(0)` for every record, forever, and declares neither
//! `max_attempts` nor a dead-letter stream.
//!
//! Each answer asks for a copy of the record delivered at once; each copy is answered the
//! same way, so without a bound the host republishes the record in a tight loop, filling the
//! stream and spending the tenant's write quota.
//!
//! The host must bound the copies (a default attempt cap and a minimum delay, or refusing a
//! copy without `max_attempts`/`dead-letter`) and keep the tenant's writes within its quota.

use std::time::Duration;

use ruststream::prelude::*;

/// Asks for every record again, right away.
#[subscriber(KinesisStream::new("hostile"))]
async fn again(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::retry_after(Duration::ZERO)
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-copy-loop", "0.1.0")).with_broker(broker, |b| {
        b.include(again);
    })
}
