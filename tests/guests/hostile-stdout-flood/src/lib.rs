//! Hostile: prints 1 MiB to stdout for every record (256 lines of 4 KiB, with `print!`),
//! then acks.
//!
//! The host must not pass a tenant's stdout to its own output unbounded: cap what it keeps
//! per call and per tenant (dropping or truncating the rest, and saying so), without
//! blocking the guest forever or growing its memory with the output.

use ruststream::prelude::*;

/// Bytes per line, newline included.
const LINE: usize = 4096;
/// Lines per record: 1 MiB in all.
const LINES: usize = 256;

/// Prints 1 MiB, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn shout(_record: &Raw) -> HandlerOutcome {
    let mut line = "x".repeat(LINE - 1);
    line.push('\n');
    for _ in 0..LINES {
        print!("{line}");
    }
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-stdout-flood", "0.1.0")).with_broker(broker, |b| {
        b.include(shout);
    })
}
