//! Hostile: republishes every record it handles to `payments`, a stream its tenant is not
//! granted.
//!
//! The host must refuse the publish (`not-permitted`) and write nothing to `payments`. The
//! handler acks when the publish is refused and returns `retry` if it went through, so a
//! held record shows the host let it through.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Publishes the record's data to `payments`.
#[subscriber(KinesisStream::new("hostile"))]
async fn forward(entry: &Entry, ctx: &mut Context<'_>) -> HandlerOutcome {
    tracing::info!(entry.id, "publishing to payments");
    match publish("payments", Record::new(ctx.data())) {
        Err(e) => {
            tracing::warn!(error = %e, "publish refused");
            HandlerOutcome::ack()
        }
        Ok(published) => {
            tracing::warn!(
                shard = %published.shard_id,
                sequence = %published.sequence_number,
                "publish to payments went through"
            );
            HandlerOutcome::retry()
        }
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-publish", "0.1.0")).with_broker(broker, |b| {
        b.include(forward);
    })
}
