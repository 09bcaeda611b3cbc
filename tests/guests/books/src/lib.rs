//! One app before and after a fix, for dead-letter redrive tests: one source, two components
//! (`[lib] path = "../books/src/lib.rs"`; the package name selects the behaviour).
//!
//! | package        | app            | `orders` on `orders`, `refunds` on `refunds`          |
//! |----------------|----------------|-------------------------------------------------------|
//! | `books-broken` | `books` 1.0.0  | asks for a retry of every entry: with one attempt, each is dead-lettered to `books.dead` |
//! | `books-fixed`  | `books` 1.1.0  | acks every entry, after publishing `{"stream", "id"}` to `books.acked` |
//!
//! What `books-fixed` publishes lets a test count how many times each entry was handled.

use ruststream::prelude::*;
use serde::{Deserialize, Serialize};

/// One entry of either stream.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// What the fixed version says it handled.
#[derive(Debug, Serialize)]
struct Acked<'a> {
    stream: &'a str,
    id: u64,
}

/// Whether this package is the fixed version.
const FIXED: bool = match env!("CARGO_PKG_NAME").as_bytes() {
    b"books-broken" => false,
    b"books-fixed" => true,
    _ => panic!("unknown books-* package"),
};

/// Books an entry: the broken version never manages to; the fixed one says it did.
fn book(stream: &str, entry: &Entry) -> HandlerOutcome {
    if !FIXED {
        return HandlerOutcome::retry();
    }
    let record = match Record::json(&Acked {
        stream,
        id: entry.id,
    }) {
        Ok(record) => record.partition_key(entry.id.to_string()),
        Err(error) => {
            tracing::error!(%error, "cannot encode the acknowledgement");
            return HandlerOutcome::retry();
        }
    };
    match publish("books.acked", record) {
        Ok(_) => HandlerOutcome::ack(),
        Err(error) => {
            tracing::warn!(entry = entry.id, %error, "cannot say it was booked");
            HandlerOutcome::retry()
        }
    }
}

/// An entry of `orders`.
#[subscriber(KinesisStream::new("orders"))]
async fn orders(entry: &Entry) -> HandlerOutcome {
    book("orders", entry)
}

/// An entry of `refunds`.
#[subscriber(KinesisStream::new("refunds"))]
async fn refunds(entry: &Entry) -> HandlerOutcome {
    book("refunds", entry)
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    let version = if FIXED { "1.1.0" } else { "1.0.0" };
    RustStream::new(AppInfo::new("books", version)).with_broker(broker, |b| {
        b.include(orders).max_attempts(1).dead_letter("books.dead");
        b.include(refunds).max_attempts(1).dead_letter("books.dead");
    })
}
