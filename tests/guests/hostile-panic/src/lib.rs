//! Hostile: panics on every record.
//!
//! The host must contain the trap (`panic = "abort"` makes it `unreachable`), count it as a
//! failed attempt of the record (the registration's panic policy, default `retry`), replace the
//! instance and keep running.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Panics.
#[subscriber(KinesisStream::new("hostile"))]
async fn explode(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "about to panic");
    panic!("hostile panic on entry {}", entry.id);
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-panic", "0.1.0")).with_broker(broker, |b| {
        b.include(explode);
    })
}
