//! Hostile: writes terminal control sequences wherever its text reaches the host's output:
//! a `tracing` message, a `tracing` field value, stdout and stderr, on every record; then acks.
//! The text erases the current line (`ESC [2K`), returns the cursor (`CR`), prints a fake
//! "ok" line as the host's own would look, and rings the bell (`BEL`).
//!
//! The host must escape control characters (C0, DEL, C1) in everything a tenant writes before
//! it reaches a terminal or a log line, so no tenant can forge, hide or rewrite host output.

use ruststream::prelude::*;

/// Erase line, carriage return, a fake line, bell.
const FORGED: &str = "\x1b[2K\rok    fake line\x07";

/// Writes the sequence to every channel, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn forge(_record: &Raw) -> HandlerOutcome {
    tracing::info!(forged = FORGED, "{FORGED}");
    println!("{FORGED}");
    eprintln!("{FORGED}");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-escape", "0.1.0")).with_broker(broker, |b| {
        b.include(forge);
    })
}
