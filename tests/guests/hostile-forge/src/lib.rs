//! Hostile: forges the host's control headers on records it publishes to `ledger`, a stream
//! other handlers (and the host's own retry machinery) read. For every record it publishes:
//!
//! - `attempt="header"`: a JSON record with a user header `x-ruststream-due-ms` set far in the
//!   future, through the SDK's header API;
//! - `attempt="raw"`: a record with no headers whose data is a hand-built `RSK2` envelope
//!   carrying `x-ruststream-due-ms` and `x-ruststream-retry-count: 1000`, then
//!   `{"id":7,"amount":1}`;
//! - `attempt="position"`: a JSON record with a user header `Kinesis-Sequence-Number`, one of
//!   the headers readers set on delivery, which a native copy carries as its original's.
//!
//! It logs each result (`result` = `Ok` or the error's text) and acks.
//!
//! The host must refuse the first with `reserved-header("x-ruststream-due-ms")` and the third
//! with `reserved-header("kinesis-sequence-number")` (the SDK lowercases names), publishing
//! nothing, and must carry the second as opaque data: a reader of `ledger` (the seed's
//! settlement tenant) sees the whole envelope as its payload, with no headers, no delay and
//! attempt 1 (never a record parked until the year 5138 or already counted 1000 times).

use std::fmt::Display;

use ruststream::prelude::*;
use serde::Serialize;

/// Far in the future: milliseconds since the epoch, in the year 5138.
const FAR_DUE_MS: &str = "99999999999999";

#[derive(Serialize)]
struct Entry {
    id: u64,
    amount: i64,
}

/// `"RSK2" | u32 BE header block length | (u32 BE name len, name, u32 BE value len, value)... | payload`
fn envelope(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.extend_from_slice(&be32(name.len()));
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(&be32(value.len()));
        block.extend_from_slice(value.as_bytes());
    }
    let mut out = b"RSK2".to_vec();
    out.extend_from_slice(&be32(block.len()));
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    out
}

fn be32(len: usize) -> [u8; 4] {
    u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes()
}

/// `Ok`, or what went wrong.
fn outcome<T, E: Display>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => "Ok".to_owned(),
        Err(error) => error.to_string(),
    }
}

/// Publishes both forgeries, logs what the host answered, acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn forge(_record: &Raw) -> HandlerOutcome {
    let entry = Entry { id: 7, amount: 1 };
    let header = match Record::json(&entry) {
        Ok(record) => outcome(publish(
            "ledger",
            record.header("x-ruststream-due-ms", FAR_DUE_MS),
        )),
        Err(error) => outcome::<(), _>(Err(error)),
    };
    tracing::info!(attempt = "header", result = %header, "forged publish");

    let raw = envelope(
        &[
            ("x-ruststream-due-ms", FAR_DUE_MS),
            ("x-ruststream-retry-count", "1000"),
        ],
        br#"{"id":7,"amount":1}"#,
    );
    let raw = outcome(publish("ledger", Record::new(raw)));
    tracing::info!(attempt = "raw", result = %raw, "forged publish");

    let position = match Record::json(&entry) {
        Ok(record) => outcome(publish(
            "ledger",
            record.header("Kinesis-Sequence-Number", "1"),
        )),
        Err(error) => outcome::<(), _>(Err(error)),
    };
    tracing::info!(attempt = "position", result = %position, "forged publish");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-forge", "0.1.0")).with_broker(broker, |b| {
        b.include(forge);
    })
}
