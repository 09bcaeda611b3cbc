//! A second tenant's reader of `ledger` in the chaos test: it looks at some entries twice,
//! through counted copies (every fifth entry at once, every seventh after two seconds), so
//! the stream carries its copies among the first tenant's records.

use std::time::Duration;

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Asks for a second look at some entries; acks everything else, and every second look.
#[subscriber(KinesisStream::new("ledger"))]
async fn recheck(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, attempt = ctx.attempt(), "looked");
    if ctx.attempt() > 1 {
        HandlerOutcome::ack()
    } else if entry.id.is_multiple_of(5) {
        HandlerOutcome::retry()
    } else if entry.id.is_multiple_of(7) {
        HandlerOutcome::retry_after(Duration::from_secs(2))
    } else {
        HandlerOutcome::ack()
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("recheck", "0.1.0")).with_broker(broker, |b| {
        b.include(recheck).max_attempts(3);
    })
}
