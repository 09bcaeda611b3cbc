//! The seed's settlement example, with the `#[subscriber]` macro.

use ruststream::prelude::*;
use serde::Deserialize;

/// One ledger entry. A negative amount is a refund.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Books each entry. An empty entry is retired; a refund waits for the payment it returns, and
/// holds the shard's checkpoint in front of it until then.
#[subscriber(KinesisStream::new("ledger"))]
async fn book(entry: &Entry) -> HandlerOutcome {
    match entry.amount {
        0 => HandlerOutcome::drop(),
        amount if amount < 0 => HandlerOutcome::retry(),
        amount => {
            tracing::info!(entry.id, amount, "booked");
            HandlerOutcome::ack()
        }
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
