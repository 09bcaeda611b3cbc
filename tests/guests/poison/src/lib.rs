//! A handler that panics on poison entries, with `on_failure(panic = retry)`, two attempts and
//! a dead-letter stream: its dead letters say which kind of trap spent the attempts.

use ruststream::prelude::*;
use serde::Deserialize;

/// One entry; a negative amount is poison.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub amount: i64,
}

/// Takes an entry in, and panics on poison.
#[subscriber(KinesisStream::new("intake"), on_failure(panic = retry))]
async fn intake(entry: &Entry) -> HandlerOutcome {
    if entry.amount < 0 {
        panic!("poison entry {}", entry.id);
    }
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("intake", "0.1.0")).with_broker(broker, |b| {
        b.include(intake).max_attempts(2).dead_letter("intake.dead");
    })
}
