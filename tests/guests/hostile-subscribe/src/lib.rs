//! Hostile: subscribes to `secrets`, a stream its tenant is not granted; the handler itself
//! just acks.
//!
//! The host must refuse the subscription when it loads the component (from `describe`),
//! naming the stream, and never deliver a `secrets` record to it.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Acks.
#[subscriber(KinesisStream::new("secrets"))]
async fn eavesdrop(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "read a secret");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-subscribe", "0.1.0")).with_broker(broker, |b| {
        b.include(eavesdrop);
    })
}
