//! Two subscriptions of one app on one stream, both making counted copies: `reconcile` retries
//! refunds through `max_attempts` and a dead letter, `defer` puts refunds off for 15 minutes
//! (longer than a tenant's `max_hold`, so its copies are carried forward). Each copy must reach
//! only the subscription that made it; each handler logs every record it sees with its attempt.

use std::time::Duration;

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Retries refunds; the registration turns each retry into a counted copy, then a dead letter.
#[subscriber(KinesisStream::new("ledger"))]
async fn reconcile(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "reconcile saw");
    if entry.amount < 0 {
        HandlerOutcome::retry()
    } else {
        HandlerOutcome::ack()
    }
}

/// Puts refunds off for a quarter of an hour, every time.
#[subscriber(KinesisStream::new("ledger"))]
async fn defer(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "defer saw");
    if entry.amount < 0 {
        HandlerOutcome::retry_after(Duration::from_secs(15 * 60))
    } else {
        HandlerOutcome::ack()
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("shared-ledger", "0.1.0")).with_broker(broker, |b| {
        b.include(reconcile)
            .max_attempts(3)
            .dead_letter("ledger.dead");
        b.include(defer);
    })
}
