//! Writes: delays and copies are bounded. A delay past the maximum is clamped, copies of one
//! record are spaced, and one write quota covers a tenant's publishes, copies and dead
//! letters: past it a publish is `throttled` and a copy waits; nothing is lost.

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream_runtime::{
    Outcome, Tenant, TestApp,
    log::Origin,
    pipeline::DeliveryReport,
    policy::StreamGrant,
    tenant::{CopyLimits, Limits, WriteLimits},
};
use ruststream_tests::e2e::read_all;
use ruststream_tests::guests;
use ruststream_tests::wait::eventually;
use serde_json::json;

use super::{Arena, WAIT, evil, evil_limits};

/// `evil` with `copies` and `writes` limits, and time for a call of many publishes.
fn limited(copies: CopyLimits, writes: WriteLimits) -> Tenant {
    evil().limits(Limits {
        copies,
        writes,
        call_deadline: Duration::from_secs(10),
        ..evil_limits()
    })
}

/// Hostile deliveries, by attempt.
fn by_attempt(reports: &[DeliveryReport]) -> BTreeMap<u32, u64> {
    reports.iter().map(|r| (r.attempt, r.at_ms)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_past_the_maximum_is_clamped_with_a_warning() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let max_delay = Duration::from_secs(2);
    let copies = CopyLimits {
        max_delay,
        ..CopyLimits::default()
    };
    let hostile = arena
        .run(
            guests::HOSTILE_DELAY,
            limited(copies, WriteLimits::default()),
        )
        .await?;
    arena.traffic(1, 1).await?;
    // `retry_after(u64::MAX ms)`: the copy comes back after the maximum, not in 584 million
    // years.
    let twice = eventually(WAIT, || arena.hostile_reports().len() >= 2).await;
    assert!(twice, "{:#?}", arena.hostile_reports());
    hostile.shutdown().await;
    let attempts = by_attempt(&arena.hostile_reports());
    let waited = attempts[&2] - attempts[&1];
    assert!(waited >= 1_900, "the copy waited {waited} ms");
    let warning = arena
        .logs()
        .into_iter()
        .find(|l| l.message.contains("more than the maximum delay"))
        .expect("a warning");
    assert!(
        warning.message.contains("subscriber `postpone`"),
        "{warning:?}"
    );
    assert_eq!(warning.tenant.as_deref(), Some("evil"));
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_one_record_are_spaced_by_the_minimum_delay() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let min = Duration::from_millis(1_000);
    let copies = CopyLimits {
        min_copy_delay: min,
        ..CopyLimits::default()
    };
    let hostile = arena
        .run(
            guests::HOSTILE_COPY_LOOP,
            limited(copies, WriteLimits::default()),
        )
        .await?;
    arena.traffic(1, 1).await?;
    // `retry_after(0)` forever: the loop goes on, one copy per second at most.
    let four = eventually(WAIT, || arena.hostile_reports().len() >= 4).await;
    assert!(four, "{:#?}", arena.hostile_reports());
    hostile.shutdown().await;
    let attempts = by_attempt(&arena.hostile_reports());
    for attempt in 2..=3 {
        let gap = attempts[&(attempt + 1)] - attempts[&attempt];
        assert!(gap >= 950, "copy {attempt} came back after {gap} ms");
    }
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_quota_throttles_guest_publishes() -> anyhow::Result<()> {
    const RATE: u32 = 5;
    let arena = Arena::start().await?;
    // The quota refills one record every 1/RATE s while an accepted put is in flight. Once a
    // put takes that long (20 ms at 50/s, which a loaded machine's local Kinesis reaches),
    // each put earns the next one's token, all 5 000 are accepted one by one and the call
    // outlives the wait. At 5/s that needs puts of 200 ms; here about 6 are accepted.
    let writes = WriteLimits {
        records_per_second: RATE,
        bytes_per_second: 1 << 20,
    };
    // Its accepted puts may be slow on a loaded machine; the deadline is not under test.
    let flooder = evil()
        .limits(Limits {
            writes,
            call_deadline: Duration::from_secs(60),
            ..evil_limits()
        })
        .publish(StreamGrant::only(["flood"]));
    let started = std::time::Instant::now();
    let hostile = arena.run(guests::HOSTILE_PUBLISH_FLOOD, flooder).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    let seconds = started.elapsed().as_secs() + 1;
    let logs = arena.logs();
    let Some(line) = logs.iter().find(|l| l.message == "flood published") else {
        panic!(
            "no tally from the guest; its deliveries: {:#?}, runtime lines: {:#?}",
            arena.hostile_reports(),
            logs.iter()
                .filter(|l| l.origin == Origin::Runtime)
                .collect::<Vec<_>>()
        );
    };
    let count = |field: &str| -> u64 {
        line.field(field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    let (ok, throttled, other) = (count("ok"), count("throttled"), count("other"));
    assert_eq!(ok + throttled, 5_000, "{line:?}");
    assert_eq!(
        other, 0,
        "past the quota a publish is `throttled`: {line:?}"
    );
    assert!(
        ok <= u64::from(RATE) * (seconds + 1),
        "{ok} published in {seconds} s"
    );
    assert!(throttled > 0);
    let flood = read_all(&arena.client, "flood").await?;
    assert_eq!(
        flood.len() as u64,
        ok,
        "what was acknowledged is in the stream"
    );
    arena.assert_settlement_flows().await
}

#[tokio::test]
async fn copies_wait_for_the_write_quota_and_none_is_lost() -> anyhow::Result<()> {
    let tenant = Tenant::trusted("looper").limits(Limits {
        writes: WriteLimits {
            records_per_second: 2,
            bytes_per_second: 1 << 20,
        },
        ..Limits::default()
    });
    let mut app = TestApp::builder(guests::HOSTILE_COPY_LOOP.path())
        .tenant(tenant)
        .start()
        .await?;
    let values: Vec<_> = (0..10).map(|id| json!({ "id": id })).collect();
    app.publish_batch("hostile", &values).await?;
    let copies = |app: &TestApp| app.stream("hostile").len() - values.len();
    assert_eq!(copies(&app), 2, "one second's quota");
    let again = app.subscriber("again")?;
    assert!(
        again.checkpoint().is_some(),
        "the first two originals are handled"
    );
    assert!(
        again.held_at().is_some(),
        "the others wait for their copies"
    );

    app.advance(Duration::from_secs(10)).await?;
    // Every original got its copy, within the quota: two records a second.
    let mut originals: Vec<u64> = app
        .stream("hostile")
        .iter()
        .skip(values.len())
        .filter_map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload()).ok())
        .filter_map(|v| v["id"].as_u64())
        .collect();
    assert!(copies(&app) <= 2 + 2 * 10, "{} copies", copies(&app));
    originals.sort_unstable();
    originals.dedup();
    assert_eq!(originals, (0..10).collect::<Vec<_>>(), "none lost");
    assert!(
        app.subscriber("again")?
            .outcomes()
            .iter()
            .all(|o| *o == Outcome::RetryAfter(Duration::ZERO))
    );
    Ok(())
}
