//! The benchmark's handler, shared verbatim with the native baseline
//! (`tests/benches/dispatch.rs` includes this file): decode a ~100-byte ledger entry and
//! classify it, with no I/O, so the benchmark measures dispatch, not logging.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
    pub account: String,
    pub currency: String,
    pub memo: String,
}

#[subscriber(KinesisStream::new("ledger"))]
pub async fn classify(entry: &Entry) -> HandlerOutcome {
    match entry.amount {
        _ if entry.id == 0 => HandlerOutcome::drop(),
        0 => HandlerOutcome::drop(),
        amount if amount < 0 && entry.currency != "EUR" => HandlerOutcome::retry(),
        _ if entry.account.is_empty() || entry.memo.len() > 200 => HandlerOutcome::drop(),
        _ => HandlerOutcome::ack(),
    }
}
