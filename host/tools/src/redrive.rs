//! `ruststream redrive DEAD_LETTER_STREAM`: dead letters written back to their origin
//! streams by this process, against Kinesis and DynamoDB directly (like `tail` and `put`), so
//! it needs no running host; a host's admin API runs the same engine (`POST /v1/redrives`).
//! Both keep progress in the same table, so a redrive started by one resumes in the other.
//!
//! Grants and write quotas come from the tenants file (`--config`). A run prints its progress
//! every half second and a summary at the end; stopped (even with `kill -9`) and run again
//! with the same options, it resumes without writing anything twice.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ruststream_kinesis::DynamoLeaseStore;
use ruststream_kinesis::lease::LeaseError;
use ruststream_kinesis::redrive::filter::{RedriveFilter, Tenants};
use ruststream_kinesis::redrive::{
    DryRun, Redrive, RedriveError, RedriveReport, RedriveSpec, RedriveState,
};
use ruststream_runtime::{Clock, SystemClock};

use ruststream_fleet::aws::AwsOptions;
use ruststream_fleet::config::{Config, ConfigError};

/// The DynamoDB table redrives keep their progress in unless told otherwise.
pub use ruststream_kinesis::redrive::DEFAULT_TABLE;
/// A `--since`/`--until` time (RFC 3339, or ms since the epoch) read, and what is wrong with
/// one that is not.
pub use ruststream_kinesis::redrive::filter::{TimeError, parse_time};

/// How many of the dead letters a dry run would move it lists.
const LISTED: usize = 10;

/// Set to N, the process aborts right after its Nth published batch, before that batch's
/// checkpoint: the end-to-end tests' way of stopping a run at the worst moment.
const ABORT_AFTER: &str = "RUSTSTREAM_REDRIVE_ABORT_AFTER_BATCHES";

/// How often a running redrive writes its progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Why `ruststream redrive` stopped: the tenants file, the progress table, or the redrive
/// itself (which names the call and stream); run again, it resumes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedriveVerbError {
    /// The tenants file cannot be read or has a mistake (file, line and key named).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The progress table cannot be created.
    #[error("creating redrive table `{table}`")]
    Table {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: LeaseError,
    },
    /// The redrive (or its dry run) failed.
    #[error(transparent)]
    Redrive(#[from] RedriveError),
    /// Progress or the summary cannot be written to the output.
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
}

/// What `ruststream redrive` moves, and where it keeps its progress.
#[derive(Debug, Clone)]
pub struct RedriveOptions {
    /// The dead-letter stream.
    pub stream: String,
    /// The tenants file: whose dead letters may go back where (their grants), and at what
    /// rate (their write quota).
    pub config: PathBuf,
    /// Only the dead letters of this tenant.
    pub tenant: Option<String>,
    /// Only those dead-lettered for this reason.
    pub reason: Option<String>,
    /// Only those that reached the dead-letter stream at or after this time (ms since the
    /// Unix epoch).
    pub since: Option<u64>,
    /// Only those that reached it at or before this time [default: when the redrive first
    /// started].
    pub until: Option<u64>,
    /// Say what would move and what would be refused; write nothing.
    pub dry_run: bool,
    /// The redrive's name [default: derived from the stream and the options].
    pub id: Option<String>,
    /// The DynamoDB table redrives keep their progress in.
    pub redrive_table: String,
    /// Create the table if it does not exist.
    pub create_redrive_table: bool,
    /// How long a stopped run holds the redrive before another may resume it (at least 1 s).
    pub lease_ttl: Duration,
    /// Where Kinesis and DynamoDB are.
    pub aws: AwsOptions,
}

/// Runs (or with `--dry-run`, plans) the redrive, writing to `out` as it goes: its name, its
/// progress every half second, and the summary (or the plan).
///
/// # Errors
/// The tenants file; the table; a failed call (running it again resumes); `out`; see
/// [`RedriveVerbError`].
pub async fn redrive(args: RedriveOptions, out: &mut dyn Write) -> Result<(), RedriveVerbError> {
    let config = Config::load(&args.config)?;
    let tenants: Tenants = config
        .tenants()
        .iter()
        .map(|section| (section.name().to_owned(), Arc::new(config.tenant(section))))
        .collect();
    let shared = args.aws.shared_config().await;
    let kinesis = aws_sdk_kinesis::Client::new(&args.aws.kinesis(&shared));
    let store = DynamoLeaseStore::new(
        aws_sdk_dynamodb::Client::new(&args.aws.dynamodb(&shared)),
        &args.redrive_table,
    );
    if args.create_redrive_table {
        store
            .create_table_if_missing()
            .await
            .map_err(|source| RedriveVerbError::Table {
                table: args.redrive_table.clone(),
                source,
            })?;
    }
    let filter = RedriveFilter {
        tenant: args.tenant.clone(),
        reason: args.reason.clone(),
        since_ms: args.since,
        until_ms: args.until,
    };
    let spec = RedriveSpec::new(&args.stream, filter, args.id.clone());
    let owner = format!("redrive-{}-{}", std::process::id(), SystemClock.now_ms());
    let ttl = args.lease_ttl.max(Duration::from_secs(1));
    let redrive = Redrive::new(kinesis, Arc::new(store), tenants, spec, &owner, ttl);
    if args.dry_run {
        let plan = redrive.dry_run(LISTED).await?;
        write!(out, "{}", render_plan(&args.stream, &plan))?;
        return Ok(());
    }
    let redrive = abort_after_env(redrive);
    writeln!(out, "redrive {} of `{}`", redrive.id(), args.stream)?;
    let report = run_showing_progress(&redrive, out).await?;
    write!(out, "{}", render_report(&report))?;
    Ok(())
}

/// `redrive`, made to abort after the number of batches [`ABORT_AFTER`] names, when set.
fn abort_after_env(redrive: Redrive) -> Redrive {
    match std::env::var(ABORT_AFTER)
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
    {
        Some(after) => redrive.on_published(Arc::new(move |batches| {
            if batches >= after {
                std::process::abort();
            }
        })),
        None => redrive,
    }
}

/// Runs `redrive` to its end, writing its progress to `out` every [`PROGRESS_EVERY`].
async fn run_showing_progress(
    redrive: &Redrive,
    out: &mut dyn Write,
) -> Result<RedriveReport, RedriveVerbError> {
    let progress = redrive.progress();
    let mut run = std::pin::pin!(redrive.run());
    let first = tokio::time::Instant::now() + PROGRESS_EVERY;
    let mut ticks = tokio::time::interval_at(first, PROGRESS_EVERY);
    loop {
        tokio::select! {
            report = &mut run => return Ok(report?),
            _ = ticks.tick() => {
                let now = ruststream_common::sync::lock(&progress).clone();
                writeln!(out, "progress: {}", counts(&now))?;
            }
        }
    }
}

fn counts(report: &RedriveReport) -> String {
    let skipped: u64 = report.skipped.values().sum();
    format!(
        "redriven {} (this run {}), skipped {skipped}",
        report.redriven, report.redriven_now
    )
}

/// The summary of a finished run: counts, then every refused dead letter listed.
pub(crate) fn render_report(report: &RedriveReport) -> String {
    let state = match report.state {
        RedriveState::Running => "running",
        RedriveState::Finished => "finished",
        RedriveState::Failed => "failed",
    };
    let mut out = format!(
        "redrive {} of `{}`: {state}\n{}\n",
        report.id,
        report.stream,
        counts(report)
    );
    for (reason, count) in &report.skipped {
        let _ = writeln!(out, "skipped {reason}: {count}");
    }
    for refused in &report.refused {
        let _ = writeln!(
            out,
            "refused {} {}: origin `{}`, tenant `{}`: {}",
            refused.shard,
            refused.sequence,
            refused.origin_stream.as_deref().unwrap_or("-"),
            refused.tenant.as_deref().unwrap_or("-"),
            refused.reason.label()
        );
    }
    out
}

/// What a dry run found: per origin stream and reason, refusals, the first records.
fn render_plan(stream: &str, plan: &DryRun) -> String {
    let mut out = format!(
        "dry run of redrive {} of `{stream}`: nothing is written\n",
        plan.id
    );
    for (origin, reasons) in &plan.moves {
        for (reason, count) in reasons {
            let _ = writeln!(out, "would redrive {count} to `{origin}` ({reason})");
        }
    }
    for (reason, count) in &plan.refused {
        let _ = writeln!(out, "would refuse {count} ({reason})");
    }
    if plan.moves.is_empty() {
        out.push_str("nothing to redrive\n");
    }
    for first in &plan.first {
        let _ = writeln!(
            out,
            "  {} {} -> `{}` tenant `{}` subscriber `{}` ({}) key `{}`",
            first.shard,
            first.sequence,
            first.origin_stream,
            first.tenant,
            first.subscriber,
            first.reason,
            first.partition_key
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_tenants_file_is_named_before_anything_is_read() {
        let config = std::env::temp_dir().join("ruststream-redrive-no-such-tenants.toml");
        let options = RedriveOptions {
            stream: "orders.dead".into(),
            config: config.clone(),
            tenant: None,
            reason: None,
            since: None,
            until: None,
            dry_run: true,
            id: None,
            redrive_table: DEFAULT_TABLE.into(),
            create_redrive_table: false,
            lease_ttl: Duration::from_secs(1),
            aws: AwsOptions::default(),
        };
        let mut out = Vec::new();
        let error = redrive(options, &mut out).await.err();
        assert!(
            matches!(&error, Some(RedriveVerbError::Config(ConfigError::Read { path, .. })) if *path == config),
            "{error:?}"
        );
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    }
}
