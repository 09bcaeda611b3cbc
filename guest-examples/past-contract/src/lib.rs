//! Malformed: a handler built against an older contract, `ruststream:handler@0.3.0`, whose
//! `handle-batch` took the batch's records as a list of records (its own copy of that WIT,
//! unchanged). Built with `wit-bindgen` directly, not the SDK, as a tenant who has not rebuilt
//! since the contract changed would have it.
//!
//! The host must refuse to load it with an error naming both versions: the one the component
//! was built against and the one the host implements.

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "ruststream:handler/subscriber-app@0.3.0",
    });
}

use bindings::exports::ruststream::handler::handler::{
    App, AppInfo, BatchHeader, BatchInfo, BatchRecord, Delivery, Guest, Subscription,
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

    fn handle(_info: BatchInfo, _record: Delivery) -> HandlerOutcome {
        HandlerOutcome::Ack
    }

    fn handle_batch(
        _info: BatchInfo,
        _arena: Vec<u8>,
        records: Vec<BatchRecord>,
        _headers: Vec<BatchHeader>,
    ) {
        for index in 0..records.len() as u32 {
            bindings::ruststream::handler::host::record_outcome(index, HandlerOutcome::Ack);
        }
    }
}

bindings::export!(PastContract with_types_in bindings);
