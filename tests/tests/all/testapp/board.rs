//! A component that lies on its outcome board: the host reads what the contract allows and no
//! more, and a board cannot buy a runaway call more time.

use std::time::Duration;

use ruststream_runtime::{
    Outcome, Tenant, TestApp, component::TrapKind, policy::StreamGrant, tenant::Limits,
};
use ruststream_tests::guests;

/// The hostile board component with a 300 ms deadline per record; `mode` in every record.
async fn run(mode: &str, records: usize) -> anyhow::Result<TestApp> {
    let tenant = Tenant::new("evil")
        .subscribe(StreamGrant::only(["hostile"]))
        .limits(Limits {
            call_deadline: Duration::from_millis(300),
            ..Limits::default()
        });
    let mut app = TestApp::builder(guests::HOSTILE_BOARD.path())
        .tenant(tenant)
        .start()
        .await?;
    let batch = vec![mode; records];
    tokio::time::timeout(
        Duration::from_secs(120),
        app.publish_batch("hostile", &batch),
    )
    .await??;
    Ok(app)
}

/// Each record's outcome, and how its call failed if it did.
fn settled(app: &TestApp) -> anyhow::Result<Vec<(Outcome, Option<TrapKind>)>> {
    let board = app.subscriber("board")?;
    Ok(board
        .reports()
        .iter()
        .map(|r| (r.outcome, r.trap))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_past_the_batch_reads_as_the_batch() -> anyhow::Result<()> {
    let app = run("overcount", 5).await?;
    assert_eq!(settled(&app)?, vec![(Outcome::Ack, None); 5]);
    assert_eq!(app.subscriber("board")?.instance_replacements(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_board_shorter_than_the_batch_is_read_no_further() -> anyhow::Result<()> {
    // Each call: one slot, acked; the record after it is unreported (a failed attempt, which
    // this component settles as `drop`); the next call starts after it.
    let app = run("short", 4).await?;
    let failed = (Outcome::Drop, Some(TrapKind::Other));
    assert_eq!(
        settled(&app)?,
        [(Outcome::Ack, None), failed, (Outcome::Ack, None), failed]
    );
    let unreported = app
        .logs()
        .into_iter()
        .filter(|line| {
            line.fields.iter().any(|(name, value)| {
                name == "error" && value.contains("without reporting an outcome for record 1")
            })
        })
        .count();
    assert_eq!(unreported, 2, "{:?}", app.logs());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_that_rewinds_buys_no_time() -> anyhow::Result<()> {
    // It reports record 0 again and again while it spins: one fresh deadline, not endless ones.
    let app = run("rewind", 2).await?;
    let traps: Vec<_> = settled(&app)?.into_iter().filter_map(|(_, t)| t).collect();
    assert!(!traps.is_empty(), "the spinning call was stopped");
    assert!(traps.iter().all(|t| *t == TrapKind::Deadline), "{traps:?}");
    assert_eq!(settled(&app)?.len(), 2, "every record settled");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_shares_a_board_reports_only_there() -> anyhow::Result<()> {
    // Acked on the board, then dropped by `record-outcome`: the board stands.
    let app = run("both", 3).await?;
    assert_eq!(settled(&app)?, vec![(Outcome::Ack, None); 3]);
    Ok(())
}
