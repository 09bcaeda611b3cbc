//! Deadlines are per record: a slow but healthy batch never traps, and after a trap the records
//! the guest had already finished are never run again.

use std::collections::BTreeSet;

use ruststream_runtime::{TestApp, TrapKind};
use ruststream_tests::guests;
use serde_json::json;

/// The distinct records a subscriber was handed, and how many calls it got.
fn handed(app: &TestApp) -> anyhow::Result<(BTreeSet<String>, usize)> {
    let pace = app.subscriber("pace")?;
    let sequences = pace.reports().iter().map(|r| r.sequence_number.clone());
    Ok((sequences.collect(), pace.calls()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_healthy_handler_never_traps() -> anyhow::Result<()> {
    // 10 ms a record, 1 000 records a call: 10 s per call, twice the default 5 s deadline of
    // a record. Each record is within its own deadline.
    let mut app = TestApp::start(guests::PACER.path()).await?;
    let steps: Vec<_> = (0..3_000)
        .map(|id| json!({"id": id, "sleep_ms": 10}))
        .collect();
    app.publish_batch("paced", &steps).await?;
    let (distinct, calls) = handed(&app)?;
    assert_eq!(
        (distinct.len(), calls),
        (3_000, 3_000),
        "each record handled once"
    );
    let pace = app.subscriber("pace")?;
    assert!(pace.reports().iter().all(|r| r.trap.is_none()));
    assert_eq!(pace.instance_replacements(), 0);
    assert_eq!(app.logs_containing("paced").len(), 3_000);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_mid_batch_reruns_no_record_before_it() -> anyhow::Result<()> {
    let mut app = TestApp::start(guests::PACER.path()).await?;
    let steps: Vec<_> = (0..1_000)
        .map(|id| json!({"id": id, "panic": id == 700}))
        .collect();
    app.publish_batch("paced", &steps).await?;
    let (distinct, calls) = handed(&app)?;
    assert_eq!((distinct.len(), calls), (1_000, 1_000), "each record once");
    // The guest ran each record before and after the culprit exactly once.
    assert_eq!(app.logs_containing("paced").len(), 999);
    let pace = app.subscriber("pace")?;
    let trapped: Vec<usize> = pace
        .reports()
        .iter()
        .enumerate()
        .filter(|(_, r)| r.trap.is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(trapped, [700]);
    assert_eq!(pace.reports()[700].trap, Some(TrapKind::Panic));
    assert_eq!(pace.instance_replacements(), 1);
    // Held in front of the culprit (a trap is a `retry`); everything after it is handled.
    assert_eq!(
        pace.held_at(),
        Some(pace.reports()[700].sequence_number.as_str())
    );
    Ok(())
}
