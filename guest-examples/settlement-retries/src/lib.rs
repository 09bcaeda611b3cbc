//! Settlement with counted copies: `max_attempts` + `dead_letter` on the mount chain, and a
//! `retry_after` handler. Refunds are never booked here, so every copy is retried until spent.

use std::time::Duration;

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Retries every refund; the registration turns each retry into a counted copy.
#[subscriber(KinesisStream::new("refunds"))]
async fn reconcile(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "reconciling");
    if entry.amount < 0 {
        HandlerOutcome::retry()
    } else {
        HandlerOutcome::ack()
    }
}

/// Payouts that cannot go out yet come back after 30 seconds.
#[subscriber(KinesisStream::new("payouts"))]
async fn pay_out(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "paying out");
    if entry.amount < 0 {
        HandlerOutcome::retry_after(Duration::from_secs(30))
    } else {
        HandlerOutcome::ack()
    }
}

/// Audits entries; `Result` errors drop the record.
#[subscriber(KinesisStream::new("audit"), on_failure(decode = retry))]
fn audit(entry: &Entry) -> Result<(), String> {
    if entry.id == 0 {
        return Err(format!("entry {} has no id", entry.id));
    }
    Ok(())
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("ledger-retries", "0.1.0")).with_broker(broker, |b| {
        b.include(reconcile)
            .max_attempts(3)
            .dead_letter("refunds.dead");
        b.include(pay_out);
        b.include(audit);
    })
}
