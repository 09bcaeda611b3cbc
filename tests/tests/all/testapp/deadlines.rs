//! Deadlines are per record: a slow but healthy batch never traps, and after a trap the records
//! the guest had already finished are never run again.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ruststream_runtime::{
    Outcome, Tenant, TestApp,
    component::{AdapterRoute, TrapKind},
    tenant::Limits,
};
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

/// Publishes 1 000 records whose record 700 sets `culprit` (`panic` or `spin`) and checks
/// that the call trapped on record 700 alone, as `kind`, and that the guest ran every other
/// record exactly once: none before the culprit again after the trap.
async fn trap_at_700(app: &mut TestApp, culprit: &str, kind: TrapKind) -> anyhow::Result<()> {
    let steps: Vec<_> = (0..1_000)
        .map(|id| json!({"id": id, culprit: id == 700}))
        .collect();
    app.publish_batch("paced", &steps).await?;
    let (distinct, calls) = handed(app)?;
    assert_eq!((distinct.len(), calls), (1_000, 1_000), "each record once");
    assert_eq!(app.logs_containing("paced").len(), 999);
    let pace = app.subscriber("pace")?;
    let trapped: Vec<(usize, Option<TrapKind>)> = pace
        .reports()
        .iter()
        .enumerate()
        .filter(|(_, r)| r.trap.is_some())
        .map(|(i, r)| (i, r.trap))
        .collect();
    assert_eq!(trapped, [(700, Some(kind))]);
    assert_eq!(pace.instance_replacements(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_handle_a_slow_healthy_run_never_traps_and_each_record_logs_as_itself()
-> anyhow::Result<()> {
    // 100 records of 10 ms in one call through the host's adapter: a second, three times a
    // record's deadline. Each `handle` call gets its own.
    let mut app = TestApp::builder(guests::PACER.path())
        .tenant(with_deadline(Duration::from_millis(300)))
        .through_handle()
        .start()
        .await?;
    assert_eq!(app.component_adapter_route(), Some(AdapterRoute::Inline));
    let steps: Vec<_> = (0..100)
        .map(|id| json!({"id": id, "sleep_ms": 10}))
        .collect();
    let published = app.publish_batch("paced", &steps).await?;
    let (distinct, calls) = handed(&app)?;
    assert_eq!(
        (distinct.len(), calls),
        (100, 100),
        "each record handled once"
    );
    let pace = app.subscriber("pace")?;
    assert!(pace.reports().iter().all(|r| r.trap.is_none()));
    assert_eq!(pace.instance_replacements(), 0);
    // Each line under the record whose `handle` call logged it: the host reads the adapter's
    // board on the way into the import.
    let lines = app.logs_containing("paced");
    assert_eq!(lines.len(), 100);
    for line in lines {
        let id: usize = line.field("step.id").expect("the step's id").parse()?;
        assert_eq!(
            line.sequence_number.as_deref(),
            Some(published[id].sequence_number.as_str()),
            "step {id}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_mid_batch_reruns_no_record_before_it() -> anyhow::Result<()> {
    for through_handle in [false, true] {
        let mut app = pacer(through_handle, Limits::default()).await?;
        trap_at_700(&mut app, "panic", TrapKind::Panic).await?;
        // Held in front of the culprit (a trap is a `retry`); everything after it is handled.
        let pace = app.subscriber("pace")?;
        assert_eq!(
            pace.held_at(),
            Some(pace.reports()[700].sequence_number.as_str())
        );
    }
    Ok(())
}

/// The pacer under a trusted tenant with `limits`, called in batches or, `through_handle`,
/// through `handle` by the host's adapter.
async fn pacer(through_handle: bool, limits: Limits) -> anyhow::Result<TestApp> {
    let builder =
        TestApp::builder(guests::PACER.path()).tenant(Tenant::trusted("pacer").limits(limits));
    let app = match through_handle {
        true => builder.through_handle(),
        false => builder,
    };
    let app = app.start().await?;
    // The pacer exports `handle-batch`: the host wraps it with its adapter only to call it
    // through `handle`.
    anyhow::ensure!(app.component_adapter_route().is_some() == through_handle);
    Ok(app)
}

/// A tenant whose records each have `deadline`.
fn with_deadline(deadline: Duration) -> Tenant {
    Tenant::trusted("pacer").limits(Limits {
        call_deadline: deadline,
        ..Limits::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_trap_mid_batch_reruns_no_record_before_it() -> anyhow::Result<()> {
    // The outcomes of records 0..700 are on the board (the guest's, or the host adapter's)
    // when record 700 runs away; the host reads them after the trap.
    for through_handle in [false, true] {
        let limits = Limits {
            call_deadline: Duration::from_millis(300),
            ..Limits::default()
        };
        let mut app = pacer(through_handle, limits).await?;
        trap_at_700(&mut app, "spin", TrapKind::Deadline).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_only_compute_get_fresh_deadlines() -> anyhow::Result<()> {
    // Records that make no host call at all (no log, no clock): the host learns of each one
    // done only from the board, at its epoch checks. Their batch runs for several deadlines.
    const ROUNDS: u64 = 2_000_000;
    let mut calibration = TestApp::start(guests::PACER.path()).await?;
    let mut slowest = Duration::ZERO;
    for id in 0..3 {
        let started = Instant::now();
        let step = json!({"id": id, "burn": ROUNDS, "quiet": true});
        calibration.publish("singly", &step).await?;
        slowest = slowest.max(started.elapsed());
    }
    // Each record well within its deadline, the batch four deadlines long. The machine's speed
    // changes under load: a batch that ran faster than its deadline proves nothing, so it is
    // run again, longer, until one outlasts the deadline.
    let deadline = (slowest * 20).max(Duration::from_millis(100));
    let first = (4 * deadline.as_nanos() / slowest.as_nanos().max(1)).clamp(10, 1_000) as u64;
    // In batches, and through `handle` by the host's adapter.
    'paths: for through_handle in [false, true] {
        let mut records = first;
        for _ in 0..4 {
            let limits = Limits {
                call_deadline: deadline,
                ..Limits::default()
            };
            let mut app = pacer(through_handle, limits).await?;
            let steps: Vec<_> = (0..records)
                .map(|id| json!({"id": id, "burn": ROUNDS, "quiet": true}))
                .collect();
            let started = Instant::now();
            app.publish_batch("paced", &steps).await?;
            let took = started.elapsed();
            assert_all_acked_without_a_trap(&app, records)?;
            if took > deadline {
                continue 'paths;
            }
            records *= 2;
        }
        panic!(
            "no batch (up to {} records, through handle: {through_handle}) outlasted one \
             deadline ({deadline:?})",
            records / 2
        )
    }
    Ok(())
}

/// Every record of the batch acked, none trapped, no instance replaced.
fn assert_all_acked_without_a_trap(app: &TestApp, records: u64) -> anyhow::Result<()> {
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.reports().len() as u64, records);
    assert!(pace.reports().iter().all(|r| r.trap.is_none()), "no trap");
    assert!(pace.outcomes().iter().all(|o| *o == Outcome::Ack));
    assert_eq!(
        (pace.calls(), pace.instance_replacements()),
        (records as usize, 0)
    );
    Ok(())
}
