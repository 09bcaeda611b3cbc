//! Hostile: spins forever on every record, in a loop the optimizer cannot remove.
//!
//! The host must end the call at its deadline, report a deadline trap (`Trap::Interrupt`),
//! count it as a failed attempt of the record, replace the instance and keep running.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Never returns.
#[subscriber(KinesisStream::new("hostile"))]
async fn spin(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "spinning forever");
    let mut counter = entry.id;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-spin", "0.1.0")).with_broker(broker, |b| {
        b.include(spin);
    })
}
