//! Malformed: a handler built against the last contract before 1.0, `ruststream:handler@0.5.0`,
//! whose only entry point was `handle-batch` in the `handler` interface, reporting through the
//! `host` interface's `record-outcome` (its own copy of that WIT, unchanged). Built with
//! `wit-bindgen` directly, not the SDK, as a tenant who has not rebuilt since 1.0 would have it.
//!
//! The host must refuse to load it with an error naming both versions (the one the component
//! was built against and the one the host implements) and saying to rebuild with the SDK 1.x.

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "ruststream:handler/subscriber-app@0.5.0",
    });
}

use bindings::exports::ruststream::handler::handler::{
    App, AppInfo, BatchInfo, Guest, Subscription,
};
use bindings::ruststream::handler::types::{FailureAction, HandlerOutcome};

struct PastContract;

impl Guest for PastContract {
    fn describe() -> App {
        App {
            info: AppInfo {
                name: "past-contract".to_string(),
                version: "0.1.0".to_string(),
            },
            subscriptions: vec![Subscription {
                name: "book".to_string(),
                stream: "ledger".to_string(),
                max_attempts: None,
                dead_letter: None,
                start: None,
                on_trap: FailureAction::Retry,
                batch_limit: None,
            }],
        }
    }

    fn handle_batch(_info: BatchInfo, _arena: Vec<u8>, records: Vec<u8>, _headers: Vec<u8>) {
        // One 44-byte entry per record (see `handle-batch` in the WIT).
        for index in 0..(records.len() / 44) as u32 {
            bindings::ruststream::handler::host::record_outcome(index, HandlerOutcome::Ack);
        }
    }
}

bindings::export!(PastContract with_types_in bindings);
