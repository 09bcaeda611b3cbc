//! Hostile: tries to open a TCP connection to 127.0.0.1:9 on every record, logs the result,
//! then acks.
//!
//! The host grants no network: the component loads (its `wasi:sockets/*` imports are linked
//! to implementations that deny every address), and every connect fails with an access error.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Tries to connect, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn dial(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "dialling 127.0.0.1:9");
    let result = std::net::TcpStream::connect(("127.0.0.1", 9));
    tracing::warn!(op = "connect 127.0.0.1:9", result = %format!("{:?}", result));
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-net", "0.1.0")).with_broker(broker, |b| {
        b.include(dial);
    })
}
