//! Hostile: floods every log channel on every record: 100,000 `tracing` lines of ~200 bytes,
//! and 100,000 lines each to stdout and stderr, then acks.
//!
//! The host must cap the size and rate of the tenant's log output (dropping or summarising the
//! excess), keep stdout/stderr from reaching its own output unbounded, and stay responsive.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Lines per channel per record.
const LINES: u32 = 100_000;

/// A ~200-byte message.
const FILLER: &str = "flood flood flood flood flood flood flood flood flood flood \
                      flood flood flood flood flood flood flood flood flood flood \
                      flood flood flood flood flood flood flood flood flood flood \
                      flood flood flood flood";

/// Floods, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn flood(entry: &Entry) -> HandlerOutcome {
    for line in 0..LINES {
        tracing::info!(entry.id, line, "{FILLER}");
    }
    for line in 0..LINES {
        println!("stdout flood {line} of entry {}: {FILLER}", entry.id);
    }
    for line in 0..LINES {
        eprintln!("stderr flood {line} of entry {}: {FILLER}", entry.id);
    }
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-log-flood", "0.1.0")).with_broker(broker, |b| {
        b.include(flood);
    })
}
