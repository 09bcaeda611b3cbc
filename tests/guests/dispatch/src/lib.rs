//! Publishes where each entry says, for the tests of which streams `dev`, `test` and
//! `TestApp` give a component and how they report a refused publish. Two subscriptions of
//! `ledger`:
//!
//! - `book` (two attempts, then a dead letter to `ledger.dead`) publishes `{"id", "amount"}`
//!   to every stream of the entry's `to` (default: `ledger.booked`, a stream it does not
//!   read), `times` times each (default once), with a header named `header` (value `1`) when
//!   the entry gives one, and padded with spaces to `bytes` bytes when it gives that. It acks
//!   once every publish went through, and asks for a retry when one was refused, logging the
//!   first error for each stream.
//! - `audit` drops an entry with a negative amount and acks the rest; it publishes nothing.
//!
//! A host's account holding `ledger.booked` acks every plain entry; a tool that creates only
//! the streams the component reads refuses the publish, and `book` retries.

use ruststream::prelude::*;
use serde::Deserialize;

/// Where the entries go unless they say otherwise.
const BOOKED: &str = "ledger.booked";

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
    /// The streams to publish to.
    #[serde(default)]
    pub to: Option<Vec<String>>,
    /// A header to publish with.
    #[serde(default)]
    pub header: Option<String>,
    /// The size to pad the published payload to.
    #[serde(default)]
    pub bytes: Option<usize>,
    /// How many times to publish to each stream.
    #[serde(default)]
    pub times: Option<u32>,
}

/// The record `entry` asks for: two numbers, so the JSON is written by hand.
fn record(entry: &Entry) -> Record {
    let mut data = format!("{{\"id\":{},\"amount\":{}}}", entry.id, entry.amount).into_bytes();
    if let Some(bytes) = entry.bytes {
        data.resize(bytes.max(data.len()), b' ');
    }
    let record = Record::new(data).partition_key(entry.id.to_string());
    match &entry.header {
        Some(name) => record.header(name, "1"),
        None => record,
    }
}

/// Publishes the entry wherever it says; a retry if any publish was refused.
#[subscriber(KinesisStream::new("ledger"))]
async fn book(entry: &Entry) -> HandlerOutcome {
    let default = [BOOKED.to_owned()];
    let targets = entry.to.as_deref().unwrap_or(&default);
    let mut refused = false;
    for stream in targets {
        let errors: Vec<_> = (0..entry.times.unwrap_or(1))
            .filter_map(|_| publish(stream, record(entry)).err())
            .collect();
        if let Some(error) = errors.first() {
            tracing::warn!(entry.id, %stream, %error, count = errors.len(), "not booked");
            refused = true;
        }
    }
    if refused {
        HandlerOutcome::retry()
    } else {
        tracing::info!(entry.id, "booked");
        HandlerOutcome::ack()
    }
}

/// Drops refunds, acks the rest.
#[subscriber(KinesisStream::new("ledger"))]
async fn audit(entry: &Entry) -> HandlerOutcome {
    if entry.amount < 0 {
        HandlerOutcome::drop()
    } else {
        HandlerOutcome::ack()
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("dispatch", "0.1.0")).with_broker(broker, |b| {
        b.include(book).max_attempts(2).dead_letter("ledger.dead");
        b.include(audit);
    })
}
