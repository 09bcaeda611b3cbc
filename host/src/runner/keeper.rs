//! The lease keeper: the one task that writes a held lease's row.
//!
//! Renewals and checkpoint writes go through this task alone, so they never race on the
//! fencing counter, and run apart from the shard's reader so a slow handler or a full buffer
//! never costs the lease. Checkpoints are coalesced: at most one write in flight, at most one
//! per interval, always the latest position, and a final flush before the lease is released.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::lease::{HeldLease, LeaseStore};

/// Timing of a keeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeeperTiming {
    pub ttl: Duration,
    pub renew_every: Duration,
    pub checkpoint_every: Duration,
}

/// The worker's side of a keeper.
pub struct Keeper {
    checkpoint: watch::Sender<Option<String>>,
    finish: Option<oneshot::Sender<()>>,
    lost: watch::Receiver<bool>,
    task: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts keeping `lease`.
    pub fn spawn(store: Arc<dyn LeaseStore>, lease: HeldLease, timing: KeeperTiming) -> Self {
        let (checkpoint, checkpoint_rx) = watch::channel(lease.checkpoint.clone());
        let (finish, finish_rx) = oneshot::channel();
        let (lost_tx, lost) = watch::channel(false);
        let task = tokio::spawn(keep(
            store,
            lease,
            timing,
            checkpoint_rx,
            finish_rx,
            lost_tx,
        ));
        Self {
            checkpoint,
            finish: Some(finish),
            lost,
            task: Some(task),
        }
    }

    /// Asks for `sequence` to be stored; only the latest asked-for position is written.
    pub fn checkpoint(&self, sequence: String) {
        self.checkpoint.send_replace(Some(sequence));
    }

    /// Resolves once the lease is lost (taken over, or not renewable for its whole duration).
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Flushes the latest checkpoint and releases the lease; returns once done.
    pub async fn finish(mut self) {
        if let Some(finish) = self.finish.take() {
            let _ = finish.send(());
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
    lost: watch::Sender<bool>,
}

async fn keep(
    store: Arc<dyn LeaseStore>,
    lease: HeldLease,
    timing: KeeperTiming,
    mut checkpoint: watch::Receiver<Option<String>>,
    mut finish: oneshot::Receiver<()>,
    lost: watch::Sender<bool>,
) {
    let mut state = State {
        written: lease.checkpoint.clone(),
        store,
        lease,
        timing,
        last_renewed: Instant::now(),
        lost,
    };
    let mut renew =
        tokio::time::interval_at(Instant::now() + timing.renew_every, timing.renew_every);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut next_write: Option<Instant> = None;
    let mut last_write = Instant::now() - timing.checkpoint_every;
    loop {
        tokio::select! {
            _ = &mut finish => {
                let latest = checkpoint.borrow_and_update().clone();
                if state.write(latest).await.is_some() {
                    state.release().await;
                }
                return;
            }
            _ = renew.tick() => {
                if !state.renew().await {
                    return;
                }
            }
            changed = checkpoint.changed(), if next_write.is_none() => {
                if changed.is_err() {
                    return; // the worker is gone without finishing: stop, like a crash
                }
                next_write = Some(last_write + timing.checkpoint_every);
            }
            _ = sleep_until(next_write), if next_write.is_some() => {
                next_write = None;
                let latest = checkpoint.borrow_and_update().clone();
                match state.write(latest).await {
                    Some(true) => last_write = Instant::now(),
                    // A failed write is tried again with whatever is latest then.
                    Some(false) => next_write = Some(Instant::now() + timing.checkpoint_every),
                    None => return,
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

impl State {
    /// Renews; returns false once the lease is lost.
    async fn renew(&mut self) -> bool {
        match self.store.renew(&mut self.lease, self.timing.ttl).await {
            Ok(true) => {
                self.last_renewed = Instant::now();
                true
            }
            Ok(false) => {
                self.mark_lost("it was taken over");
                false
            }
            Err(error) => {
                // Unable to prove we hold it for a whole lease duration: someone else may
                // have taken it, so stop delivering.
                if self.last_renewed.elapsed() >= self.timing.ttl {
                    self.mark_lost(&format!(
                        "renewals failed for {:?}: {error}",
                        self.timing.ttl
                    ));
                    return false;
                }
                tracing::warn!(lease = %self.lease.key, %error, "lease renewal failed; retrying");
                true
            }
        }
    }

    /// Writes `latest` if it differs from what is stored. `Some(true)`: stored (or nothing to
    /// store); `Some(false)`: the store failed, try again; `None`: the lease is lost.
    async fn write(&mut self, latest: Option<String>) -> Option<bool> {
        let Some(sequence) = latest.filter(|s| Some(s) != self.written.as_ref()) else {
            return Some(true);
        };
        match self
            .store
            .checkpoint(&mut self.lease, &sequence, self.timing.ttl)
            .await
        {
            Ok(true) => {
                self.last_renewed = Instant::now();
                self.written = Some(sequence);
                Some(true)
            }
            Ok(false) => {
                self.mark_lost("a checkpoint write was fenced off");
                None
            }
            Err(error) => {
                tracing::warn!(lease = %self.lease.key, %error, "checkpoint write failed; retrying");
                Some(false)
            }
        }
    }

    async fn release(&mut self) {
        match self.store.release(self.lease.clone()).await {
            Ok(true) => tracing::debug!(lease = %self.lease.key, "lease released"),
            Ok(false) => {
                tracing::info!(lease = %self.lease.key, "lease was already lost at release")
            }
            Err(error) => {
                tracing::warn!(lease = %self.lease.key, %error, "lease release failed; it will expire")
            }
        }
    }

    fn mark_lost(&self, why: &str) {
        tracing::warn!(lease = %self.lease.key, owner = %self.lease.owner,
            "lease lost ({why}); the shard is no longer delivered here");
        self.lost.send_replace(true);
    }
}
