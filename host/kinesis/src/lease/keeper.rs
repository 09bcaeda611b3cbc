//! The lease keeper: the one task that writes a held lease's row.
//!
//! Renewals and checkpoint writes go through this task alone, so they never race on the
//! fencing counter, and run apart from the shard's reader so a slow handler or a full buffer
//! never costs the lease. Checkpoints are coalesced: at most one write in flight, at most one
//! per interval, always the latest position.
//!
//! Every store call has a timeout, and the lease counts as lost once no renewal has succeeded
//! for `lost_after` (less than the lease's duration, so this host stops before another may take
//! it over), whether the store answered with errors or not at all. A renewal also tells whether
//! another host asked for the lease (balancing): the worker then stops at its next call
//! boundary and the keeper hands the lease over. The final checkpoint is flushed with retries
//! within the shutdown grace, and the lease is released (or handed over) only once it is.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument as _;

use ruststream_common::escape::one_line;
use ruststream_common::sync::sleep_until;
use ruststream_runtime::pipeline::Stop;

use crate::lease::{HeldLease, LeaseError, LeaseStore};
use crate::metrics::LeaseMetrics;

/// Timing of a keeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeeperTiming {
    pub ttl: Duration,
    pub renew_every: Duration,
    pub checkpoint_every: Duration,
    /// Longest wait for one store call.
    pub call_timeout: Duration,
    /// Longest time without a successful renewal before the lease counts as lost.
    pub lost_after: Duration,
}

impl KeeperTiming {
    /// The timing of a lease of duration `ttl` renewed every `renew_every`: store calls time
    /// out within a third of the lease, and the lease counts as lost a renewal interval before
    /// others may take it.
    pub(crate) fn new(ttl: Duration, renew_every: Duration, checkpoint_every: Duration) -> Self {
        Self {
            ttl,
            renew_every,
            checkpoint_every,
            call_timeout: renew_every.max(Duration::from_secs(1)).min(ttl / 3),
            lost_after: ttl.saturating_sub(renew_every).max(ttl / 2),
        }
    }
}

/// When a held lease's calls are cut at shutdown: once `shutdown` has said so for `after`
/// (the calls' part of the shutdown grace), a call still in flight ends at its next check
/// ([`Stop::Shutdown`]), so the final checkpoint is flushed and the lease released within the
/// rest of the grace, whatever the tenant's calls do.
pub(crate) struct CutAtShutdown {
    pub shutdown: watch::Receiver<bool>,
    pub after: Duration,
}

/// Why a checkpoint was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The lease was taken by another host: nothing more is written.
    #[error("the lease was lost")]
    Lost,
    /// The store failed or did not answer; the write is tried again.
    #[error("the lease store failed")]
    Store(#[source] LeaseError),
    /// The keeper ended (its worker is shutting down).
    #[error("the lease keeper stopped")]
    KeeperStopped,
}

/// Pauses between tries of a final write: 100 ms doubling to 2 s, until a deadline.
struct Pause {
    next: Duration,
    deadline: Instant,
}

impl Pause {
    fn new(deadline: Instant) -> Self {
        Self {
            next: Duration::from_millis(100),
            deadline,
        }
    }

    /// Waits before the next try; false (at once) when that try would start past the
    /// deadline.
    async fn wait(&mut self) -> bool {
        if Instant::now() + self.next >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(Duration::from_secs(2));
        true
    }
}

/// How the worker's part ends.
enum Finish {
    /// Flush the checkpoint, then release the lease.
    Release,
    /// Flush the checkpoint, then hand the lease to this host.
    HandOff(String),
}

/// A write the worker waits for.
struct Write {
    checkpoint: String,
    /// The fleet seek that moved the shard to `checkpoint`, stored with it.
    seek_mark: Option<u64>,
}

/// The worker's side of a keeper.
pub(crate) struct Keeper {
    checkpoint: watch::Sender<Option<String>>,
    writes: mpsc::UnboundedSender<(Write, oneshot::Sender<Result<(), WriteError>>)>,
    finish: Option<oneshot::Sender<(Finish, Duration)>>,
    stop: watch::Receiver<Option<Stop>>,
    task: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts keeping `lease`; its calls are cut at shutdown as `cut` says (never, without).
    pub(crate) fn spawn(
        store: Arc<dyn LeaseStore>,
        lease: HeldLease,
        timing: KeeperTiming,
        metrics: LeaseMetrics,
        cut: Option<CutAtShutdown>,
    ) -> Self {
        let (checkpoint, checkpoint_rx) = watch::channel(lease.checkpoint.clone());
        let (writes, writes_rx) = mpsc::unbounded_channel();
        let (finish, finish_rx) = oneshot::channel();
        let (stop_tx, stop) = watch::channel(None);
        let state = State {
            written: lease.checkpoint.clone(),
            store,
            lease,
            timing,
            last_renewed: Instant::now(),
            stop: stop_tx,
            metrics: HeldLeaseMetrics::new(metrics),
        };
        // In the worker's span: lease lines name the shard and its subscription.
        let task =
            tokio::spawn(keep(state, checkpoint_rx, writes_rx, finish_rx, cut).in_current_span());
        Self {
            checkpoint,
            writes,
            finish: Some(finish),
            stop,
            task: Some(task),
        }
    }

    /// Asks for `sequence` to be stored; only the latest asked-for position is written.
    pub(crate) fn checkpoint(&self, sequence: String) {
        self.checkpoint.send_replace(Some(sequence));
    }

    /// Stores `checkpoint` now and says whether it was stored: for a position that must be in
    /// the store before anything is read (where a shard with no checkpoint opened).
    ///
    /// # Errors
    /// Why it was not stored: the lease was lost, or the store failed or did not answer.
    pub(crate) async fn write_now(&self, checkpoint: String) -> Result<(), WriteError> {
        self.send_write(Write {
            checkpoint,
            seek_mark: None,
        })
        .await
    }

    /// Stores `checkpoint`, where fleet seek `mark` moved the shard, with the mark, now: the
    /// positions asked for before it are dropped, never written after it.
    ///
    /// # Errors
    /// As [`write_now`](Self::write_now).
    pub(crate) async fn write_seek_now(
        &self,
        checkpoint: String,
        mark: u64,
    ) -> Result<(), WriteError> {
        self.checkpoint.send_replace(Some(checkpoint.clone()));
        self.send_write(Write {
            checkpoint,
            seek_mark: Some(mark),
        })
        .await
    }

    async fn send_write(&self, write: Write) -> Result<(), WriteError> {
        let (reply, answer) = oneshot::channel();
        self.writes
            .send((write, reply))
            .map_err(|_| WriteError::KeeperStopped)?;
        answer.await.map_err(|_| WriteError::KeeperStopped)?
    }

    /// Changes when the worker must stop delivering, and why.
    pub(crate) fn stop(&self) -> watch::Receiver<Option<Stop>> {
        self.stop.clone()
    }

    /// Flushes the latest checkpoint (retrying within `grace`) and releases the lease once it
    /// is stored; returns once done.
    pub(crate) async fn finish(self, grace: Duration) {
        self.end(Finish::Release, grace).await;
    }

    /// Flushes the latest checkpoint (retrying within `grace`) and hands the lease over to
    /// `to` once it is stored; returns once done.
    pub(crate) async fn hand_off(self, to: String, grace: Duration) {
        self.end(Finish::HandOff(to), grace).await;
    }

    async fn end(mut self, how: Finish, grace: Duration) {
        if let Some(finish) = self.finish.take() {
            let _ = finish.send((how, grace));
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Keeper {
    /// Dropped without [`finish`](Self::finish) (the host was aborted): stop writing at once,
    /// as a crash would. The lease expires for others to take.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

struct State {
    store: Arc<dyn LeaseStore>,
    lease: HeldLease,
    timing: KeeperTiming,
    written: Option<String>,
    last_renewed: Instant,
    stop: watch::Sender<Option<Stop>>,
    metrics: HeldLeaseMetrics,
}

/// Counts the lease as held from its keeper's start until the keeper's state is dropped:
/// when the keeper ends, however it ends (an aborted task drops its state too).
struct HeldLeaseMetrics(LeaseMetrics);

impl HeldLeaseMetrics {
    fn new(metrics: LeaseMetrics) -> Self {
        metrics.taken();
        Self(metrics)
    }
}

impl Drop for HeldLeaseMetrics {
    fn drop(&mut self) {
        self.0.released();
    }
}

async fn keep(
    mut state: State,
    mut checkpoint: watch::Receiver<Option<String>>,
    mut writes: mpsc::UnboundedReceiver<(Write, oneshot::Sender<Result<(), WriteError>>)>,
    mut finish: oneshot::Receiver<(Finish, Duration)>,
    mut cut: Option<CutAtShutdown>,
) {
    let timing = state.timing;
    let mut renew =
        tokio::time::interval_at(Instant::now() + timing.renew_every, timing.renew_every);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut next_write: Option<Instant> = None;
    let mut last_write = Instant::now() - timing.checkpoint_every;
    let mut cut_at: Option<Instant> = None;
    loop {
        let lost_at = state.last_renewed + timing.lost_after;
        tokio::select! {
            said = shutting_down(&mut cut), if cut.is_some() && cut_at.is_none() => {
                cut_at = said.then(|| Instant::now() + cut.as_ref().map_or(Duration::ZERO, |c| c.after));
                if !said {
                    cut = None;
                }
            }
            () = sleep_until(cut_at), if cut_at.is_some() => {
                cut = None;
                cut_at = None;
                state.cut_calls();
            }
            ended = &mut finish => {
                if let Ok((how, grace)) = ended {
                    let latest = checkpoint.borrow_and_update().clone();
                    state.end(latest, how, grace).await;
                }
                return;
            }
            () = tokio::time::sleep_until(lost_at) => {
                state.mark_lost(&format!("no renewal succeeded for {:?}", timing.lost_after));
                return;
            }
            scheduled = renew.tick() => {
                state.metrics.0.renewal_started(Instant::now().saturating_duration_since(scheduled));
                if !state.renew().await {
                    return;
                }
            }
            Some((write, reply)) = writes.recv() => {
                let written = match write.seek_mark {
                    Some(mark) => state.write_seek(write.checkpoint, mark).await,
                    None => state.write(Some(write.checkpoint)).await.map(|_| ()),
                };
                let _ = reply.send(written.map(|_| ()));
                if state.is_lost() {
                    return;
                }
            }
            changed = checkpoint.changed(), if next_write.is_none() => {
                if changed.is_err() {
                    return; // the worker is gone without finishing: stop, like a crash
                }
                next_write = Some(last_write + timing.checkpoint_every);
            }
            () = sleep_until(next_write), if next_write.is_some() => {
                next_write = None;
                let latest = checkpoint.borrow_and_update().clone();
                match state.write(latest).await {
                    Ok(_) => last_write = Instant::now(),
                    Err(_) if state.is_lost() => return,
                    // A failed write is tried again with whatever is latest then.
                    Err(_) => next_write = Some(Instant::now() + timing.checkpoint_every),
                }
            }
        }
    }
}

impl State {
    /// How long the next store call may take: its timeout, and never past the moment the lease
    /// counts as lost, which a hung call must not delay.
    fn call_timeout(&self) -> Duration {
        let lost_at = self.last_renewed + self.timing.lost_after;
        let left = lost_at.saturating_duration_since(Instant::now());
        self.timing
            .call_timeout
            .min(left.max(Duration::from_millis(1)))
    }

    /// Renews; returns false once the lease is lost.
    async fn renew(&mut self) -> bool {
        let timeout = self.call_timeout();
        let ttl = self.timing.ttl;
        match call(timeout, self.store.renew(&mut self.lease, ttl)).await {
            Ok(renewal) if renewal.held => {
                self.last_renewed = Instant::now();
                if let Some(taker) = renewal.wanted_by
                    && self.stop.borrow().is_none()
                {
                    tracing::info!(lease = %self.lease.key, to = %taker,
                        "another host asked for this lease: handing it over at the next call boundary");
                    self.stop.send_replace(Some(Stop::HandOff(taker)));
                }
                true
            }
            Ok(_) => {
                self.mark_lost("it was taken over");
                false
            }
            // Unable to prove we hold it: `lost_after` decides when to give up.
            Err(error) => {
                if self.last_renewed.elapsed() >= self.timing.lost_after {
                    self.mark_lost(&format!(
                        "no renewal succeeded for {:?}",
                        self.timing.lost_after
                    ));
                    return false;
                }
                tracing::warn!(lease = %self.lease.key, error = %one_line(&error), "lease renewal failed; retrying");
                true
            }
        }
    }

    /// Writes `checkpoint` with seek `mark`, whatever is stored.
    async fn write_seek(&mut self, checkpoint: String, mark: u64) -> Result<(), WriteError> {
        let (timeout, ttl) = (self.call_timeout(), self.timing.ttl);
        let written = call(
            timeout,
            self.store
                .mark_seek(&mut self.lease, &checkpoint, mark, ttl),
        )
        .await;
        self.written_or_lost(written, checkpoint).map(|_| ())
    }

    /// Writes `latest` if it differs from what is stored. `Ok(true)`: stored; `Ok(false)`:
    /// nothing to store; `Err`: not stored (and, when the lease was fenced off, it is lost).
    async fn write(&mut self, latest: Option<String>) -> Result<bool, WriteError> {
        let Some(sequence) = latest.filter(|s| Some(s) != self.written.as_ref()) else {
            return Ok(false);
        };
        let (timeout, ttl) = (self.call_timeout(), self.timing.ttl);
        let written = call(
            timeout,
            self.store.checkpoint(&mut self.lease, &sequence, ttl),
        )
        .await;
        self.written_or_lost(written, sequence)
    }

    /// Takes the answer to a checkpoint write of `sequence`.
    fn written_or_lost(
        &mut self,
        written: Result<bool, LeaseError>,
        sequence: String,
    ) -> Result<bool, WriteError> {
        match written {
            Ok(true) => {
                self.metrics.0.checkpoint_written(true);
                self.last_renewed = Instant::now();
                self.written = Some(sequence);
                Ok(true)
            }
            Ok(false) => {
                self.metrics.0.checkpoint_written(false);
                self.mark_lost("a checkpoint write was fenced off");
                Err(WriteError::Lost)
            }
            Err(error) => {
                self.metrics.0.checkpoint_written(false);
                tracing::warn!(lease = %self.lease.key, error = %one_line(&error), "checkpoint write failed; retrying");
                Err(WriteError::Store(error))
            }
        }
    }

    /// The final flush, retried until it is stored or `grace` is over; then the lease is
    /// released (or handed over), and only then: a lease released with a stale checkpoint
    /// would have its next holder read records again.
    async fn end(&mut self, latest: Option<String>, how: Finish, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut pause = Pause::new(deadline);
        loop {
            match self.write(latest.clone()).await {
                Ok(_) => break,
                Err(_) if self.is_lost() => return,
                Err(_) if pause.wait().await => {}
                Err(_) => {
                    tracing::error!(lease = %self.lease.key,
                        "the final checkpoint could not be stored within the shutdown grace; \
                         the lease is left to expire");
                    return;
                }
            }
        }
        // The writes are conditional: a try that took effect unseen makes the next one find
        // the lease gone, which is as good.
        let mut pause = Pause::new(deadline);
        let what = match how {
            Finish::Release => "released",
            Finish::HandOff(_) => "handed over",
        };
        loop {
            let (lease, timeout) = (self.lease.clone(), self.timing.call_timeout);
            let result = match &how {
                Finish::Release => call(timeout, self.store.release(lease)).await,
                Finish::HandOff(to) => call(timeout, self.store.hand_off(lease, to)).await,
            };
            match result {
                Ok(true) => tracing::debug!(lease = %self.lease.key, "lease {what}"),
                Ok(false) => tracing::info!(lease = %self.lease.key, "lease was already lost"),
                Err(_) if pause.wait().await => continue,
                Err(error) => tracing::warn!(lease = %self.lease.key, error = %one_line(&error),
                    "lease not {what} within the shutdown grace; it will expire"),
            }
            return;
        }
    }

    fn is_lost(&self) -> bool {
        *self.stop.borrow() == Some(Stop::Lost)
    }

    /// The host is shutting down and the calls' part of the grace is over: a call in flight
    /// ends at its next check (unless the lease is lost already, which cuts it anyway).
    fn cut_calls(&self) {
        self.stop.send_if_modified(|stop| {
            if stop.as_ref().is_some_and(Stop::cuts_calls) {
                return false;
            }
            tracing::info!(lease = %self.lease.key,
                "shutting down: a call still in flight is stopped at its next check");
            *stop = Some(Stop::Shutdown);
            true
        });
    }

    fn mark_lost(&self, why: &str) {
        self.metrics.0.lost();
        tracing::warn!(lease = %self.lease.key, owner = %self.lease.owner,
            "lease lost ({why}); the shard is no longer delivered here");
        self.stop.send_replace(Some(Stop::Lost));
    }
}

/// Whether the host is shutting down, once it says so: `false` when its signal is gone.
async fn shutting_down(cut: &mut Option<CutAtShutdown>) -> bool {
    match cut {
        Some(cut) => cut.shutdown.wait_for(|stop| *stop).await.is_ok(),
        None => std::future::pending().await,
    }
}

/// A store call, bounded by `timeout`.
async fn call<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| LeaseError::Timeout(timeout))?
}

#[cfg(test)]
mod tests {
    //! The keeper in paused time against the memory store: renewal, loss by takeover and by a
    //! silent store, coalesced checkpoints, and the final flush before a release or handoff.

    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::lease::{
        Claim, LeaseFuture, LeaseKey, LeaseRecord, LeaseTable, MemoryLeaseStore, PresenceKey,
        Renewal,
    };

    const TTL: Duration = Duration::from_secs(10);
    const RENEW: Duration = Duration::from_secs(3);
    const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
    const GRACE: Duration = Duration::from_secs(5);

    fn timing() -> KeeperTiming {
        KeeperTiming::new(TTL, RENEW, CHECKPOINT_EVERY)
    }

    fn key() -> LeaseKey {
        LeaseKey::new("ledger", "shard-0")
    }

    /// The memory store, with a switch that makes the holder's writes hang (a store that
    /// stopped answering).
    #[derive(Default)]
    struct Silenceable {
        store: MemoryLeaseStore,
        silent: AtomicBool,
    }

    impl Silenceable {
        async fn answer<T>(&self, call: LeaseFuture<'_, T>) -> Result<T, LeaseError> {
            if self.silent.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            call.await
        }
    }

    impl LeaseStore for Silenceable {
        fn describe(&self) -> String {
            "silenceable memory".to_owned()
        }
        fn list_all(&self) -> LeaseFuture<'_, LeaseTable> {
            self.store.list_all()
        }
        fn read<'a>(&'a self, key: &'a LeaseKey) -> LeaseFuture<'a, Option<LeaseRecord>> {
            self.store.read(key)
        }
        fn acquire<'a>(
            &'a self,
            key: &'a LeaseKey,
            owner: &'a str,
            ttl: Duration,
            claim: Claim,
        ) -> LeaseFuture<'a, Option<HeldLease>> {
            self.store.acquire(key, owner, ttl, claim)
        }
        fn renew<'a>(
            &'a self,
            lease: &'a mut HeldLease,
            ttl: Duration,
        ) -> LeaseFuture<'a, Renewal> {
            Box::pin(self.answer(self.store.renew(lease, ttl)))
        }
        fn checkpoint<'a>(
            &'a self,
            lease: &'a mut HeldLease,
            sequence: &'a str,
            ttl: Duration,
        ) -> LeaseFuture<'a, bool> {
            Box::pin(self.answer(self.store.checkpoint(lease, sequence, ttl)))
        }
        fn mark_seek<'a>(
            &'a self,
            lease: &'a mut HeldLease,
            checkpoint: &'a str,
            mark: u64,
            ttl: Duration,
        ) -> LeaseFuture<'a, bool> {
            Box::pin(self.answer(self.store.mark_seek(lease, checkpoint, mark, ttl)))
        }
        fn release(&self, lease: HeldLease) -> LeaseFuture<'_, bool> {
            Box::pin(self.answer(self.store.release(lease)))
        }
        fn request_handoff<'a>(
            &'a self,
            key: &'a LeaseKey,
            holder: &'a str,
            taker: &'a str,
        ) -> LeaseFuture<'a, bool> {
            self.store.request_handoff(key, holder, taker)
        }
        fn hand_off<'a>(&'a self, lease: HeldLease, to: &'a str) -> LeaseFuture<'a, bool> {
            Box::pin(self.answer(self.store.hand_off(lease, to)))
        }
        fn announce<'a>(&'a self, presence: &'a PresenceKey, ttl: Duration) -> LeaseFuture<'a, ()> {
            self.store.announce(presence, ttl)
        }
        fn withdraw<'a>(
            &'a self,
            presence: &'a PresenceKey,
            counter: Option<u64>,
        ) -> LeaseFuture<'a, bool> {
            self.store.withdraw(presence, counter)
        }
        fn seed_checkpoint<'a>(
            &'a self,
            key: &'a LeaseKey,
            checkpoint: &'a str,
            mark: Option<u64>,
        ) -> LeaseFuture<'a, bool> {
            self.store.seed_checkpoint(key, checkpoint, mark)
        }
    }

    /// `a` takes the lease and a keeper keeps it.
    async fn keeping(store: &Arc<Silenceable>) -> (Keeper, u64) {
        let lease = store.acquire(&key(), "a", TTL, Claim::Free).await;
        let lease = lease.ok().flatten().expect("a free lease");
        let counter = lease.counter;
        let metrics = LeaseMetrics::new("tenant", "app", "ledger", 100);
        (
            Keeper::spawn(store.clone(), lease, timing(), metrics, None),
            counter,
        )
    }

    async fn row(store: &Silenceable) -> LeaseRecord {
        let row = store.read(&key()).await.ok().flatten();
        row.expect("the lease row")
    }

    /// Waits until the keeper says why the worker must stop.
    async fn stopped(keeper: &Keeper) -> Stop {
        let mut stop = keeper.stop();
        let said = stop
            .wait_for(Option::is_some)
            .await
            .expect("the keeper's signal");
        said.clone().expect("a reason")
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_lease_is_renewed_every_interval_while_nothing_else_happens() {
        let store = Arc::new(Silenceable::default());
        let (keeper, taken) = keeping(&store).await;
        // Time passes on purpose: nothing but renewals may happen in it.
        tokio::time::sleep(RENEW * 10 + RENEW / 2).await;
        let row = row(&store).await;
        assert_eq!(row.owner.as_deref(), Some("a"));
        assert_eq!(row.counter, taken + 10, "one renewal every {RENEW:?}");
        assert_eq!(*keeper.stop().borrow(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_over_is_noticed_at_the_next_renewal_and_nothing_more_is_written() {
        let store = Arc::new(Silenceable::default());
        let (keeper, taken) = keeping(&store).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        // b observed the counter unchanged (a's renewals stuck somewhere) and takes over.
        let b = store
            .acquire(&key(), "b", TTL, Claim::Observed(taken))
            .await;
        let b = b.ok().flatten().expect("the observed counter is current");
        let took = Instant::now();
        assert_eq!(stopped(&keeper).await, Stop::Lost);
        assert!(
            took.elapsed() <= RENEW,
            "noticed after {:?}",
            took.elapsed()
        );
        keeper.checkpoint("99".to_owned());
        keeper.finish(GRACE).await;
        let row = row(&store).await;
        assert_eq!((row.owner.as_deref(), row.counter), (Some("b"), b.counter));
        assert_eq!(row.checkpoint, None, "a fenced holder writes nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_store_costs_the_lease_before_anyone_may_take_it() {
        let store = Arc::new(Silenceable::default());
        let (keeper, _) = keeping(&store).await;
        // The first renewal succeeds; then the store stops answering.
        tokio::time::sleep(RENEW + Duration::from_millis(10)).await;
        assert_eq!(*keeper.stop().borrow(), None);
        let renewed = Instant::now() - Duration::from_millis(10);
        store.silent.store(true, Ordering::SeqCst);
        assert_eq!(stopped(&keeper).await, Stop::Lost);
        let silent_for = renewed.elapsed();
        let lost_after = timing().lost_after;
        assert!(silent_for >= lost_after, "gave up after {silent_for:?}");
        // Others judge it expired only once its counter stood still for a lease duration.
        assert!(silent_for < TTL, "still delivering after {silent_for:?}");
    }

    /// Polls the row every 10 ms (paused time) until its checkpoint is `position`.
    async fn stored(store: &Silenceable, position: &str) {
        while row(store).await.checkpoint.as_deref() != Some(position) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn checkpoints_are_coalesced_to_the_latest_at_most_one_per_interval() {
        let store = Arc::new(Silenceable::default());
        let (keeper, taken) = keeping(&store).await;
        keeper.checkpoint("1".to_owned());
        stored(&store, "1").await;
        let written = Instant::now();
        for position in ["2", "3", "4"] {
            keeper.checkpoint(position.to_owned());
        }
        // The next write waits for the interval, then stores the latest only.
        stored(&store, "4").await;
        assert!(written.elapsed() >= CHECKPOINT_EVERY - Duration::from_millis(10));
        assert!(written.elapsed() < RENEW, "no renewal in between");
        assert_eq!(
            row(&store).await.counter,
            taken + 2,
            "two writes for four positions"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn finishing_flushes_the_latest_checkpoint_then_releases() {
        let store = Arc::new(Silenceable::default());
        let (keeper, _) = keeping(&store).await;
        keeper.checkpoint("5".to_owned());
        keeper.checkpoint("6".to_owned());
        keeper.finish(GRACE).await;
        let row = row(&store).await;
        assert_eq!(row.checkpoint.as_deref(), Some("6"));
        assert_eq!(row.owner, None, "released");
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_flush_the_store_does_not_answer_leaves_the_lease_to_expire() {
        let store = Arc::new(Silenceable::default());
        let (keeper, taken) = keeping(&store).await;
        store.silent.store(true, Ordering::SeqCst);
        keeper.checkpoint("5".to_owned());
        let started = Instant::now();
        keeper.finish(GRACE).await;
        // The grace, and at most a write that timed out before it began.
        assert!(started.elapsed() <= GRACE + 2 * timing().call_timeout);
        store.silent.store(false, Ordering::SeqCst);
        let row = row(&store).await;
        assert_eq!((row.owner.as_deref(), row.counter), (Some("a"), taken));
        assert_eq!(
            row.checkpoint, None,
            "never released with a stale checkpoint"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_handoff_request_stops_the_worker_and_the_lease_goes_with_its_checkpoint() {
        let store = Arc::new(Silenceable::default());
        let (keeper, _) = keeping(&store).await;
        let asked = store.request_handoff(&key(), "a", "b").await;
        assert_eq!(asked.ok(), Some(true));
        let since = Instant::now();
        assert_eq!(stopped(&keeper).await, Stop::HandOff("b".to_owned()));
        assert!(since.elapsed() <= RENEW, "seen at the next renewal");
        keeper.checkpoint("8".to_owned());
        keeper.hand_off("b".to_owned(), GRACE).await;
        let row = row(&store).await;
        assert_eq!(row.owner.as_deref(), Some("b"));
        assert_eq!(row.wanted_by, None);
        assert_eq!(
            row.checkpoint.as_deref(),
            Some("8"),
            "flushed before the handoff"
        );
        let b = store.acquire(&key(), "b", TTL, Claim::Free).await;
        let b = b.ok().flatten().expect("b takes what it was handed");
        assert_eq!(b.checkpoint.as_deref(), Some("8"));
    }
}
