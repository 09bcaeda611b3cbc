//! Hostile: for every record it handles, publishes 5000 small records (`{"n":i}`, partition
//! key `k`, so all to one shard) to `flood` as fast as it can, counts what the host answered
//! and logs one line with the counts (`ok`, `throttled`, `other`), then acks.
//!
//! The host must hold the tenant to its write quota: past it, publishes fail with `throttled`
//! at once (no unbounded waiting or retrying inside the call, no buffering without limit),
//! and the call still ends within its deadline.

use ruststream::PublishError;
use ruststream::prelude::*;

/// Publishes per record handled.
const RECORDS: u32 = 5000;

/// Floods `flood`, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn flood(_record: &Raw, ctx: &mut Context<'_>) -> HandlerOutcome {
    let (mut ok, mut throttled, mut other) = (0u32, 0u32, 0u32);
    for n in 0..RECORDS {
        let record = Record::new(format!("{{\"n\":{n}}}")).partition_key("k");
        match publish("flood", record) {
            Ok(_) => ok += 1,
            Err(PublishError::Throttled) => throttled += 1,
            Err(_) => other += 1,
        }
    }
    tracing::info!(
        sequence = %ctx.sequence_number(),
        ok,
        throttled,
        other,
        "flood published"
    );
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-publish-flood", "0.1.0")).with_broker(broker, |b| {
        b.include(flood);
    })
}
