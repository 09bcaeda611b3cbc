//! Hostile: allocates and touches memory without bound on every record.
//!
//! The host must stop the guest at its memory cap (a `memory.grow` refused by its resource
//! limiter), report "memory limit exceeded" rather than a bare guest abort, count it as a failed
//! attempt of the record, replace the instance and keep running.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// One chunk: 1 MiB.
const CHUNK: usize = 1 << 20;

/// Never returns: hoards 1 MiB chunks of non-zero bytes until the allocator gives up.
#[subscriber(KinesisStream::new("hostile"))]
async fn exhaust(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "hoarding memory");
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        // Non-zero fill: every page is written, not just reserved.
        let chunk = vec![(chunks.len() % 255 + 1) as u8; CHUNK];
        chunks.push(std::hint::black_box(chunk));
        std::hint::black_box(&chunks);
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-memory", "0.1.0")).with_broker(broker, |b| {
        b.include(exhaust);
    })
}
