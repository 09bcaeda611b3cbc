//! The seed's settlement example, with a manual `Handle` implementation.

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
struct Book;

impl Handle<Entry> for Book {
    fn handle(
        &self,
        entry: &Entry,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        ready(match entry.amount {
            0 => Err(HandlerOutcome::drop()),
            amount if amount < 0 => Err(HandlerOutcome::retry()),
            amount => {
                tracing::info!(entry.id, amount, "booked");
                Ok(())
            }
        })
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
        b.include(subscriber(KinesisStream::new("ledger"), Book).build());
    })
}
