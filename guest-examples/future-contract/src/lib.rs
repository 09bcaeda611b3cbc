//! Malformed: a handler built against a newer contract: it exports
//! `ruststream:handler/handler@0.6.0` instead of `@0.5.0` (its own copy of the WIT, package
//! version bumped, otherwise identical). Built with `wit-bindgen` directly, not the SDK.
//!
//! The host must refuse to load it, saying the component does not export the contract version
//! it speaks (`ruststream:handler/handler@0.5.0`).
//!
//! `wit/ruststream.wit` is `../../wit/ruststream.wit` with only the package line changed; keep
//! it in step when the contract changes.

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "ruststream:handler/subscriber-app@0.6.0",
    });
}

use bindings::exports::ruststream::handler::handler::{
    App, AppInfo, BatchInfo, Guest, Subscription,
};
use bindings::ruststream::handler::types::{FailureAction, HandlerOutcome};

struct FutureContract;

impl Guest for FutureContract {
    fn describe() -> App {
        App {
            info: AppInfo {
                name: "future-contract".to_string(),
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

bindings::export!(FutureContract with_types_in bindings);
