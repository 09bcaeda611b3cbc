//! Malformed: a handler built against a newer minor version of the contract,
//! `ruststream:handler@1.1.0` (its own copy of the WIT, package version bumped, otherwise
//! identical), exporting `handle` alone. Built with `wit-bindgen` directly, not the SDK.
//!
//! A 1.0 host must refuse to load it, naming both versions and saying to upgrade the host (a
//! newer minor may call or export what the host does not know).
//!
//! `wit/ruststream.wit` is `../../../wit/ruststream.wit` with only the package line changed; keep
//! it in step when the contract changes.

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "ruststream:handler/subscriber@1.1.0",
    });
}

use bindings::exports::ruststream::handler::handler::{
    App, AppInfo, CallInfo, Guest, Record, Subscription,
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

    fn handle(_info: CallInfo, _record: Record) -> HandlerOutcome {
        HandlerOutcome::Ack
    }
}

bindings::export!(FutureContract with_types_in bindings);
