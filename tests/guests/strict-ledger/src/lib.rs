//! A second tenant's reader of `ledger` allowed one attempt: a refund goes straight to its own
//! dead-letter stream. Were it handed another subscription's counted copies, it would
//! dead-letter them too, with more than one attempt.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Books payments, gives refunds up at once.
#[subscriber(KinesisStream::new("ledger"))]
async fn strict(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "strict saw");
    if entry.amount < 0 {
        HandlerOutcome::retry()
    } else {
        HandlerOutcome::ack()
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("strict-ledger", "0.1.0")).with_broker(broker, |b| {
        b.include(strict)
            .max_attempts(1)
            .dead_letter("ledger.strict-dead");
    })
}
