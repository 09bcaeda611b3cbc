//! Hostile: calls the host's `publish` import 100 000 times from inside `describe` (to
//! `payments`, a stream a tenant is never granted), before returning a normal app: subscriber
//! `book` on `hostile`, which acks everything (through `handle`: it exports the `subscriber`
//! world). Built with `wit-bindgen` directly: the SDK
//! runs no tenant code in `describe` other than the service function, and nothing there is
//! meant to publish. It logs one `warn` line with the counts (`ok`, `refused`) before it
//! returns.
//!
//! The host must not publish anything on behalf of a component it is still loading: during
//! `describe` (and instantiation) `publish` must fail at once (or trap), write nothing to any
//! stream, spend no write quota, and the whole load stays within its deadline.

wit_bindgen::generate!({ path: "../../../wit", world: "subscriber" });

use exports::ruststream::handler::handler::{App, AppInfo, CallInfo, Guest, Record, Subscription};
use ruststream::handler::host::{self, Field, Level, LogLine};
use ruststream::handler::types::{FailureAction, HandlerOutcome};

/// Publishes attempted while the host loads the component.
const PUBLISHES: u32 = 100_000;

struct DescribePublish;

impl Guest for DescribePublish {
    fn describe() -> App {
        let (mut ok, mut refused) = (0u32, 0u32);
        for _ in 0..PUBLISHES {
            match host::publish("payments", None, br#"{"id":1,"amount":1}"#, &[]) {
                Ok(_) => ok += 1,
                Err(_) => refused += 1,
            }
        }
        host::log(&LogLine {
            level: Level::Warn,
            message: "published from describe".to_owned(),
            fields: vec![
                Field {
                    name: "ok".to_owned(),
                    value: ok.to_string(),
                },
                Field {
                    name: "refused".to_owned(),
                    value: refused.to_string(),
                },
            ],
            record: None,
        });
        App {
            info: AppInfo {
                name: "hostile-describe-publish".to_owned(),
                version: "0.1.0".to_owned(),
            },
            subscriptions: vec![Subscription {
                name: "book".to_owned(),
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
        HandlerOutcome::Ack
    }
}

export!(DescribePublish);
