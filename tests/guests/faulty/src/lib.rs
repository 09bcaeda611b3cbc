//! A handler that panics on one kind of entry: the host must contain the trap.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Panics on entries with amount 13; books everything else.
#[subscriber(KinesisStream::new("ledger"))]
async fn book(entry: &Entry) -> HandlerOutcome {
    if entry.amount == 13 {
        panic!("unlucky entry {}", entry.id);
    }
    tracing::info!(entry.id, entry.amount, "booked");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("faulty", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
