//! A second reader of the seed's `ledger` stream, for tests of two tenants on streams of the
//! same name: it counts every entry, refunds included, and never holds one, where the seed's
//! `book` holds each refund.

use ruststream::prelude::*;
use serde::Deserialize;

/// One ledger entry, as `settlement` reads it.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Audits each entry and acknowledges it.
#[subscriber(KinesisStream::new("ledger"))]
async fn audit(entry: &Entry) -> HandlerOutcome {
    std::hint::black_box((entry.id, entry.amount));
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("audit", "0.1.0")).with_broker(broker, |b| {
        b.include(audit);
    })
}
