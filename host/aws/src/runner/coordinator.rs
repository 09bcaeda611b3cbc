//! The coordinator of one subscription: lists shards, takes leases toward a fair share, and
//! runs one worker per leased shard.
//!
//! Expiry is observed, not read from wall clocks: a lease held elsewhere is expired when its
//! fencing counter has not moved for the lease duration on this host's monotonic clock. Hosts
//! converge to a fair share: a host below `ceil(shards / live hosts)` takes free or expired
//! leases first, then one lease per round from the most loaded host.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tracing::Instrument as _;

use ruststream_runtime::{StartPosition, one_line};

use super::keeper::KeeperTiming;
use super::seek::{SeekError, SeekRequest, ShardSeek};
use super::worker::{self, Assignment, WorkerContext, WorkerExit};
use crate::kinesis::{ReadError, ShardInfo};
use crate::lease::{Claim, LeaseError, LeaseKey, LeaseRecord, SHARD_END};

/// Runs a subscription until shutdown; then waits for its workers to flush and release.
pub(crate) async fn run(
    ctx: WorkerContext,
    shared_stream: bool,
    mut seeks: mpsc::Receiver<SeekRequest>,
) {
    let mut coordinator = Coordinator {
        owner: ctx.config.owner_id.clone(),
        shared_stream,
        observed: HashMap::new(),
        workers: JoinSet::new(),
        tasks: HashMap::new(),
        owned: BTreeMap::new(),
        shards: BTreeMap::new(),
        ctx,
    };
    let mut shutdown = coordinator.ctx.shutdown.clone();
    loop {
        if *shutdown.borrow() {
            break;
        }
        if let Err(gone) = coordinator.sync().await {
            coordinator.ctx.status.set_error(one_line(&gone));
            tracing::error!(stream = %coordinator.ctx.stream,
                "subscription `{}` stops: {gone}", coordinator.ctx.subscriber);
            break;
        }
        let next_sync = tokio::time::sleep(coordinator.ctx.config.shard_sync_interval);
        tokio::select! {
            _ = next_sync => {}
            _ = shutdown.changed() => {}
            Some(joined) = coordinator.workers.join_next_with_id() => coordinator.worker_ended(joined),
            Some(request) = seeks.recv() => coordinator.seek(request).await,
        }
    }
    coordinator.drain().await;
}

/// The lease key of a shard: `stream:shard`, with `@subscriber` when several subscriptions of
/// the app read the stream.
fn lease_key(stream: &str, shard_id: &str, subscriber: &str, shared_stream: bool) -> LeaseKey {
    if shared_stream {
        LeaseKey::for_subscriber(stream, shard_id, subscriber)
    } else {
        LeaseKey::new(stream, shard_id)
    }
}

struct Coordinator {
    ctx: WorkerContext,
    owner: String,
    shared_stream: bool,
    /// Per lease key: the counter last seen and since when it has not moved.
    observed: HashMap<String, (u64, Instant)>,
    workers: JoinSet<(String, WorkerExit)>,
    /// The shard each worker task reads, to know which one a panicked task held.
    tasks: HashMap<tokio::task::Id, String>,
    /// Shards this host holds, with the channel to their worker.
    owned: BTreeMap<String, mpsc::UnboundedSender<ShardSeek>>,
    /// The shards as last listed.
    shards: BTreeMap<String, ShardInfo>,
}

impl Coordinator {
    fn key(&self, shard_id: &str) -> LeaseKey {
        lease_key(
            &self.ctx.stream,
            shard_id,
            &self.ctx.subscriber,
            self.shared_stream,
        )
    }

    /// One round: list shards and leases, take what this host should hold.
    /// `Err` only when the stream is gone.
    async fn sync(&mut self) -> Result<(), ReadError> {
        // A listing waits at most its timeout, and never holds up a shutdown.
        let mut shutdown = self.ctx.shutdown.clone();
        let listed = tokio::select! {
            listed = self.ctx.listings.list(&self.ctx.stream) => listed,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        };
        let shards = match listed {
            Ok(shards) => shards,
            Err(gone @ ReadError::StreamGone { .. }) => return Err(gone),
            Err(error) => {
                tracing::warn!(stream = %self.ctx.stream, error = %one_line(&error), "listing shards failed; retrying next round");
                return Ok(());
            }
        };
        let listed = timeout(self.call_timeout(), self.ctx.store.list()).await;
        let rows = match listed.unwrap_or_else(|_| Err(LeaseError::Timeout(self.call_timeout()))) {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(store = %self.ctx.store.describe(), error = %one_line(&error), "listing leases failed; retrying next round");
                return Ok(());
            }
        };
        let rows: HashMap<String, LeaseRecord> =
            rows.into_iter().map(|row| (row.key.clone(), row)).collect();
        self.observe(&rows);
        self.shards = shards
            .iter()
            .map(|shard| (shard.shard_id.clone(), shard.clone()))
            .collect();
        let eligible = self.eligible(&shards, &rows);
        self.take_share(&eligible, &rows).await;
        Ok(())
    }

    fn observe(&mut self, rows: &HashMap<String, LeaseRecord>) {
        let now = Instant::now();
        for (key, row) in rows {
            let entry = self
                .observed
                .entry(key.clone())
                .or_insert((row.counter, now));
            if entry.0 != row.counter {
                *entry = (row.counter, now);
            }
        }
    }

    fn expired(&self, row: &LeaseRecord) -> bool {
        self.observed.get(&row.key).is_some_and(|(counter, since)| {
            *counter == row.counter && since.elapsed() >= self.ctx.config.lease_ttl
        })
    }

    /// Shards that are not finished and whose parents are finished (or gone from the stream).
    fn eligible(&self, shards: &[ShardInfo], rows: &HashMap<String, LeaseRecord>) -> Vec<String> {
        let listed: BTreeSet<&str> = shards.iter().map(|s| s.shard_id.as_str()).collect();
        let finished = |shard_id: &str| {
            rows.get(&self.key(shard_id).to_string())
                .is_some_and(|row| row.checkpoint.as_deref() == Some(SHARD_END))
        };
        shards
            .iter()
            .filter(|shard| !finished(&shard.shard_id))
            .filter(|shard| {
                shard
                    .parents
                    .iter()
                    .all(|parent| !listed.contains(parent.as_str()) || finished(parent))
            })
            .map(|shard| shard.shard_id.clone())
            .collect()
    }

    async fn take_share(&mut self, eligible: &[String], rows: &HashMap<String, LeaseRecord>) {
        let holders = self.live_holders(eligible, rows);
        let target = eligible.len().div_ceil(holders.len().max(1));
        for shard_id in eligible {
            if self.owned.len() >= target {
                return;
            }
            if self.owned.contains_key(shard_id) {
                continue;
            }
            let key = self.key(shard_id);
            let claim = match rows.get(&key.to_string()) {
                None => Claim::Free,
                Some(row) if row.owner.is_none() || row.owner.as_deref() == Some(&self.owner) => {
                    Claim::Free
                }
                Some(row) if self.expired(row) => Claim::Observed(row.counter),
                Some(_) => continue,
            };
            self.acquire(key, claim).await;
        }
        if self.owned.len() < target {
            self.steal_one(rows, &holders, target).await;
        }
    }

    /// Live holders of eligible shards by owner, this host included.
    fn live_holders(
        &self,
        eligible: &[String],
        rows: &HashMap<String, LeaseRecord>,
    ) -> BTreeMap<String, Vec<String>> {
        let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
        holders.entry(self.owner.clone()).or_default();
        for shard_id in eligible {
            let Some(row) = rows.get(&self.key(shard_id).to_string()) else {
                continue;
            };
            if let Some(owner) = &row.owner
                && !self.expired(row)
            {
                holders
                    .entry(owner.clone())
                    .or_default()
                    .push(shard_id.clone());
            }
        }
        holders
    }

    /// Takes one lease from the most loaded other host, if it holds more than its share.
    async fn steal_one(
        &mut self,
        rows: &HashMap<String, LeaseRecord>,
        holders: &BTreeMap<String, Vec<String>>,
        target: usize,
    ) {
        let victim = holders
            .iter()
            .filter(|(owner, _)| **owner != self.owner)
            .max_by_key(|(_, shards)| shards.len());
        let Some((victim, shards)) = victim.filter(|(_, shards)| shards.len() > target) else {
            return;
        };
        let Some(shard_id) = shards.last() else {
            return;
        };
        let key = self.key(shard_id);
        if rows
            .get(&key.to_string())
            .is_some_and(|row| row.wanted_by.as_deref() == Some(&self.owner))
        {
            return; // asked already; the holder hands it over at its next renewal
        }
        // Balancing never takes a live lease: the holder is asked, stops at its next call
        // boundary, flushes its checkpoint and hands the lease over, so no record is handled
        // by both. Only an expired lease is taken without a handoff.
        let store = self.ctx.store.clone();
        let asked = timeout(
            self.call_timeout(),
            store.request_handoff(&key, victim, &self.owner),
        )
        .await;
        match asked {
            Ok(Ok(true)) => {
                tracing::info!(lease = %key, from = %victim, "asked for a lease to balance shards between hosts")
            }
            Ok(Ok(false)) => tracing::debug!(lease = %key, "the lease changed hands meanwhile"),
            Ok(Err(error)) => {
                tracing::warn!(lease = %key, error = %one_line(&error), "asking for a lease failed")
            }
            Err(_) => tracing::warn!(lease = %key, "asking for a lease timed out"),
        }
    }

    fn call_timeout(&self) -> Duration {
        let config = &self.ctx.config;
        KeeperTiming::new(
            config.lease_ttl,
            config.renew_interval,
            config.checkpoint_interval,
        )
        .call_timeout
    }

    async fn acquire(&mut self, key: LeaseKey, claim: Claim) {
        let store = self.ctx.store.clone();
        let ttl = self.ctx.config.lease_ttl;
        let acquired = timeout(
            self.call_timeout(),
            store.acquire(&key, &self.owner, ttl, claim),
        )
        .await
        .unwrap_or_else(|_| Err(LeaseError::Timeout(self.call_timeout())));
        match acquired {
            Ok(Some(lease)) => {
                tracing::info!(lease = %key, owner = %self.owner, checkpoint = ?lease.checkpoint, "lease taken");
                let Some(shard) = self.shards.get(key.shard_id()).cloned() else {
                    return;
                };
                let (stream, subscriber) = (self.ctx.stream.clone(), self.ctx.subscriber.clone());
                let shared = self.shared_stream;
                let assignment = Assignment {
                    lease,
                    shard,
                    key_of: Arc::new(move |shard_id| {
                        lease_key(&stream, shard_id, &subscriber, shared)
                    }),
                };
                let (seeks, seeks_rx) = mpsc::unbounded_channel();
                self.owned.insert(key.shard_id().to_owned(), seeks);
                let span = tracing::info_span!("shard", shard = %key.shard_id());
                let task = self
                    .workers
                    .spawn(worker::run(self.ctx.clone(), assignment, seeks_rx).instrument(span));
                self.tasks.insert(task.id(), key.shard_id().to_owned());
            }
            Ok(None) => tracing::debug!(lease = %key, "lease was taken by another host first"),
            Err(error) => {
                tracing::warn!(lease = %key, error = %one_line(&error), "taking a lease failed")
            }
        }
    }

    fn worker_ended(
        &mut self,
        joined: Result<(tokio::task::Id, (String, WorkerExit)), tokio::task::JoinError>,
    ) {
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(error) => error.id(),
        };
        let shard_id = self.tasks.remove(&id);
        match joined {
            Ok((_, (shard_id, exit))) => {
                tracing::info!(stream = %self.ctx.stream, shard = %shard_id, ?exit, "shard worker ended");
            }
            Err(error) => {
                tracing::error!(stream = %self.ctx.stream, shard = ?shard_id, error = %one_line(&error), "a shard worker failed");
            }
        }
        // Its lease was released or is lost; a later round may take the shard again.
        if let Some(shard_id) = shard_id {
            self.owned.remove(&shard_id);
        }
    }

    /// Moves the shards a seek names: one shard for a sequence, else every shard held here,
    /// and the start of shards taken later without a checkpoint.
    async fn seek(&mut self, request: SeekRequest) {
        let subscriber = self.ctx.subscriber.clone();
        let targets: Vec<String> = match &request.position {
            StartPosition::AtSequence { shard_id, .. } => {
                if !self.owned.contains_key(shard_id) {
                    let _ = request.reply.send(Err(SeekError::NotOwned {
                        subscriber,
                        shard_id: shard_id.clone(),
                    }));
                    return;
                }
                vec![shard_id.clone()]
            }
            stream_wide => {
                self.ctx.seek_start = Some(stream_wide.clone());
                self.owned.keys().cloned().collect()
            }
        };
        let mut replies = Vec::new();
        for shard_id in &targets {
            let (reply, answer) = oneshot::channel();
            let sent = self.owned.get(shard_id).is_some_and(|worker| {
                worker
                    .send(ShardSeek {
                        position: request.position.clone(),
                        reply,
                    })
                    .is_ok()
            });
            if sent {
                replies.push((shard_id.clone(), answer));
            }
        }
        let mut moved = Vec::new();
        for (shard_id, answer) in replies {
            match answer.await {
                Ok(Ok(())) => moved.push(shard_id),
                Ok(Err(source)) => {
                    let _ = request.reply.send(Err(SeekError::Reopen {
                        subscriber,
                        shard_id,
                        source,
                    }));
                    return;
                }
                // The worker ended meanwhile (lease lost, shutdown): nothing of it to move.
                Err(_) => {}
            }
        }
        tracing::info!(subscriber = %subscriber, position = ?request.position, shards = ?moved, "seek done");
        let _ = request.reply.send(Ok(moved));
    }

    /// Waits for every worker to flush and release (they watch the same shutdown signal),
    /// aborting those that outlast the grace period.
    async fn drain(&mut self) {
        let grace = self.ctx.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, async {
            while let Some(joined) = self.workers.join_next().await {
                if let Ok((shard, exit)) = joined {
                    tracing::debug!(shard = %shard, ?exit, "shard worker stopped");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(stream = %self.ctx.stream, ?grace,
                "shard workers outlasted the shutdown grace period; aborting them");
            self.workers.abort_all();
        }
    }
}
