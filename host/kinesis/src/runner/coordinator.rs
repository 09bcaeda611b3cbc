//! The coordinator of one subscription: lists shards, takes leases toward a fair share, and
//! runs one worker per leased shard.
//!
//! Expiry is observed, not read from wall clocks: a lease (or presence row) held elsewhere is
//! expired when its fencing counter has not moved for the lease duration on this host's
//! monotonic clock. The live hosts are this host, the owners of live leases, and the hosts
//! whose presence rows are live (see [`presence`](super::presence)), so a host holding nothing
//! counts too. Each round, a host takes the leases handed to it, then free or expired leases up
//! to `ceil(shards / live hosts)`, then asks for one lease as [`balance`](super::balance)
//! decides and watches for the handoff ([`handoff`](super::handoff)), taking the lease the
//! moment it comes. A free lease nobody takes for a whole lease duration, or an expired one
//! (its holder died) nobody takes within a round, is taken whatever the share, so a live host
//! that takes nothing leaves no shard unread, and a dead one's shards are read again at once
//! even while its presence row still counts it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tracing::Instrument as _;

use ruststream_common::escape::one_line;
use ruststream_runtime::app::StartPosition;
use ruststream_runtime::{Clock as _, SystemClock};

use super::HostConfig;
use super::balance::{self, Holding};
use super::handoff::{self, Watched};
use super::observed::Observed;
use super::presence::{self, Presence};
use super::seek::{FleetSeekMark, SeekError, SeekRequest, ShardSeek};
use super::status::StatusBoard;
use super::worker::{self, Assignment, WorkerContext, WorkerExit};
use crate::kinesis::{READS_WINDOW, ReadError, ShardInfo};
use crate::lease::{
    Claim, HeldLease, HostRecord, LeaseError, LeaseKey, LeaseRecord, LeaseStore, LeaseTable,
    PresenceKey, SHARD_END,
};
use setbacks::Setbacks;

/// What a coordinator's rounds need of their subscription: its names, its leases, the host's
/// timings, where to report, and when to stop.
pub(crate) struct Rounds {
    /// The tenant running the subscription, named in what it says of a denied identity.
    pub tenant: String,
    pub subscriber: String,
    pub stream: String,
    pub store: Arc<dyn LeaseStore>,
    pub config: Arc<HostConfig>,
    pub status: StatusBoard,
    /// The subscription's stop: the host's shutdown, or its stream gone.
    pub shutdown: watch::Receiver<bool>,
    /// Sets `shutdown` when the subscription ends by itself (its stream gone), so that its
    /// workers flush and release as at the host's shutdown rather than read on: a fan-out
    /// subscription may go on being pushed heartbeats after the stream is deleted.
    pub stop: Arc<watch::Sender<bool>>,
}

/// What a [`Shards`] call returns: boxed, so that the rounds hold their shards as a trait
/// object.
pub(crate) type ShardsFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The two things a coordinator does that are not about leases: listing the stream's shards
/// and running a worker on each shard it takes. The host's are Kinesis and
/// [`worker::run`]; the paused-time tests of the rounds bring their own (fixed shards, workers
/// that only keep their lease), so no server is needed to test the lease core.
pub(crate) trait Shards: Send + Sync + 'static {
    /// The stream's shards now. [`ReadError::StreamGone`] ends the subscription; any other
    /// error is retried next round.
    fn list(&self) -> ShardsFuture<'_, Result<Arc<Vec<ShardInfo>>, ReadError>>;

    /// A worker on a shard whose lease was just taken. It ends when the shard ends, the lease
    /// is lost or handed over, or the subscription shuts down, having released or handed over
    /// the lease unless it was lost.
    fn work(
        &self,
        assignment: Assignment,
        seeks: mpsc::UnboundedReceiver<ShardSeek>,
    ) -> ShardsFuture<'static, (String, WorkerExit)>;

    /// Where shards taken from now on without a checkpoint start (a stream-wide seek).
    fn seek_start(&mut self, start: StartPosition);

    /// Which shards of the stream this host and the fleet's other hosts read, for any
    /// subscription (shard affinity).
    fn affinity(&self) -> Affinity;
}

/// Shard affinity: the leases of one shard, for every subscription of every tenant, gather on
/// one host where they can, so that one read serves them all and the other hosts need not
/// poll it. A coordinator takes, and asks for, the shards its host reads first, and leaves a
/// free lease of a shard only another host reads to that host for one round.
#[derive(Debug, Default)]
pub(crate) struct Affinity {
    /// Shards this host read lately (any subscription, polling).
    pub here: BTreeSet<String>,
    /// Shards other hosts read, as the fleet's reads table said last.
    pub elsewhere: BTreeSet<String>,
}

/// The host's shards: Kinesis listings, and workers that read and run the component.
struct KinesisShards(WorkerContext);

impl Shards for KinesisShards {
    fn list(&self) -> ShardsFuture<'_, Result<Arc<Vec<ShardInfo>>, ReadError>> {
        Box::pin(self.0.listings.list(&self.0.stream))
    }

    fn work(
        &self,
        assignment: Assignment,
        seeks: mpsc::UnboundedReceiver<ShardSeek>,
    ) -> ShardsFuture<'static, (String, WorkerExit)> {
        Box::pin(worker::run(self.0.clone(), assignment, seeks))
    }

    fn seek_start(&mut self, start: StartPosition) {
        self.0.seek_start = Some(start);
    }

    fn affinity(&self) -> Affinity {
        let pacing = self.0.reads.pacing();
        let read = pacing.read_within(READS_WINDOW);
        Affinity {
            here: read
                .into_iter()
                .filter(|(stream, _)| *stream == self.0.stream)
                .map(|(_, shard)| shard)
                .collect(),
            elsewhere: pacing.elsewhere(&self.0.stream),
        }
    }
}

/// Runs a subscription until shutdown; then waits for its workers to flush and release, and
/// withdraws this host's presence.
pub(crate) async fn run(
    mut ctx: WorkerContext,
    shared_stream: bool,
    seeks: mpsc::Receiver<SeekRequest>,
) {
    let (stop, stopping) = watch::channel(*ctx.shutdown.borrow());
    let stop = Arc::new(stop);
    let mut host_shutdown = std::mem::replace(&mut ctx.shutdown, stopping);
    let follow = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if host_shutdown.wait_for(|stop| *stop).await.is_ok() {
                stop.send_replace(true);
            }
        })
    };
    let rounds = Rounds {
        tenant: ctx.tenant.name().to_owned(),
        subscriber: ctx.subscriber.clone(),
        stream: ctx.stream.clone(),
        store: ctx.store.clone(),
        config: ctx.config.clone(),
        status: ctx.status.clone(),
        shutdown: ctx.shutdown.clone(),
        stop,
    };
    coordinate(rounds, Box::new(KinesisShards(ctx)), shared_stream, seeks).await;
    follow.abort();
}

/// [`run`] with the shards and workers of `source`.
pub(crate) async fn coordinate(
    ctx: Rounds,
    source: Box<dyn Shards>,
    shared_stream: bool,
    mut seeks: mpsc::Receiver<SeekRequest>,
) {
    let owner = ctx.config.owner_id.clone();
    let scope = lease_key(&ctx.stream, "", &ctx.subscriber, shared_stream).scope();
    let timing = ctx.config.keeper_timing();
    let presence = Presence::spawn(ctx.store.clone(), PresenceKey::new(&scope, &owner), timing);
    let mut coordinator = Coordinator {
        source,
        owner,
        scope,
        shared_stream,
        observed: Observed::default(),
        unheld_since: HashMap::new(),
        workers: JoinSet::new(),
        tasks: HashMap::new(),
        owned: BTreeMap::new(),
        asking: HashMap::new(),
        watchers: JoinSet::new(),
        shards: BTreeMap::new(),
        refused: None,
        setbacks: Setbacks::default(),
        fleet_seek: None,
        ctx,
    };
    let mut shutdown = coordinator.ctx.shutdown.clone();
    let mut next_sync = Instant::now();
    loop {
        if *shutdown.borrow() {
            break;
        }
        if Instant::now() >= next_sync {
            if let Err(gone) = coordinator.sync().await {
                coordinator.ctx.status.set_error(one_line(&gone));
                tracing::error!(stream = %coordinator.ctx.stream,
                    "subscription `{}` stops: {gone}", coordinator.ctx.subscriber);
                coordinator.ctx.stop.send_replace(true);
                break;
            }
            next_sync = Instant::now() + coordinator.ctx.config.shard_sync_interval;
        }
        tokio::select! {
            () = tokio::time::sleep_until(next_sync) => {}
            _ = shutdown.changed() => {}
            Some(joined) = coordinator.workers.join_next_with_id() => {
                coordinator.worker_ended(joined);
                // Take another lease (a finished shard's children) at once.
                next_sync = Instant::now();
            }
            Some(request) = seeks.recv() => coordinator.seek(request).await,
            Some(watched) = coordinator.watchers.join_next() => {
                // Handed over: take it now, and go on balancing without waiting a round.
                if coordinator.watched(watched).await {
                    next_sync = Instant::now();
                }
            }
        }
    }
    coordinator.drain().await;
    presence.withdraw().await;
}

/// The lease key of a shard: `stream:shard`, with `@subscriber` when several subscriptions of
/// the app read the stream.
pub(crate) fn lease_key(
    stream: &str,
    shard_id: &str,
    subscriber: &str,
    shared_stream: bool,
) -> LeaseKey {
    if shared_stream {
        LeaseKey::for_subscriber(stream, shard_id, subscriber)
    } else {
        LeaseKey::new(stream, shard_id)
    }
}

struct Coordinator {
    ctx: Rounds,
    /// Where shards are listed and worked on.
    source: Box<dyn Shards>,
    owner: String,
    /// The subscription as presence rows name it.
    scope: String,
    shared_stream: bool,
    /// Per row key (leases and presence rows): the counter last seen and since when it has
    /// not moved.
    observed: Observed,
    /// Eligible shards whose lease is free or expired, and since when (to take one nobody
    /// takes).
    unheld_since: HashMap<String, Instant>,
    workers: JoinSet<(String, WorkerExit)>,
    /// The shard each worker task reads, to know which one a panicked task held.
    tasks: HashMap<tokio::task::Id, String>,
    /// Shards this host holds, with the channel to their worker.
    owned: BTreeMap<String, mpsc::UnboundedSender<ShardSeek>>,
    /// Shards this host asked for (balancing), with when, while it watches for the handoff.
    asking: HashMap<String, Instant>,
    /// The watches of those requests, each ending with its shard.
    watchers: JoinSet<(String, Watched)>,
    /// The shards as last listed.
    shards: BTreeMap<String, ShardInfo>,
    /// Why the lease table is refused (legacy rows), as last reported.
    refused: Option<String>,
    /// Whether the tenant's identity was denied reading the stream or its workers failed, and
    /// for how long leases are held back.
    setbacks: Setbacks,
    /// The latest fleet seek this coordinator was given: shards taken from now on whose lease
    /// row does not say it moved them are moved when taken.
    fleet_seek: Option<FleetSeekMark>,
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
            listed = self.source.list() => listed,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        };
        let shards = match listed {
            Ok(shards) => shards,
            Err(gone @ ReadError::StreamGone { .. }) => return Err(gone),
            Err(denied @ ReadError::AccessDenied { .. }) => {
                let reason = self.denial(&one_line(&denied));
                if self.setbacks.listing_denied(reason.clone()) {
                    self.say_denied(reason);
                }
                return Ok(());
            }
            Err(error) => {
                tracing::warn!(stream = %self.ctx.stream, error = %one_line(&error), "listing shards failed; retrying next round");
                return Ok(());
            }
        };
        let listed = timeout(self.call_timeout(), self.ctx.store.list_all()).await;
        let table = match listed.unwrap_or_else(|_| Err(LeaseError::Timeout(self.call_timeout()))) {
            Ok(table) => {
                self.accept_table();
                table
            }
            Err(refused @ LeaseError::LegacyRows { .. }) => {
                self.refuse_table(&refused);
                return Ok(());
            }
            Err(error) => {
                tracing::warn!(store = %self.ctx.store.describe(), error = %one_line(&error), "listing leases failed; retrying next round");
                return Ok(());
            }
        };
        let LeaseTable { leases, hosts } = table;
        let rows: HashMap<String, LeaseRecord> = leases
            .into_iter()
            .map(|row| (row.key.clone(), row))
            .collect();
        self.observe(&rows, &hosts);
        self.shards = shards
            .iter()
            .map(|shard| (shard.shard_id.clone(), shard.clone()))
            .collect();
        let eligible = self.eligible(&shards, &rows);
        self.note_unheld(&eligible, &rows);
        let present: Vec<&HostRecord> = hosts
            .iter()
            .filter(|host| host.scope == self.scope && !self.expired(&host.key, host.counter))
            .collect();
        let board = &self.ctx.status;
        if let Some(reason) = self.setbacks.listed(|shard_id, since_ms| match shard_id {
            Some(shard_id) => board.shard_answered_since(shard_id, since_ms),
            None => board.answered_since(since_ms),
        }) {
            tracing::info!(stream = %self.ctx.stream, subscriber = %self.ctx.subscriber,
                "the tenant's identity reads the stream again (was: {reason})");
            board.clear_error();
        }
        if !self.setbacks.holding() {
            self.take_share(&eligible, &rows, &present).await;
        }
        self.forget_dead_hosts(&hosts).await;
        Ok(())
    }

    /// The table holds legacy rows: nothing is taken until an operator migrates them. Said
    /// once (and in the status) until it changes.
    fn refuse_table(&mut self, refused: &LeaseError) {
        let reason = one_line(refused);
        if self.refused.as_ref() != Some(&reason) {
            tracing::error!(stream = %self.ctx.stream, subscriber = %self.ctx.subscriber,
                "no lease is taken: {reason}");
            self.ctx.status.set_error(reason.clone());
            self.refused = Some(reason);
        }
    }

    /// What a denial of `what` says: the tenant, the stream, and the call denied.
    fn denial(&self, what: &str) -> String {
        format!(
            "tenant `{}` may not read `{}`: {what}",
            self.ctx.tenant, self.ctx.stream
        )
    }

    /// Says (once per reason) that the tenant's identity may not read the stream.
    fn say_denied(&self, reason: String) {
        tracing::error!(stream = %self.ctx.stream, subscriber = %self.ctx.subscriber,
            "nothing is read: {reason}");
        self.ctx.status.set_error(reason);
    }

    fn accept_table(&mut self) {
        if self.refused.take().is_some() {
            tracing::info!(stream = %self.ctx.stream, subscriber = %self.ctx.subscriber,
                "the lease table is readable again");
            self.ctx.status.clear_error();
        }
    }

    /// Notes every row's counter (leases and presence rows alike), and forgets rows gone.
    fn observe(&mut self, rows: &HashMap<String, LeaseRecord>, hosts: &[HostRecord]) {
        let counters = rows
            .values()
            .map(|row| (&row.key, row.counter))
            .chain(hosts.iter().map(|host| (&host.key, host.counter)));
        self.observed.observe(counters);
    }

    /// Whether the row `key` was seen at `counter` without a change for a lease duration.
    fn expired(&self, key: &str, counter: u64) -> bool {
        self.observed.unchanged_for(key, counter) >= self.ctx.config.lease_ttl
    }

    fn lease_expired(&self, row: &LeaseRecord) -> bool {
        self.expired(&row.key, row.counter)
    }

    /// Notes since when each eligible shard's lease has been free or expired.
    fn note_unheld(&mut self, eligible: &[String], rows: &HashMap<String, LeaseRecord>) {
        let now = Instant::now();
        let unheld: HashSet<&String> = eligible
            .iter()
            .filter(|shard_id| {
                rows.get(&self.key(shard_id).to_string())
                    .is_none_or(|row| row.owner.is_none() || self.lease_expired(row))
            })
            .collect();
        self.unheld_since
            .retain(|shard_id, _| unheld.contains(shard_id));
        for shard_id in unheld {
            self.unheld_since.entry(shard_id.clone()).or_insert(now);
        }
    }

    /// Deletes presence rows (of any scope) that have not moved for a few lease durations:
    /// their hosts died without withdrawing.
    async fn forget_dead_hosts(&self, hosts: &[HostRecord]) {
        let long_dead = self.ctx.config.lease_ttl * presence::FORGET_AFTER_TTLS;
        presence::forget_dead(
            &self.ctx.store,
            hosts,
            &self.owner,
            &self.observed,
            long_dead,
            self.call_timeout(),
        )
        .await;
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

    /// Leases this host holds or asked for.
    fn holding(&self) -> usize {
        self.owned.len() + self.asking.len()
    }

    /// One round's takes: leases naming this host, free and expired ones up to the share of
    /// the live hosts, then one request to the host [`balance::victim`] names.
    async fn take_share(
        &mut self,
        eligible: &[String],
        rows: &HashMap<String, LeaseRecord>,
        present: &[&HostRecord],
    ) {
        let leases: Vec<Holding<'_>> = eligible
            .iter()
            .filter_map(|shard_id| {
                let row = rows.get(&self.key(shard_id).to_string())?;
                Some(Holding {
                    shard_id,
                    owner: row.owner.as_deref()?,
                    live: !self.lease_expired(row),
                })
            })
            .collect();
        let hosts = balance::live_hosts(
            &self.owner,
            present.iter().map(|host| host.owner.as_str()),
            &leases,
        );
        self.ctx.status.set_hosts(hosts.clone());
        let target = balance::target(eligible.len(), hosts.len());
        // Shard affinity: the shards this host reads for other subscriptions come first, so
        // the leases of one shard gather on one host, where one read serves them all and the
        // other hosts need not poll it.
        let affinity = self.source.affinity();
        let mut preferred: Vec<String> = eligible.to_vec();
        preferred.sort_by_key(|shard_id| !affinity.here.contains(shard_id));
        self.take_named(eligible, rows).await;
        self.take_unheld(&preferred, rows, target, &affinity).await;
        // One request at a time, as KCL steals one lease at a time.
        if self.asking.is_empty() && self.holding() < target {
            self.ask_for_one(rows, &hosts, target, &affinity.here).await;
        }
    }

    /// Takes the leases naming this host (handed over, or held before a restart with the same
    /// owner id), whatever the share: nobody else renews them.
    async fn take_named(&mut self, eligible: &[String], rows: &HashMap<String, LeaseRecord>) {
        for shard_id in eligible {
            let key = self.key(shard_id);
            let ours = rows
                .get(&key.to_string())
                .is_some_and(|row| row.owner.as_deref() == Some(&self.owner));
            if ours && !self.owned.contains_key(shard_id) && !self.setbacks.holding_shard(shard_id)
            {
                self.acquire(key, Claim::Free).await;
            }
        }
    }

    /// Takes free and expired leases up to `target`, and beyond it free ones nobody took for
    /// a lease duration and expired ones nobody took within a round. A free lease of a shard
    /// another host reads and this one does not is left to that host for a round
    /// ([`Affinity`]); an expired one (its holder died) is taken at once.
    async fn take_unheld(
        &mut self,
        eligible: &[String],
        rows: &HashMap<String, LeaseRecord>,
        target: usize,
        affinity: &Affinity,
    ) {
        let config = self.ctx.config.clone();
        for shard_id in eligible {
            // Its worker failed lately: taken back once its hold is over.
            if self.setbacks.holding_shard(shard_id) {
                continue;
            }
            let unheld_for = self.unheld_since.get(shard_id).map(Instant::elapsed);
            let free = rows
                .get(&self.key(shard_id).to_string())
                .is_none_or(|row| row.owner.is_none());
            // An expired lease's holder died, and its shard is read by nobody: a round is left
            // for a host under its share to take it, then any host does. The live hosts
            // counted for the share include the dead ones whose presence rows have not expired
            // yet (a host killed right after it started holds no lease to give it away), so
            // waiting a lease duration would leave the shard unread that much longer; the
            // share is mended afterwards by handoffs.
            let patience = if free {
                config.lease_ttl
            } else {
                config.shard_sync_interval
            };
            let neglected = unheld_for.is_some_and(|held| held >= patience);
            if self.holding() >= target && !neglected {
                continue;
            }
            let theirs = affinity.elsewhere.contains(shard_id) && !affinity.here.contains(shard_id);
            let their_round = unheld_for.is_none_or(|held| held < config.shard_sync_interval);
            if free && theirs && their_round {
                continue;
            }
            if self.owned.contains_key(shard_id) || self.asking.contains_key(shard_id) {
                continue;
            }
            let key = self.key(shard_id);
            let claim = match rows.get(&key.to_string()) {
                None => Claim::Free,
                Some(row) if row.owner.is_none() => Claim::Free,
                Some(row) if self.lease_expired(row) => Claim::Observed(row.counter),
                Some(_) => continue,
            };
            if neglected && self.holding() >= target {
                tracing::info!(lease = %key, ?patience, "taking a lease nobody took in time, beyond this host's share");
            }
            self.acquire(key, claim).await;
        }
    }

    /// Asks the host [`balance::victim`] names for one of its leases (one of a shard this
    /// host reads already, if it has one, `here`), and watches for the handoff.
    async fn ask_for_one(
        &mut self,
        rows: &HashMap<String, LeaseRecord>,
        hosts: &BTreeMap<String, Vec<String>>,
        target: usize,
        here: &BTreeSet<String>,
    ) {
        let load: BTreeMap<String, usize> = hosts
            .iter()
            .map(|(host, shards)| (host.clone(), shards.len()))
            .collect();
        let Some(victim) = balance::victim(&self.owner, &load, target, self.holding()) else {
            return;
        };
        // A lease another host asked for already is left to it: requests do not overwrite.
        let askable = |shard_id: &&String| {
            rows.get(&self.key(shard_id).to_string())
                .is_some_and(|row| row.wanted_by.as_deref().is_none_or(|by| by == self.owner))
        };
        let mut candidates = hosts[victim].iter().rev().filter(askable);
        let Some(shard_id) = (candidates.clone().find(|shard_id| here.contains(*shard_id)))
            .or_else(|| candidates.next())
        else {
            return;
        };
        let key = self.key(shard_id);
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
                tracing::info!(lease = %key, from = %victim, target, "asked for a lease to balance shards between hosts");
                self.asking.insert(shard_id.clone(), Instant::now());
                let watch = handoff::watch(
                    store,
                    key,
                    self.owner.clone(),
                    handoff::WATCH_EVERY,
                    self.ctx.config.lease_ttl,
                    self.call_timeout(),
                );
                let shard_id = shard_id.clone();
                self.watchers
                    .spawn(async move { (shard_id, watch.await) }.in_current_span());
            }
            Ok(Ok(false)) => {
                tracing::debug!(lease = %key, "the lease changed hands or another host asked first")
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %key, error = %one_line(&error), "asking for a lease failed")
            }
            Err(_) => tracing::warn!(lease = %key, "asking for a lease timed out"),
        }
    }

    /// A watch ended: takes the lease if it was handed over. Returns whether it was.
    async fn watched(&mut self, joined: Result<(String, Watched), tokio::task::JoinError>) -> bool {
        let Ok((shard_id, watched)) = joined else {
            self.asking.clear();
            return false;
        };
        let asked_at = self.asking.remove(&shard_id);
        let key = self.key(&shard_id);
        match watched {
            Watched::HandedOver => {
                let waited = asked_at.map(|at| at.elapsed());
                tracing::info!(lease = %key, ?waited, "lease handed over to this host");
                if !self.owned.contains_key(&shard_id) {
                    self.acquire(key, Claim::Free).await;
                }
                true
            }
            Watched::Withdrawn => {
                tracing::debug!(lease = %key, "the lease asked for went elsewhere");
                false
            }
            Watched::TimedOut => {
                tracing::info!(lease = %key, "the lease asked for was not handed over within a lease duration; a later round takes it if it comes");
                false
            }
        }
    }

    fn call_timeout(&self) -> Duration {
        self.ctx.config.keeper_timing().call_timeout
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
                // A shard read to its end stays ended: a seek moves the open shards.
                let seek = self.fleet_seek.clone().filter(|seek| {
                    seek.moves(key.shard_id(), lease.seek_mark)
                        && lease.checkpoint.as_deref() != Some(SHARD_END)
                });
                let assignment = Assignment {
                    seek,
                    lease,
                    shard,
                    key_of: Arc::new(move |shard_id| {
                        lease_key(&stream, shard_id, &subscriber, shared)
                    }),
                };
                let (seeks, seeks_rx) = mpsc::unbounded_channel();
                // Taken (a round found it handed over first): no longer asked for.
                self.asking.remove(key.shard_id());
                self.owned.insert(key.shard_id().to_owned(), seeks);
                let span = tracing::info_span!("shard", shard = %key.shard_id());
                let task = self
                    .workers
                    .spawn(self.source.work(assignment, seeks_rx).instrument(span));
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
            Ok((_, (_, WorkerExit::Denied(reason)))) => {
                if self
                    .setbacks
                    .read_denied(reason.clone(), SystemClock.now_ms())
                {
                    self.say_denied(reason);
                }
            }
            Ok((_, (shard_id, exit))) => {
                tracing::info!(stream = %self.ctx.stream, shard = %shard_id, ?exit, "shard worker ended");
                if matches!(exit, WorkerExit::Failed(_)) {
                    self.setbacks.shard_failed(&shard_id, SystemClock.now_ms());
                }
            }
            Err(error) => {
                tracing::error!(stream = %self.ctx.stream, shard = ?shard_id, error = %one_line(&error), "a shard worker failed");
                if let Some(shard_id) = &shard_id {
                    self.setbacks.shard_failed(shard_id, SystemClock.now_ms());
                }
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
        if let Some(id) = request.mark {
            // Later than any given before: seek ids only grow.
            if self.fleet_seek.as_ref().is_none_or(|seen| seen.id < id) {
                self.fleet_seek = Some(FleetSeekMark {
                    id,
                    position: request.position.clone(),
                });
            }
        }
        let targets: Vec<String> = match &request.position {
            StartPosition::AtSequence { shard_id, .. } if request.mark.is_some() => {
                // Held elsewhere, its holder moves it: nothing to do here.
                self.owned
                    .contains_key(shard_id)
                    .then(|| shard_id.clone())
                    .into_iter()
                    .collect()
            }
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
            _ if request.mark.is_some() => self.owned.keys().cloned().collect(),
            stream_wide => {
                self.source.seek_start(stream_wide.clone());
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
                        mark: request.mark,
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
                Ok(Ok(true)) => moved.push(shard_id),
                // Its lease row says this seek moved it already (on another host).
                Ok(Ok(false)) => {}
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
        self.watchers.abort_all();
        while self.watchers.join_next().await.is_some() {}
        self.release_asked().await;
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

    /// Releases the leases handed over to this host after it stopped watching (it is
    /// stopping): nobody would renew them.
    async fn release_asked(&mut self) {
        for shard_id in std::mem::take(&mut self.asking).into_keys() {
            let key = self.key(&shard_id);
            let store = self.ctx.store.clone();
            let Ok(Ok(Some(row))) = timeout(self.call_timeout(), store.read(&key)).await else {
                continue;
            };
            if row.owner.as_deref() != Some(&self.owner) {
                continue;
            }
            let lease = HeldLease {
                key,
                owner: self.owner.clone(),
                counter: row.counter,
                checkpoint: row.checkpoint,
                seek_mark: row.seek_mark,
            };
            let _ = timeout(self.call_timeout(), store.release(lease)).await;
        }
    }
}

mod setbacks;
#[cfg(test)]
mod tests;
