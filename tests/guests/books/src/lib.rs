//! One app before and after a fix, for dead-letter redrive tests: one source, two components
//! (`[lib] path = "../books/src/lib.rs"`; the package name selects the behaviour).
//!
//! | package        | app            | `orders` on `orders`, `refunds` on `refunds`          |
//! |----------------|----------------|-------------------------------------------------------|
//! | `books-broken` | `books` 1.0.0  | asks for a retry of every entry: with one attempt, each is dead-lettered to `books.dead` |
//! | `books-fixed`  | `books` 1.1.0  | acks every entry, after publishing `{"stream", "id"}` to `books.acked` |
//! | `books-reworked` | `books` 1.2.0 | as fixed, but drops entries whose id is a multiple of 5, and publishes `{"stream", "id", "rework": true}` for multiples of 3 |
//!
//! What `books-fixed` publishes lets a test count how many times each entry was handled;
//! `books-reworked` disagrees with it on some entries, for shadow tests.

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
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    rework: bool,
}

/// Which package this is: 0 broken, 1 fixed, 2 reworked.
const VERSION: u8 = match env!("CARGO_PKG_NAME").as_bytes() {
    b"books-broken" => 0,
    b"books-fixed" => 1,
    b"books-reworked" => 2,
    _ => panic!("unknown books-* package"),
};

/// Whether this package books entries at all.
const FIXED: bool = !matches!(VERSION, 0);

/// Books an entry: the broken version never manages to; the fixed one says it did.
fn book(stream: &str, entry: &Entry) -> HandlerOutcome {
    if !FIXED {
        return HandlerOutcome::retry();
    }
    let reworked = VERSION == 2;
    if reworked && entry.id.is_multiple_of(5) {
        return HandlerOutcome::drop();
    }
    let record = match Record::json(&Acked {
        stream,
        id: entry.id,
        rework: reworked && entry.id.is_multiple_of(3),
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
    let version = ["1.0.0", "1.1.0", "1.2.0"][usize::from(VERSION)];
    RustStream::new(AppInfo::new("books", version)).with_broker(broker, |b| {
        b.include(orders).max_attempts(1).dead_letter("books.dead");
        b.include(refunds).max_attempts(1).dead_letter("books.dead");
    })
}
