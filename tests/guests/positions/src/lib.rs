//! Subscribers with different start positions, acking everything and logging what they saw.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Mark {
    pub id: String,
}

/// Reads its stream from the oldest record still in it.
#[subscriber(
    KinesisStream::new("positions.horizon"),
    start_at(KinesisPosition::horizon())
)]
async fn from_horizon(mark: &Mark) {
    tracing::info!(id = %mark.id, "seen");
}

/// Reads only what arrives after its shards are opened (the default).
#[subscriber(KinesisStream::new("positions.latest"))]
async fn from_latest(mark: &Mark) {
    tracing::info!(id = %mark.id, "seen");
}

/// No position of its own: the operator's override decides.
#[subscriber(KinesisStream::new("positions.stamped"))]
async fn stamped(mark: &Mark) {
    tracing::info!(id = %mark.id, "seen");
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("positions", "0.1.0")).with_broker(broker, |b| {
        b.include(from_horizon);
        b.include(from_latest);
        b.include(stamped);
    })
}
