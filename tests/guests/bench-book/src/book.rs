//! The callgrind benchmark's handler, shared verbatim with its native baseline
//! (`tests/benches/callgrind.rs` includes this file): the seed's `book` handler on the
//! two-field body of the seed's own `consume_json` benchmark, `{"id":1000000,"amount":37}`.
//! Its `booked` log line is left out, as `consume_json` logs nothing: the benchmark measures
//! dispatch and decoding, not logging. `black_box` stands for the line's use of the entry.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

#[subscriber(KinesisStream::new("ledger"))]
pub async fn book(entry: &Entry) -> HandlerOutcome {
    match entry.amount {
        0 => HandlerOutcome::drop(),
        amount if amount < 0 => HandlerOutcome::retry(),
        amount => {
            std::hint::black_box((entry.id, amount));
            HandlerOutcome::ack()
        }
    }
}
