//! The shard worker: reads one leased shard and feeds its pipeline until the shard ends, the
//! lease is lost or wanted elsewhere, or the host shuts down.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use ruststream_common::escape::one_line;
use ruststream_common::sync::sleep_until;
use ruststream_runtime::{
    Clock, Delivery, ShardPipeline, Tenant, app::StartPosition, pipeline::Stop,
};

use super::HostConfig;
use super::release::SubscriptionRelease;
use super::seek::{FleetSeekMark, ShardSeek};
use super::shadow::{ShadowFeed, ShadowRelease};
use super::status::{ShardState, StatusBoard};
use crate::kinesis::{
    Consumers, ReadError, ReadMode, ReaderOwner, ShardInfo, ShardListings, ShardReader,
    SharedReads, StartAt, list_shards,
};
use crate::lease::keeper::{CutAtShutdown, Keeper, WriteError};
use crate::lease::{
    AT_SEQUENCE_PREFIX, Checkpoint, HeldLease, LeaseKey, LeaseStore, SHARD_END, TRIM_HORIZON,
};
use crate::metrics::LeaseMetrics;

/// How long a worker handing its lease over keeps trying to publish the copies it owes.
const HANDOFF_COPY_GRACE: Duration = Duration::from_secs(2);

/// Everything a worker needs, shared by the workers of one subscription.
#[derive(Clone)]
pub(crate) struct WorkerContext {
    pub client: aws_sdk_kinesis::Client,
    /// The host's shard listings of `client` (for the coordinator's rounds).
    pub listings: Arc<ShardListings>,
    /// The host's reads of shards with `client`: turns, and reads shared between readers.
    pub reads: Arc<SharedReads>,
    /// How the subscription reads its shards.
    pub read: ReadMode,
    /// Its enhanced fan-out consumer, by name (used in fan-out mode), and the consumers
    /// registered with `client`.
    pub consumer: String,
    pub consumers: Arc<Consumers>,
    /// The subscription's name and stream, which no release changes.
    pub subscriber: String,
    pub stream: String,
    pub tenant: Arc<Tenant>,
    pub clock: Arc<dyn Clock>,
    /// The version the subscription runs now; workers change over between two calls.
    pub release: watch::Receiver<Arc<SubscriptionRelease>>,
    /// Where shards without a checkpoint start after a seek, over the release's own start.
    pub seek_start: Option<StartPosition>,
    pub store: Arc<dyn LeaseStore>,
    pub config: Arc<HostConfig>,
    pub status: StatusBoard,
    pub shutdown: watch::Receiver<bool>,
    pub leases: LeaseMetrics,
    /// The app's shadow version, if one runs beside it: fed what this shard settles.
    pub shadow: watch::Receiver<Option<Arc<ShadowRelease>>>,
}

/// A leased shard, as the coordinator hands it to a worker.
pub(crate) struct Assignment {
    pub lease: HeldLease,
    /// The shard as listed when its lease was taken.
    pub shard: ShardInfo,
    /// The lease key of a shard of this subscription: children started by a finished shard
    /// are keyed like it.
    pub key_of: Arc<dyn Fn(&str) -> LeaseKey + Send + Sync>,
    /// A fleet seek the lease row says has not moved the shard yet: it opens there.
    pub seek: Option<FleetSeekMark>,
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkerExit {
    /// Read to its end and settled; the lease holds `SHARD_END`.
    Finished,
    /// Another host took the lease.
    Lost,
    /// Handed over to the host that asked for it, checkpoint flushed.
    HandedOver(String),
    /// Host shutdown: checkpoint flushed, lease released.
    Stopped,
    /// The stream was deleted.
    StreamGone,
    /// Could not read on; the lease was released for a later try.
    Failed(String),
    /// The tenant's identity may not read the shard (IAM or KMS denied a call, named in the
    /// reason with the tenant); the lease was released, and the subscription takes none for a
    /// while.
    Denied(String),
}

pub(crate) async fn run(
    ctx: WorkerContext,
    assignment: Assignment,
    seeks: mpsc::UnboundedReceiver<ShardSeek>,
) -> (String, WorkerExit) {
    let shard_id = assignment.lease.key.shard_id().to_owned();
    let exit = work(&ctx, assignment, seeks).await;
    let state = match &exit {
        WorkerExit::Finished => ShardState::Finished,
        WorkerExit::Lost => ShardState::Lost,
        WorkerExit::HandedOver(to) => ShardState::HandedOver(to.clone()),
        WorkerExit::Stopped => ShardState::Stopped,
        WorkerExit::StreamGone => ShardState::Failed("the stream no longer exists".into()),
        WorkerExit::Failed(reason) | WorkerExit::Denied(reason) => {
            ShardState::Failed(reason.clone())
        }
    };
    ctx.status.set_state(&shard_id, state);
    (shard_id, exit)
}

async fn work(
    ctx: &WorkerContext,
    assignment: Assignment,
    seeks: mpsc::UnboundedReceiver<ShardSeek>,
) -> WorkerExit {
    let Assignment {
        lease,
        shard,
        key_of,
        seek,
    } = assignment;
    let mut mark = lease.seek_mark;
    // A fleet seek not carried out on the shard yet replaces its checkpoint.
    let stored = match &seek {
        Some(_) => None,
        None => lease.checkpoint.as_deref().map(Checkpoint::parse),
    };
    let keeper = Keeper::spawn(
        ctx.store.clone(),
        lease,
        ctx.config.keeper_timing(),
        ctx.leases.clone(),
        Some(CutAtShutdown {
            shutdown: ctx.shutdown.clone(),
            after: ctx.config.calls_grace(),
        }),
    );
    let grace = ctx.config.shutdown_grace;
    if stored == Some(Checkpoint::ShardEnd) {
        keeper.finish(grace).await;
        return WorkerExit::Finished;
    }
    ctx.status.update(&shard.shard_id, |s| {
        s.state = ShardState::Opening;
        s.owner = Some(ctx.config.owner_id.clone());
    });
    let mut release = ctx.release.clone();
    let current = release.borrow_and_update().clone();
    let first_start = match &seek {
        Some(seek) => Some(&seek.position),
        None => ctx.seek_start.as_ref().or(current.start.as_ref()),
    };
    let start = start_at(stored.as_ref(), first_start, &shard.shard_id);
    // A fleet seek not carried out on the shard yet: where it moves the shard, stored with its
    // mark once the reader is open there and before anything is read, for the reason the pin
    // below is (at the tip, records stored after the position shown are read).
    let moved_to = seek
        .as_ref()
        .map(|seek| (seek_checkpoint(&start, ctx.clock.as_ref()), seek.id));
    // Opened at a time (or the tip) with nothing handled yet: pin where, so that a restart
    // reads again from there. Pinned once the reader is open: a checkpoint is what shows the
    // shard open (to the fleet, an operator, a producer waiting for it), and at the tip the
    // reader, opened first (its iterator had, or by fan-out its start taken), reads every
    // record stored after the pin. A reader that cannot open (its identity denied, the
    // server away) pins all the same before the lease is given up, so the shard opened when
    // it was first taken and the next holder reads what arrived meanwhile. The tip's pin is
    // provisional: the first record read replaces it before it is delivered
    // (`pin_first_record`).
    let pin = match (&stored, &seek) {
        (None, None) => pinned(&start, ctx.clock.as_ref()),
        _ => None,
    };
    let reader = open_reader(ctx, &current, &shard.shard_id, start.clone()).await;
    let mut reader = match reader {
        Ok(reader) => reader,
        Err(error) => {
            if let Some((moved_to, id)) = &moved_to
                && let Err(reason) = keeper.write_seek_now(moved_to.to_string(), *id).await
            {
                tracing::warn!(stream = %ctx.stream, shard = %shard.shard_id, mark = id,
                    "cannot store where the fleet's seek moved the shard: {}", one_line(&reason));
            }
            if let Some(pin) = pin
                && let Err(reason) = keeper.write_now(pin.to_string()).await
            {
                tracing::warn!(stream = %ctx.stream, shard = %shard.shard_id,
                    "cannot pin where the shard opened: {}", one_line(&reason));
            }
            return give_up(ctx, keeper, error, grace).await;
        }
    };
    if let Some((moved_to, id)) = moved_to {
        if let Err(exit) = store_seek(ctx, &keeper, moved_to, id).await {
            keeper.finish(grace).await;
            return exit;
        }
        mark = Some(id);
        tracing::info!(stream = %ctx.stream, shard = %shard.shard_id, ?start, mark = id,
            "the fleet's seek carried out on a shard taken after it");
    }
    if let Some(pin) = pin
        && let Err(reason) = keeper.write_now(pin.to_string()).await
    {
        keeper.finish(grace).await;
        return WorkerExit::Failed(format!(
            "cannot pin where the shard opened: {}",
            one_line(&reason)
        ));
    }
    tracing::info!(stream = %ctx.stream, shard = %shard.shard_id, ?start,
        subscriber = %ctx.subscriber, tenant = %ctx.tenant.name(), "reading shard");
    ctx.status.follow_reads(&shard.shard_id, reader.progress());
    ctx.status.set_read(&shard.shard_id, reader.mode());
    let unpinned = stored.is_none() && start == StartAt::Latest;
    let sequence = match stored {
        Some(Checkpoint::Sequence(sequence)) => Some(sequence),
        _ => None,
    };
    let mut pipeline = ShardPipeline::new(
        &current.release.component,
        current.spec.clone(),
        &shard.shard_id,
        sequence,
        current.release.env.clone(),
    );
    pipeline.stop_when(keeper.stop());
    pipeline.count_outcomes_in(ctx.status.outcome_counter(&shard.shard_id));
    ctx.status.set_state(&shard.shard_id, ShardState::Reading);
    let mut version = Version {
        release,
        rewind: current.rewind,
        running: current.clone(),
        unpinned,
        opened_at: start.clone(),
    };
    let exit = read(
        ctx,
        &keeper,
        &mut reader,
        &mut pipeline,
        &mut version,
        seeks,
        &mut mark,
    )
    .await;
    ctx.status.update(&shard.shard_id, |s| {
        s.checkpoint = pipeline.checkpoint().map(str::to_owned);
    });
    ctx.status
        .set_holds(&shard.shard_id, &pipeline, ctx.clock.now_ms());
    let skipped = shard.closed && matches!(start, StartAt::Latest);
    let exit = match exit {
        WorkerExit::Finished if !skipped => {
            // Children of a shard this namespace read start at their beginning; those of one
            // it skipped (closed before it was first opened at the tip) start where the
            // subscription does. Seeded before SHARD_END is stored, so a crash in between
            // reads the parent's end again rather than skipping a child.
            match seed_children(ctx, &reader, &shard.shard_id, key_of.as_ref(), mark).await {
                Ok(()) => WorkerExit::Finished,
                Err(reason) => WorkerExit::Failed(reason),
            }
        }
        other => other,
    };
    end(ctx, keeper, &mut pipeline, exit).await
}

/// Whose reads a worker's are: its tenant, its app, its subscription.
/// Opens `shard_id` at `start` in the subscription's read mode, for `release`'s reads.
async fn open_reader(
    ctx: &WorkerContext,
    release: &SubscriptionRelease,
    shard_id: &str,
    start: StartAt,
) -> Result<ShardReader, ReadError> {
    match ctx.read {
        ReadMode::Polling => {
            let owner = owner(ctx, release);
            let config = ctx.config.reader.clone();
            ShardReader::open(&ctx.reads, owner, &ctx.stream, shard_id, start, config).await
        }
        ReadMode::FanOut => {
            ShardReader::open_fan_out(
                &ctx.client,
                ctx.listings.clone(),
                &ctx.consumers,
                &ctx.consumer,
                ctx.reads.clone(),
                owner(ctx, release),
                &ctx.stream,
                shard_id,
                start,
                &ctx.config.reader,
            )
            .await
        }
    }
}

fn owner(ctx: &WorkerContext, release: &SubscriptionRelease) -> ReaderOwner {
    ReaderOwner::new(
        ctx.tenant.name(),
        &release.release.component.app().name,
        &ctx.subscriber,
    )
}

/// Stores `TRIM_HORIZON` as the start of each child of `shard_id` that has no checkpoint.
///
/// # Errors
/// When the children cannot be listed or seeded: the shard must then not be marked finished.
async fn seed_children(
    ctx: &WorkerContext,
    reader: &ShardReader,
    shard_id: &str,
    key_of: &(dyn Fn(&str) -> LeaseKey + Send + Sync),
    mark: Option<u64>,
) -> Result<(), String> {
    let children: Vec<String> = if reader.children().is_empty() {
        // The server did not name them: list the stream.
        let within = ctx.config.reader.list_shards_timeout;
        tokio::time::timeout(within, list_shards(&ctx.client, &ctx.stream))
            .await
            .unwrap_or_else(|_| {
                Err(ReadError::TimedOut {
                    operation: "ListShards",
                    target: format!("`{}`", ctx.stream),
                    after: within,
                })
            })
            .map_err(|error| format!("listing the children of {shard_id}: {}", one_line(&error)))?
            .into_iter()
            .filter(|child| child.parents.iter().any(|p| p == shard_id))
            .map(|child| child.shard_id)
            .collect()
    } else {
        reader.children().to_vec()
    };
    for child in children {
        ctx.store
            .seed_checkpoint(&key_of(&child), TRIM_HORIZON, mark)
            .await
            .map_err(|error| format!("seeding child {child}: {}", one_line(&error)))?;
    }
    Ok(())
}

/// Flushes and lets the lease go as `exit` requires.
async fn end(
    ctx: &WorkerContext,
    keeper: Keeper,
    pipeline: &mut ShardPipeline,
    exit: WorkerExit,
) -> WorkerExit {
    let grace = ctx.config.shutdown_grace;
    match exit {
        WorkerExit::Lost => WorkerExit::Lost,
        WorkerExit::Finished => {
            keeper.checkpoint(SHARD_END.to_owned());
            keeper.finish(grace).await;
            WorkerExit::Finished
        }
        WorkerExit::HandedOver(to) => {
            pipeline.send_copies(HANDOFF_COPY_GRACE).await;
            if let Some(position) = pipeline.checkpoint() {
                keeper.checkpoint(position.to_owned());
            }
            keeper.hand_off(to.clone(), grace).await;
            WorkerExit::HandedOver(to)
        }
        other => {
            if let Some(position) = pipeline.checkpoint() {
                keeper.checkpoint(position.to_owned());
            }
            keeper.finish(grace).await;
            other
        }
    }
}

/// The release a worker runs, and what it needs to change over to the next one.
struct Version {
    release: watch::Receiver<Arc<SubscriptionRelease>>,
    /// The release the pipeline runs (`changed()` in the read loop marks newer ones seen
    /// before the loop changes over to them, so this, not the watch, says what is new).
    running: Arc<SubscriptionRelease>,
    /// The rollback count the worker has acted on.
    rewind: u64,
    /// Where the shard was opened, to read again from when nothing is checkpointed yet.
    opened_at: StartAt,
    /// Opened at the tip with nothing stored: the first record read is pinned before it is
    /// delivered.
    unpinned: bool,
}

impl Version {
    /// Changes over to a new release, if one was published: between two calls, so calls in
    /// flight finished on the old version. After a rollback, a shard holding records reads
    /// again from its checkpoint, so the version rolled back to gets the held records.
    async fn change_over(
        &mut self,
        ctx: &WorkerContext,
        reader: &mut ShardReader,
        pipeline: &mut ShardPipeline,
    ) {
        let next = self.release.borrow_and_update().clone();
        if Arc::ptr_eq(&next, &self.running) {
            return;
        }
        self.running = next.clone();
        pipeline.swap(
            &next.release.component,
            next.spec.clone(),
            next.release.env.clone(),
        );
        tracing::info!(stream = %ctx.stream, shard = %pipeline.shard_id(), subscriber = %ctx.subscriber,
            tenant = %ctx.tenant.name(), version = %next.release.component.app().version,
            hash = %short(next.release.component.content_hash()), "shard changed over to a new version");
        if std::mem::replace(&mut self.rewind, next.rewind) == next.rewind
            || pipeline.held_at().is_none()
        {
            return;
        }
        let checkpoint = pipeline.checkpoint().map(str::to_owned);
        let from = match &checkpoint {
            Some(sequence) => StartAt::AfterSequence(sequence.clone()),
            None => self.opened_at.clone(),
        };
        let reopened = open_reader(ctx, &next, pipeline.shard_id(), from).await;
        match reopened {
            Ok(reopened) => {
                ctx.status
                    .follow_reads(pipeline.shard_id(), reopened.progress());
                *reader = reopened;
                pipeline.reset(checkpoint);
            }
            Err(error) => tracing::warn!(stream = %ctx.stream, shard = %pipeline.shard_id(),
                error = %one_line(&error),
                "cannot read the held records again for the version rolled back to; they wait for the next lease"),
        }
    }
}

/// The first characters of a content hash, enough to tell versions apart in a log line.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The read loop. Returns how it ended; the caller flushes and lets the lease go.
async fn read(
    ctx: &WorkerContext,
    keeper: &Keeper,
    reader: &mut ShardReader,
    pipeline: &mut ShardPipeline,
    version: &mut Version,
    mut seeks: mpsc::UnboundedReceiver<ShardSeek>,
    mark: &mut Option<u64>,
) -> WorkerExit {
    let mut stop = keeper.stop();
    let mut shutdown = ctx.shutdown.clone();
    let mut quarantine = ctx.tenant.watch_stopped();
    let shard_id = pipeline.shard_id().to_owned();
    let mut shadow = ctx.shadow.clone();
    let mut feed = ShadowFeed::default();
    loop {
        version.change_over(ctx, reader, pipeline).await;
        feed.follow(
            shadow.borrow_and_update().as_ref(),
            pipeline,
            &ctx.subscriber,
        );
        match stop.borrow_and_update().clone() {
            Some(Stop::Lost) => return WorkerExit::Lost,
            Some(Stop::HandOff(to)) => return WorkerExit::HandedOver(to),
            Some(Stop::Shutdown | Stop::Withdrawn) => return WorkerExit::Stopped,
            None => {}
        }
        if *shutdown.borrow() {
            return WorkerExit::Stopped;
        }
        if reader.is_finished() && pipeline.is_settled() {
            return WorkerExit::Finished;
        }
        let due = pipeline
            .next_due_ms()
            .map(|ms| instant_at(ctx.clock.as_ref(), ms));
        // A quarantined tenant reads nothing more; what it read waits, parked.
        let paused = *quarantine.borrow_and_update();
        ctx.status.update(&shard_id, |s| s.paused = paused);
        tokio::select! {
            biased;
            _ = stop.changed() => {}
            _ = shutdown.changed() => {}
            _ = quarantine.changed() => {}
            _ = version.release.changed() => {}
            _ = shadow.changed() => {}
            // Copies that cannot go out stop the reading: their originals wait in the stream.
            batch = reader.next(), if !reader.is_finished() && !paused && !pipeline.is_backlogged() => match batch {
                Ok(batch) => {
                    if batch.shard_end {
                        pipeline.reached_shard_end();
                    }
                    if let Err(exit) = pin_first_record(ctx, keeper, version, &batch.records).await {
                        return exit;
                    }
                    let count = batch.records.len() as u64;
                    let last_arrival = batch.records.last().map(|r| r.arrival_ms);
                    let age = last_arrival.map(|at| ctx.clock.now_ms().saturating_sub(at));
                    let moved = pipeline.deliver(batch.records).await;
                    feed.offer(pipeline);
                    let behind = reader.millis_behind_latest();
                    ctx.status.update(&shard_id, |s| {
                        s.delivered += count;
                        s.millis_behind_latest = behind;
                        s.iterator_age_ms = age.or(s.iterator_age_ms);
                    });
                    persist(ctx, keeper, &shard_id, moved);
                }
                Err(error) => return exit_for(ctx, error),
            },
            () = sleep_until(due), if due.is_some() => {
                let moved = pipeline.poll_due().await;
                feed.offer(pipeline);
                persist(ctx, keeper, &shard_id, moved);
            }
            Some(seek) = seeks.recv() => {
                if let Some(id) = seek.mark && mark.is_some_and(|mark| mark >= id) {
                    // Moved by this fleet seek already, before it was taken here.
                    let _ = seek.reply.send(Ok(false));
                    continue;
                }
                // An operator's seek on one host writes nothing at seek time, a pin neither.
                version.unpinned = false;
                let moved = reposition(ctx, reader, pipeline, &seek.position).await;
                if let (Ok(()), Some(id)) = (&moved, seek.mark) {
                    // A fleet seek stores where it moved the shard, with its mark, before
                    // anything is read there: a handoff or a crash from now on cannot
                    // undo it, and no other host moves the shard for it again.
                    let start = start_at(None, Some(&seek.position), &shard_id);
                    version.unpinned = start == StartAt::Latest;
                    let moved_to = seek_checkpoint(&start, ctx.clock.as_ref());
                    if let Err(exit) = store_seek(ctx, keeper, moved_to, id).await {
                        let _ = seek.reply.send(Ok(true));
                        return exit;
                    }
                    *mark = Some(id);
                }
                let _ = seek.reply.send(moved.map(|()| true));
            }
        }
        ctx.status
            .set_holds(&shard_id, pipeline, ctx.clock.now_ms());
    }
}

/// Stores `AT_SEQUENCE:<first record>` before the first records of a shard opened at the tip
/// are delivered, so a restart reads from that record on: a position the stream gave, where
/// the provisional pin from this host's clock would skip the record when the clock runs ahead
/// of Kinesis. A failed write is tried again (nothing is delivered meanwhile) until it is
/// stored, the lease is lost or the host stops.
///
/// # Errors
/// How the worker ends when the pin cannot be stored.
async fn pin_first_record(
    ctx: &WorkerContext,
    keeper: &Keeper,
    version: &mut Version,
    records: &[Delivery],
) -> Result<(), WorkerExit> {
    let Some(first) = records.first().filter(|_| version.unpinned) else {
        return Ok(());
    };
    let sequence = first.sequence_number.to_string();
    let pin = format!("{AT_SEQUENCE_PREFIX}{sequence}");
    write_until_stored(ctx, "pinning the shard's first record", || {
        keeper.write_now(pin.clone())
    })
    .await?;
    version.unpinned = false;
    // A rollback that reads held records again starts from the pinned record, not the tip.
    version.opened_at = StartAt::AtSequence(sequence);
    Ok(())
}

/// Stores where fleet seek `mark` moved the shard, with the mark, before anything is read
/// there; retried like [`pin_first_record`].
///
/// # Errors
/// How the worker ends when it cannot be stored.
async fn store_seek(
    ctx: &WorkerContext,
    keeper: &Keeper,
    moved_to: Checkpoint,
    mark: u64,
) -> Result<(), WorkerExit> {
    let moved_to = moved_to.to_string();
    write_until_stored(
        ctx,
        "storing where the fleet's seek moved the shard",
        || keeper.write_seek_now(moved_to.clone(), mark),
    )
    .await
}

/// Runs `write` until it stores, pausing 100 ms doubling to 2 s between tries.
///
/// # Errors
/// [`WorkerExit::Lost`] once the lease is lost, [`WorkerExit::Stopped`] once the host stops.
async fn write_until_stored<F, W>(
    ctx: &WorkerContext,
    what: &str,
    write: W,
) -> Result<(), WorkerExit>
where
    W: Fn() -> F,
    F: Future<Output = Result<(), WriteError>>,
{
    let mut pause = Duration::from_millis(100);
    loop {
        match write().await {
            Ok(()) => return Ok(()),
            Err(WriteError::Store(error)) => {
                tracing::warn!(stream = %ctx.stream, error = %one_line(&error),
                    "{what} failed; retrying before reading on");
            }
            Err(WriteError::Lost | WriteError::KeeperStopped) => return Err(WorkerExit::Lost),
        }
        if *ctx.shutdown.borrow() {
            return Err(WorkerExit::Stopped);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Hands a checkpoint the pipeline moved to the keeper, which writes it.
fn persist(ctx: &WorkerContext, keeper: &Keeper, shard_id: &str, moved: Option<String>) {
    if let Some(position) = moved {
        ctx.status
            .update(shard_id, |s| s.checkpoint = Some(position.clone()));
        keeper.checkpoint(position);
    }
}

/// Reopens the shard at `position` and starts its bookkeeping afresh: records delivered
/// before no longer move the checkpoint. On failure the shard reads on where it was.
async fn reposition(
    ctx: &WorkerContext,
    reader: &mut ShardReader,
    pipeline: &mut ShardPipeline,
    position: &StartPosition,
) -> Result<(), ReadError> {
    let shard_id = pipeline.shard_id().to_owned();
    let start = start_at(None, Some(position), &shard_id);
    let release = ctx.release.borrow().clone();
    let reopened = open_reader(ctx, &release, &shard_id, start).await?;
    ctx.status.follow_reads(&shard_id, reopened.progress());
    *reader = reopened;
    pipeline.reset(None);
    Ok(())
}

async fn give_up(
    ctx: &WorkerContext,
    keeper: Keeper,
    error: ReadError,
    grace: Duration,
) -> WorkerExit {
    keeper.finish(grace).await;
    exit_for(ctx, error)
}

/// How a worker whose reads failed with `error` ends.
fn exit_for(ctx: &WorkerContext, error: ReadError) -> WorkerExit {
    match error {
        ReadError::StreamGone { .. } => WorkerExit::StreamGone,
        gone @ ReadError::ConsumerGone { .. } => {
            ctx.consumers.forget(&ctx.stream, &ctx.consumer);
            tracing::warn!(stream = %ctx.stream, consumer = %ctx.consumer,
                "{}; registering it again", one_line(&gone));
            WorkerExit::Failed(one_line(&gone))
        }
        denied @ ReadError::AccessDenied { .. } => WorkerExit::Denied(format!(
            "tenant `{}` may not read `{}`: {}",
            ctx.tenant.name(),
            ctx.stream,
            one_line(&denied)
        )),
        error => WorkerExit::Failed(one_line(&error)),
    }
}

/// Stored checkpoint first, then the subscription's start position, then the tip.
fn start_at(stored: Option<&Checkpoint>, start: Option<&StartPosition>, shard_id: &str) -> StartAt {
    match stored {
        Some(Checkpoint::Sequence(sequence)) => return StartAt::AfterSequence(sequence.clone()),
        Some(Checkpoint::TrimHorizon) => return StartAt::Horizon,
        Some(Checkpoint::AtTimestamp(ms)) => return StartAt::AtTimestamp(*ms),
        Some(Checkpoint::AtSequence(sequence)) => return StartAt::AtSequence(sequence.clone()),
        Some(Checkpoint::ShardEnd) | None => {}
    }
    match start {
        Some(StartPosition::AtTimestamp(ms)) => StartAt::AtTimestamp(*ms),
        Some(StartPosition::Horizon) => StartAt::Horizon,
        Some(StartPosition::AtSequence {
            shard_id: shard,
            sequence_number,
        }) if shard == shard_id => StartAt::AtSequence(sequence_number.clone()),
        _ => StartAt::Latest,
    }
}

/// The position to pin in the lease row, before the first read, of a shard opened at `start`
/// with nothing handled: the time asked for; for the tip, provisionally, the host's time a
/// little before now, which covers a crash or handoff before any record is read (the first
/// record read replaces it, [`pin_first_record`]). The others do not move with time.
fn pinned(start: &StartAt, clock: &dyn Clock) -> Option<Checkpoint> {
    match start {
        StartAt::Latest => Some(Checkpoint::AtTimestamp(clock.now_ms().saturating_sub(1000))),
        StartAt::AtTimestamp(ms) => Some(Checkpoint::AtTimestamp(*ms)),
        _ => None,
    }
}

/// The checkpoint that says a seek moved the shard to `start` with nothing handled since:
/// the position itself, or for the tip the provisional pin of [`pinned`].
fn seek_checkpoint(start: &StartAt, clock: &dyn Clock) -> Checkpoint {
    match start {
        StartAt::Horizon => Checkpoint::TrimHorizon,
        StartAt::AtSequence(sequence) => Checkpoint::AtSequence(sequence.clone()),
        StartAt::AfterSequence(sequence) => Checkpoint::Sequence(sequence.clone()),
        StartAt::AtTimestamp(ms) => Checkpoint::AtTimestamp(*ms),
        StartAt::Latest => Checkpoint::AtTimestamp(clock.now_ms().saturating_sub(1000)),
    }
}

/// The monotonic instant at which the pipeline clock reads `at_ms`.
fn instant_at(clock: &dyn Clock, at_ms: u64) -> Instant {
    let now = clock.now_ms();
    Instant::now() + Duration::from_millis(at_ms.saturating_sub(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_seek_moves_a_shard_its_row_does_not_say_it_moved() {
        let seek = FleetSeekMark {
            id: 20,
            position: StartPosition::Horizon,
        };
        assert!(seek.moves("s-0", None), "a row no seek moved");
        assert!(seek.moves("s-0", Some(19)), "moved by an earlier seek");
        assert!(!seek.moves("s-0", Some(20)), "moved by this seek");
        assert!(!seek.moves("s-0", Some(21)), "moved by a later seek");
        let one = FleetSeekMark {
            id: 20,
            position: StartPosition::AtSequence {
                shard_id: "s-1".into(),
                sequence_number: "7".into(),
            },
        };
        assert!(one.moves("s-1", None));
        assert!(!one.moves("s-0", None), "a sequence names one shard");
    }

    #[test]
    fn a_seek_stores_the_position_it_moved_to() {
        let clock = ruststream_runtime::SystemClock;
        let stored = |start: StartAt| seek_checkpoint(&start, &clock).to_string();
        assert_eq!(stored(StartAt::Horizon), "TRIM_HORIZON");
        assert_eq!(stored(StartAt::AtTimestamp(5)), "AT_TIMESTAMP:5");
        assert_eq!(stored(StartAt::AtSequence("7".into())), "AT_SEQUENCE:7");
        let tip = seek_checkpoint(&StartAt::Latest, &clock);
        assert!(
            matches!(tip, Checkpoint::AtTimestamp(ms) if ms + 1000 <= clock.now_ms()),
            "the tip is pinned provisionally, a little before now: {tip}"
        );
    }

    #[test]
    fn a_checkpoint_wins_over_any_start_position() {
        let stored = Checkpoint::Sequence("42".into());
        assert_eq!(
            start_at(Some(&stored), Some(&StartPosition::Horizon), "s-0"),
            StartAt::AfterSequence("42".into())
        );
        assert_eq!(
            start_at(None, Some(&StartPosition::Horizon), "s-0"),
            StartAt::Horizon
        );
        assert_eq!(start_at(None, None, "s-0"), StartAt::Latest);
    }

    #[test]
    fn positions_stored_before_any_record_is_handled_are_honoured() {
        assert_eq!(
            start_at(Some(&Checkpoint::TrimHorizon), None, "s-2"),
            StartAt::Horizon
        );
        assert_eq!(
            start_at(
                Some(&Checkpoint::AtTimestamp(7)),
                Some(&StartPosition::Horizon),
                "s-2"
            ),
            StartAt::AtTimestamp(7)
        );
        assert_eq!(
            start_at(Some(&Checkpoint::AtSequence("49".into())), None, "s-2"),
            StartAt::AtSequence("49".into()),
            "a pinned first record is read again"
        );
        let clock = ruststream_runtime::testing::ManualClock::new(10_000);
        assert_eq!(
            pinned(&StartAt::Latest, &clock),
            Some(Checkpoint::AtTimestamp(9_000)),
            "provisional, until the first record is read"
        );
        assert_eq!(
            pinned(&StartAt::AtTimestamp(5), &clock),
            Some(Checkpoint::AtTimestamp(5))
        );
        assert_eq!(pinned(&StartAt::Horizon, &clock), None);
    }

    #[test]
    fn a_sequence_position_applies_to_its_shard_only() {
        let at = StartPosition::AtSequence {
            shard_id: "s-1".into(),
            sequence_number: "9".into(),
        };
        assert_eq!(
            start_at(None, Some(&at), "s-1"),
            StartAt::AtSequence("9".into())
        );
        assert_eq!(start_at(None, Some(&at), "s-0"), StartAt::Latest);
    }
}
