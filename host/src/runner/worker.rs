//! The shard worker: reads one leased shard and feeds its pipeline until the shard ends, the
//! lease is lost, or the host shuts down.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::HostConfig;
use super::keeper::{Keeper, KeeperTiming};
use super::seek::ShardSeek;
use super::status::{ShardState, StatusBoard};
use crate::app::{StartPosition, SubscriptionSpec};
use crate::component::{InstanceEnv, LoadedComponent};
use crate::kinesis::{ReadError, ShardReader, StartAt};
use crate::lease::{HeldLease, LeaseStore, SHARD_END};
use crate::pipeline::{PipelineEnv, ShardPipeline};

/// Everything a worker needs, shared by the workers of one subscription.
#[derive(Clone)]
pub(crate) struct WorkerContext {
    pub client: aws_sdk_kinesis::Client,
    pub spec: Arc<SubscriptionSpec>,
    pub component: LoadedComponent,
    pub instance_env: InstanceEnv,
    pub pipeline_env: PipelineEnv,
    pub store: Arc<dyn LeaseStore>,
    pub config: Arc<HostConfig>,
    /// Where shards without a checkpoint start.
    pub start: Option<StartPosition>,
    pub status: StatusBoard,
    pub shutdown: watch::Receiver<bool>,
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkerExit {
    /// Read to its end and settled; the lease holds `SHARD_END`.
    Finished,
    /// Another host took the lease.
    Lost,
    /// Host shutdown: checkpoint flushed, lease released.
    Stopped,
    /// The stream was deleted.
    StreamGone,
    /// Could not read on; the lease was released for a later try.
    Failed(String),
}

pub(crate) async fn run(
    ctx: WorkerContext,
    lease: HeldLease,
    seeks: mpsc::UnboundedReceiver<ShardSeek>,
    child: bool,
) -> (String, WorkerExit) {
    let shard_id = lease.key.shard_id().to_owned();
    let exit = work(&ctx, lease, seeks, child).await;
    let state = match &exit {
        WorkerExit::Finished => ShardState::Finished,
        WorkerExit::Lost => ShardState::Lost,
        WorkerExit::Stopped => ShardState::Stopped,
        WorkerExit::StreamGone => ShardState::Failed("the stream no longer exists".into()),
        WorkerExit::Failed(reason) => ShardState::Failed(reason.clone()),
    };
    ctx.status.set_state(&shard_id, state);
    (shard_id, exit)
}

async fn work(
    ctx: &WorkerContext,
    lease: HeldLease,
    seeks: mpsc::UnboundedReceiver<ShardSeek>,
    child: bool,
) -> WorkerExit {
    let shard_id = lease.key.shard_id().to_owned();
    let checkpoint = lease.checkpoint.clone();
    let keeper = Keeper::spawn(ctx.store.clone(), lease, timing(&ctx.config));
    if checkpoint.as_deref() == Some(SHARD_END) {
        keeper.finish().await;
        return WorkerExit::Finished;
    }
    ctx.status.set_state(&shard_id, ShardState::Opening);
    let start = start_at(checkpoint.as_deref(), ctx.start.as_ref(), &shard_id, child);
    let reader = ShardReader::open(
        ctx.client.clone(),
        &ctx.spec.stream,
        &shard_id,
        start.clone(),
        ctx.config.reader.clone(),
    )
    .await;
    tracing::info!(stream = %ctx.spec.stream, shard = %shard_id, ?start,
        subscriber = %ctx.spec.name, tenant = %ctx.pipeline_env.tenant.name(), "reading shard");
    let mut reader = match reader {
        Ok(reader) => reader,
        Err(error) => return give_up(keeper, error).await,
    };
    let instance = ctx.component.instance(ctx.instance_env.clone());
    let mut pipeline = ShardPipeline::new(
        ctx.spec.clone(),
        &shard_id,
        checkpoint,
        instance,
        ctx.pipeline_env.clone(),
    );
    ctx.status.set_state(&shard_id, ShardState::Reading);
    let exit = read(ctx, &keeper, &mut reader, &mut pipeline, seeks).await;
    ctx.status.update(&shard_id, |s| {
        s.checkpoint = pipeline.checkpoint().map(str::to_owned);
        s.held_at = pipeline.held_at().map(str::to_owned);
    });
    match exit {
        WorkerExit::Lost => WorkerExit::Lost,
        WorkerExit::Finished => {
            keeper.checkpoint(SHARD_END.to_owned());
            keeper.finish().await;
            WorkerExit::Finished
        }
        other => {
            if let Some(position) = pipeline.checkpoint() {
                keeper.checkpoint(position.to_owned());
            }
            keeper.finish().await;
            other
        }
    }
}

/// The read loop. Returns how it ended; the caller flushes and releases.
async fn read(
    ctx: &WorkerContext,
    keeper: &Keeper,
    reader: &mut ShardReader,
    pipeline: &mut ShardPipeline,
    mut seeks: mpsc::UnboundedReceiver<ShardSeek>,
) -> WorkerExit {
    let mut lost = keeper.lost();
    let mut shutdown = ctx.shutdown.clone();
    let mut quarantine = ctx.pipeline_env.tenant.watch_quarantine();
    let shard_id = pipeline.shard_id().to_owned();
    loop {
        if keeper.is_lost() {
            return WorkerExit::Lost;
        }
        if *shutdown.borrow() {
            return WorkerExit::Stopped;
        }
        if reader.is_finished() && pipeline.is_settled() {
            return WorkerExit::Finished;
        }
        let due = pipeline
            .next_due_ms()
            .map(|ms| instant_at(&ctx.pipeline_env, ms));
        // A quarantined tenant reads nothing more; what it read waits, parked.
        let paused = *quarantine.borrow_and_update();
        ctx.status.update(&shard_id, |s| s.quarantined = paused);
        tokio::select! {
            biased;
            _ = lost.changed() => {}
            _ = shutdown.changed() => {}
            _ = quarantine.changed() => {}
            batch = reader.next(), if !reader.is_finished() && !paused => match batch {
                Ok(batch) => {
                    let count = batch.records.len() as u64;
                    pipeline.deliver(batch.records).await;
                    ctx.status.update(&shard_id, |s| s.delivered += count);
                }
                Err(ReadError::StreamGone(_)) => return WorkerExit::StreamGone,
                Err(ReadError::Service(reason)) => return WorkerExit::Failed(reason),
            },
            _ = sleep_until(due), if due.is_some() => {
                pipeline.poll_due().await;
            }
            Some(seek) = seeks.recv() => {
                let moved = reposition(ctx, reader, pipeline, &seek.position).await;
                let _ = seek.reply.send(moved);
            }
        }
        if let Some(position) = pipeline.take_checkpoint() {
            ctx.status
                .update(&shard_id, |s| s.checkpoint = Some(position.clone()));
            keeper.checkpoint(position);
        }
        ctx.status.update(&shard_id, |s| {
            s.held_at = pipeline.held_at().map(str::to_owned)
        });
    }
}

/// Reopens the shard at `position` and starts its bookkeeping afresh: records delivered
/// before no longer move the checkpoint. On failure the shard reads on where it was.
async fn reposition(
    ctx: &WorkerContext,
    reader: &mut ShardReader,
    pipeline: &mut ShardPipeline,
    position: &StartPosition,
) -> Result<(), String> {
    let shard_id = pipeline.shard_id().to_owned();
    let start = start_at(None, Some(position), &shard_id, false);
    let reopened = ShardReader::open(
        ctx.client.clone(),
        &ctx.spec.stream,
        &shard_id,
        start,
        ctx.config.reader.clone(),
    )
    .await
    .map_err(|error| error.to_string())?;
    *reader = reopened;
    pipeline.reset(None);
    Ok(())
}

async fn give_up(keeper: Keeper, error: ReadError) -> WorkerExit {
    keeper.finish().await;
    match error {
        ReadError::StreamGone(_) => WorkerExit::StreamGone,
        ReadError::Service(reason) => WorkerExit::Failed(reason),
    }
}

/// Stored checkpoint first, then the subscription's start position, then the tip. A child of
/// a split or merge starts at its beginning (its parents were read to their end), unless the
/// subscription starts at a timestamp.
fn start_at(
    checkpoint: Option<&str>,
    start: Option<&StartPosition>,
    shard_id: &str,
    child: bool,
) -> StartAt {
    if let Some(sequence) = checkpoint {
        return StartAt::AfterSequence(sequence.to_owned());
    }
    match start {
        Some(StartPosition::AtTimestamp(ms)) => StartAt::AtTimestamp(*ms),
        _ if child => StartAt::Horizon,
        Some(StartPosition::Horizon) => StartAt::Horizon,
        Some(StartPosition::AtSequence {
            shard_id: shard,
            sequence_number,
        }) if shard == shard_id => StartAt::AtSequence(sequence_number.clone()),
        _ => StartAt::Latest,
    }
}

fn timing(config: &HostConfig) -> KeeperTiming {
    KeeperTiming {
        ttl: config.lease_ttl,
        renew_every: config.renew_interval,
        checkpoint_every: config.checkpoint_interval,
    }
}

/// The monotonic instant at which the pipeline clock reads `at_ms`.
fn instant_at(env: &PipelineEnv, at_ms: u64) -> Instant {
    let now = env.clock.now_ms();
    Instant::now() + std::time::Duration::from_millis(at_ms.saturating_sub(now))
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_wins_over_any_start_position() {
        assert_eq!(
            start_at(Some("42"), Some(&StartPosition::Horizon), "s-0", true),
            StartAt::AfterSequence("42".into())
        );
        assert_eq!(
            start_at(None, Some(&StartPosition::Horizon), "s-0", false),
            StartAt::Horizon
        );
        assert_eq!(start_at(None, None, "s-0", false), StartAt::Latest);
    }

    #[test]
    fn a_child_shard_starts_at_its_beginning_unless_a_timestamp_says_otherwise() {
        assert_eq!(start_at(None, None, "s-2", true), StartAt::Horizon);
        assert_eq!(
            start_at(None, Some(&StartPosition::AtTimestamp(7)), "s-2", true),
            StartAt::AtTimestamp(7)
        );
    }

    #[test]
    fn a_sequence_position_applies_to_its_shard_only() {
        let at = StartPosition::AtSequence {
            shard_id: "s-1".into(),
            sequence_number: "9".into(),
        };
        assert_eq!(
            start_at(None, Some(&at), "s-1", false),
            StartAt::AtSequence("9".into())
        );
        assert_eq!(start_at(None, Some(&at), "s-0", false), StartAt::Latest);
    }
}
