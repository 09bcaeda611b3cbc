//! The seed's settlement example written against the contract alone: plain `wit-bindgen` on
//! `wit/ruststream.wit`, world `subscriber`, no SDK. It exports `describe` and `handle`, so
//! the host calls it one record per call: the base contract any toolchain can build.

wit_bindgen::generate!({ path: "../../wit", world: "subscriber" });

use exports::ruststream::handler::handler::{App, AppInfo, CallInfo, Guest, Record, Subscription};
use ruststream::handler::host::{self, Field, Level, LogLine};
use ruststream::handler::types::{FailureAction, HandlerOutcome};
use serde::Deserialize;

/// One ledger entry. A negative amount is a refund.
#[derive(Debug, Deserialize)]
struct Entry {
    id: u64,
    amount: i64,
}

struct Settlement;

impl Guest for Settlement {
    fn describe() -> App {
        App {
            info: AppInfo {
                name: "ledger".to_owned(),
                version: "0.1.0".to_owned(),
            },
            subscriptions: vec![Subscription {
                name: "book".to_owned(),
                stream: "ledger".to_owned(),
                max_attempts: None,
                dead_letter: None,
                start: None,
                on_trap: FailureAction::Retry,
                batch_limit: None,
            }],
        }
    }

    /// Books each entry. An empty entry is retired; a refund waits for the payment it
    /// returns, and holds the shard's checkpoint in front of it until then. A record that is
    /// not an entry is logged and retired, as the SDK's default decode policy does.
    fn handle(_info: CallInfo, record: Record) -> HandlerOutcome {
        let entry: Entry = match serde_json::from_slice(&record.data) {
            Ok(entry) => entry,
            Err(error) => {
                let fields = [
                    ("subscriber", "book".to_owned()),
                    ("sequence_number", record.sequence_number.clone()),
                    ("error", error.to_string()),
                ];
                log(Level::Error, "record could not be decoded as JSON", &fields);
                return HandlerOutcome::Drop;
            }
        };
        match entry.amount {
            0 => HandlerOutcome::Drop,
            amount if amount < 0 => HandlerOutcome::Retry,
            amount => {
                let fields = [
                    ("entry.id", entry.id.to_string()),
                    ("amount", amount.to_string()),
                ];
                log(Level::Info, "booked", &fields);
                HandlerOutcome::Ack
            }
        }
    }
}

/// Writes a line to the host's log; the host tags it with the record being handled.
fn log(level: Level, message: &str, fields: &[(&str, String)]) {
    host::log(&LogLine {
        level,
        message: message.to_owned(),
        fields: fields
            .iter()
            .map(|(name, value)| Field {
                name: (*name).to_owned(),
                value: value.clone(),
            })
            .collect(),
        record: None,
    });
}

export!(Settlement);
