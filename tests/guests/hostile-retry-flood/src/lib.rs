//! Hostile: answers a plain `retry` for every record, declares neither `max_attempts` nor a
//! dead-letter stream, and asks for the largest batches the host accepts (10 000 records per
//! `handle-batch` call; the SDK itself takes any `u32`, the host refuses more than 10 000).
//!
//! Every record is held: today the host logs one warning per held record, so one call makes
//! up to 10 000 host-side warnings, and the held records pin the shard's checkpoint.
//!
//! The host must keep its own log bounded (aggregate or rate-limit the per-record warnings,
//! counted against the tenant), keep the memory of held records bounded, and keep serving
//! other tenants.

use ruststream::prelude::*;

/// The host's largest batch (`MAX_BATCH_LIMIT`).
const BATCH: u32 = 10_000;

/// Holds every record.
#[subscriber(KinesisStream::new("hostile"))]
async fn hold(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::retry()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-retry-flood", "0.1.0")).with_broker(broker, |b| {
        b.include(hold).batch(BATCH);
    })
}
