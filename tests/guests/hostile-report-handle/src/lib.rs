//! Hostile: exports `handle` alone (no batch fast path) but imports `progress` too, and makes
//! progress reports from inside `handle`, trying to win a fresh deadline while it stalls: two
//! rounds of sleeping 600 ms then reporting (`record-outcome` for index `round`, and a shared
//! board counting `round + 1`), 1.2 s in all, then it acks. Built with `wit-bindgen` on a
//! world of its own (`host` and `progress` imported, `handler` exported). Subscriber `stall`
//! on `hostile`, `on-trap` retry.
//!
//! The host must ignore reports from a `handle` call: each record keeps the one deadline its
//! call started with, so with a 1 s deadline every record is cut off after about 1 s, a
//! deadline trap settled as `on-trap` says (a failed attempt), never acked after 1.2 s.

wit_bindgen::generate!({
    path: "../../../wit",
    inline: "
        package hostile:report;

        world handle-reporter {
            import ruststream:handler/host@1.0.0;
            import ruststream:handler/progress@1.0.0;
            export ruststream:handler/handler@1.0.0;
        }
    ",
    world: "hostile:report/handle-reporter",
    generate_all,
});

use std::time::Duration;

use exports::ruststream::handler::handler::{App, AppInfo, CallInfo, Guest, Record, Subscription};
use ruststream::handler::progress;
use ruststream::handler::types::{FailureAction, HandlerOutcome};

struct HandleReporter;

impl Guest for HandleReporter {
    fn describe() -> App {
        App {
            info: AppInfo {
                name: "hostile-report-handle".to_owned(),
                version: "0.1.0".to_owned(),
            },
            subscriptions: vec![Subscription {
                name: "stall".to_owned(),
                stream: "hostile".to_owned(),
                max_attempts: None,
                dead_letter: None,
                start: None,
                on_trap: FailureAction::Retry,
                batch_limit: None,
            }],
        }
    }

    fn handle(_info: CallInfo, _record: Record) -> HandlerOutcome {
        // The board must stay where it is for the host to read it: leaked on purpose.
        let board: &'static mut [u64] = Vec::leak(vec![1; 8]);
        for round in 0..2u32 {
            std::thread::sleep(Duration::from_millis(600));
            progress::record_outcome(round, HandlerOutcome::Ack);
            board[0] = u64::from(round) + 1;
            progress::share_outcomes(board);
        }
        HandlerOutcome::Ack
    }
}

export!(HandleReporter);
