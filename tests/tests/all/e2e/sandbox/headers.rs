//! Control headers: the `x-ruststream-` headers are the host's. A guest cannot publish them,
//! neither as headers nor inside a raw payload shaped like the host's envelope, nor the
//! headers readers set on delivery, and a due time read from a stream is clamped, whoever
//! wrote it.

use std::time::Duration;

use ruststream_runtime::envelope::{self, DUE_AT_HEADER, RETRY_COUNT_HEADER};
use ruststream_runtime::{
    Outcome, Tenant,
    log::Origin,
    policy::StreamGrant,
    record::Header,
    tenant::{CopyLimits, Limits},
};
use ruststream_tests::e2e::{put_raw, read_all};
use ruststream_tests::guests;
use ruststream_tests::wait::eventually;

use super::{Arena, WAIT, evil_limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_forge_the_hosts_control_headers() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    // The sandbox's tight limits, but time for two publishes in one call: on a loaded machine
    // a PutRecord to the local server can take longer than the usual 300 ms deadline.
    let forger = Tenant::new("forger")
        .subscribe(StreamGrant::only(["hostile"]))
        .publish(StreamGrant::only(["ledger"]))
        .limits(Limits {
            call_deadline: Duration::from_secs(10),
            ..evil_limits()
        });
    let hostile = arena.run(guests::HOSTILE_FORGE, forger).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;

    let logs = arena.logs();
    let result = |attempt: &str| {
        logs.iter()
            .find(|l| l.message == "forged publish" && l.field("attempt") == Some(attempt))
            .and_then(|l| l.field("result"))
            .map(str::to_owned)
    };
    let header = result("header").expect("the guest got an answer");
    assert!(header.contains("reserved to the host"), "{header}");
    let position = result("position").expect("the guest got an answer");
    assert!(
        position.contains("`kinesis-sequence-number` is reserved"),
        "{position}"
    );
    assert_eq!(
        result("raw").as_deref(),
        Some("Ok"),
        "raw data may be published"
    );
    let refusal = logs
        .iter()
        .find(|l| l.origin == Origin::Runtime && l.message.starts_with("publish refused"))
        .expect("the host logs the refusal");
    assert_eq!(refusal.tenant.as_deref(), Some("forger"));
    assert!(refusal.message.contains(DUE_AT_HEADER), "{refusal:?}");
    assert!(
        logs.iter().any(|l| l.origin == Origin::Runtime
            && l.message.starts_with("publish refused")
            && l.message.contains("kinesis-sequence-number")),
        "the host logs the refusal of the reader's header"
    );

    // The raw record is in the neighbour's stream as data: no due time, no retry count.
    let ledger = read_all(&arena.client, "ledger").await?;
    let forged: Vec<_> = ledger
        .iter()
        .filter(|r| r.envelope().payload.starts_with(b"RSK2"))
        .collect();
    assert_eq!(forged.len(), 1, "only the raw one was published");
    // Only the raw one starts with the envelope's magic: a published header record would too.
    assert!(
        ledger
            .iter()
            .filter(|r| r.data.starts_with(b"RSK2"))
            .count()
            == 1,
        "neither refused record was published"
    );
    let read = forged[0].envelope();
    assert_eq!((read.due_at_ms, read.retry_count), (None, 0));
    // Settlement was handed it as attempt 1, not parked, and retired it (not JSON of its type).
    let sequence = &forged[0].sequence_number;
    let seen = || {
        let all = arena.host.deliveries.all().into_iter();
        all.into_iter().find(|r| &r.sequence_number == sequence)
    };
    assert!(
        eventually(WAIT, || seen().is_some()).await,
        "never delivered"
    );
    let delivered = seen().expect("delivered");
    assert_eq!((delivered.attempt, delivered.outcome), (1, Outcome::Drop));
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_time_from_an_outside_producer_is_clamped() -> anyhow::Result<()> {
    let max_delay = Duration::from_secs(2);
    let arena = Arena::start_with(Limits {
        copies: CopyLimits {
            max_delay,
            ..CopyLimits::default()
        },
        ..Limits::default()
    })
    .await?;
    // A producer that is not RustStream writes a "copy" due in the year 5138.
    let headers = [
        Header::new(DUE_AT_HEADER, "99999999999999"),
        Header::new(RETRY_COUNT_HEADER, "1"),
    ];
    let data = envelope::wrap(&headers, br#"{"id":777,"amount":7}"#);
    let put = std::time::Instant::now();
    put_raw(&arena.client, "ledger", "pk", data).await?;
    let booked = eventually(WAIT, || {
        arena
            .logs()
            .iter()
            .any(|l| l.message == "booked" && l.field("entry.id") == Some("777"))
    })
    .await;
    assert!(booked, "the record was held forever");
    assert!(
        put.elapsed() >= max_delay - Duration::from_millis(500),
        "{:?}",
        put.elapsed()
    );
    arena.assert_settlement_flows().await
}
