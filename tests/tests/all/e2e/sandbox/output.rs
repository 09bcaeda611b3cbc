//! Output: what a tenant makes the host log is bounded. The host's own lines about a tenant
//! (refused publishes, held records, traps) are capped per kind and summarised; what a call
//! writes to stdout is capped per call; no control character reaches a log line.

use std::sync::Arc;

use ruststream_common::escape::one_line;

use ruststream_runtime::{
    Tenant,
    log::{LogLine, Origin},
    policy::StreamGrant,
    tenant::{Limits, LogLimits},
};
use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::guests;
use ruststream_tests::wait::eventually;
use serde_json::json;

use super::{Arena, WAIT, assert_printable, evil, evil_limits};

/// Lines whose message starts with `prefix`, and what the summaries of `kind` say was
/// dropped: together, every line the host wanted to log.
fn emitted_and_dropped(logs: &[LogLine], prefix: &str, kind: &str) -> (usize, u64) {
    let emitted = logs
        .iter()
        .filter(|l| l.message.starts_with(prefix))
        .count();
    let summary = format!("more `{kind}` lines about this tenant were dropped");
    let dropped = logs
        .iter()
        .filter(|l| l.message.contains(&summary))
        .filter_map(|l| l.field("dropped")?.parse::<u64>().ok())
        .sum();
    (emitted, dropped)
}

fn hostile_values(count: u64) -> Vec<serde_json::Value> {
    (0..count).map(|id| json!({"id": 1000 + id})).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_refused_while_describing_are_summarised() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let tenant = Arc::new(evil().limits(Limits::default()));
    let loaded = arena.load(guests::HOSTILE_DESCRIBE_PUBLISH, &tenant).await;
    assert!(loaded.is_ok(), "{:?}", loaded.err().map(|e| one_line(&e)));
    let logs: Vec<LogLine> = arena
        .logs()
        .into_iter()
        .filter(|l| l.tenant.as_deref() == Some("evil"))
        .collect();
    let (emitted, dropped) = emitted_and_dropped(&logs, "publish refused", "publish-refused");
    assert_eq!(
        emitted as u64 + dropped,
        100_000,
        "every refusal is logged or counted"
    );
    let per_second = Limits::default().log.host_lines_per_second as usize;
    assert!(
        emitted <= 10 * per_second,
        "{emitted} lines of 100 000 refusals"
    );
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_records_and_traps_are_logged_within_the_tenants_budget() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let holder = arena.run(guests::HOSTILE_RETRY_FLOOD, evil()).await?;
    let panicker = Tenant::new("panicky")
        .subscribe(StreamGrant::only(["hostile"]))
        .limits(evil_limits())
        .quarantine_after(0);
    let panics = arena.run(guests::HOSTILE_PANIC, panicker).await?;
    let started = std::time::Instant::now();
    put_json_batch(&arena.client, "hostile", &hostile_values(1500)).await?;
    // Each record reaches both: one held, one trapped.
    let all = eventually(WAIT, || arena.hostile_reports().len() >= 3000).await;
    assert!(all, "{} deliveries", arena.hostile_reports().len());
    holder.shutdown().await;
    panics.shutdown().await;
    let windows = started.elapsed().as_secs() as usize + 2;
    let of = |tenant: &str| -> Vec<LogLine> {
        let logs = arena.logs().into_iter();
        logs.filter(|l| l.tenant.as_deref() == Some(tenant))
            .collect()
    };
    let (held, held_dropped) = emitted_and_dropped(&of("evil"), "retry requested", "held");
    assert_eq!(held as u64 + held_dropped, 1500, "{held} held lines");
    let panicky = of("panicky");
    let (traps, trap_dropped) = emitted_and_dropped(&panicky, "handler call failed", "trap");
    assert_eq!(traps as u64 + trap_dropped, 1500, "{traps} trap lines");
    // The budget is per one-second window of each kind: a loaded machine takes more windows.
    let per_second = Limits::default().log.host_lines_per_second as usize;
    assert!(
        held <= windows * per_second && traps <= windows * per_second,
        "{held} held and {traps} trap lines in {windows} windows of {per_second}"
    );
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_is_capped_per_call_however_many_records_it_handles() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let flood = arena.run(guests::HOSTILE_STDOUT_FLOOD, evil()).await?;
    // 40 records: 40 MiB of stdout asked for, in one or a few calls.
    put_json_batch(&arena.client, "hostile", &hostile_values(40)).await?;
    let all = eventually(WAIT, || arena.hostile_reports().len() >= 40).await;
    assert!(all, "{} deliveries", arena.hostile_reports().len());
    flood.shutdown().await;
    let logs = arena.logs();
    let kept: usize = logs
        .iter()
        .filter(|l| l.field("fd") == Some("stdout") && l.tenant.as_deref() == Some("evil"))
        .map(|l| l.message.len())
        .sum();
    let calls = logs
        .iter()
        .filter(|l| l.message.starts_with("log output capped"))
        .count()
        .max(1);
    let cap = LogLimits::default().bytes_per_call;
    assert!(kept <= calls * cap, "{kept} bytes kept over {calls} calls");
    assert!(kept > 0, "what fits is still logged");
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_never_reach_the_log() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run(guests::HOSTILE_ESCAPE, evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    let logs = arena.logs();
    let forged: Vec<&LogLine> = logs
        .iter()
        .filter(|l| l.origin == Origin::Guest && l.tenant.as_deref() == Some("evil"))
        .collect();
    assert!(
        forged.len() >= 3,
        "log, stdout and stderr lines: {forged:#?}"
    );
    for line in &logs {
        assert_printable(line);
    }
    assert!(
        forged.iter().all(|l| l.message.contains("\\u{1b}")),
        "shown escaped: {forged:#?}"
    );
    arena.assert_settlement_flows().await
}
