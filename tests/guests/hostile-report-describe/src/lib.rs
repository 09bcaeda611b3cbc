//! Hostile: makes progress reports from `describe` (the service function runs there), trying
//! to win a fresh deadline while it stalls. Two rounds of: sleep 600 ms (a WASI sleep, time
//! blocked outside the guest), then report record `round` through `progress.record-outcome`
//! and on a shared board (count `round + 1`). 1.2 s in all.
//!
//! The host must ignore reports made outside a `handle-batch` call: `describe` keeps the one
//! deadline it started with, and the component is refused when that passes (a tenant with a
//! 1 s deadline: refused after about 1 s; a report that moved the deadline would let it load
//! after 1.2 s).

use std::time::Duration;

use ruststream::bindings::ruststream::handler::progress;
use ruststream::bindings::ruststream::handler::types::HandlerOutcome as WitOutcome;
use ruststream::prelude::*;

/// Reports and stalls, as described above.
fn stall_with_reports() {
    // The board must stay where it is for the host to read it: leaked on purpose.
    let board: &'static mut [u64] = Vec::leak(vec![1; 8]);
    for round in 0..2u32 {
        std::thread::sleep(Duration::from_millis(600));
        progress::record_outcome(round, WitOutcome::Ack);
        board[0] = u64::from(round) + 1;
        progress::share_outcomes(board);
    }
}

/// Acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn book(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    stall_with_reports();
    RustStream::new(AppInfo::new("hostile-report-describe", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
