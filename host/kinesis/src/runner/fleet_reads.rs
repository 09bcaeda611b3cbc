//! A fleet's share of each shard's reads: Kinesis serves five GetRecords a second per shard to
//! all its readers together, so hosts that read the same shard divide those turns between
//! them instead of each taking five.
//!
//! Every host keeps a presence row in the fleet's reads table ([`READS_TABLE`], one for all
//! tenants and apps) for each shard it read within a lease duration: key
//! `#host/<stream>:<shard>/<owner>`, renewed every renewal interval like a lease, judged live
//! while its counter moves. Each round a host lists the table, counts the live hosts reading
//! each of its shards (itself included) and spaces its own turns on the shard `n × 200 ms`
//! apart ([`ReadPacing::share`]): one host alone reads five times a second, two read 2.5
//! each, three 1.67. A host that starts reading a shard says so at once (its presence is
//! written before its next round) and the others slow down within one round of seeing it;
//! a host that stops reading withdraws its row, and a crashed one's row stops moving and no
//! longer counts after a lease duration.
//!
//! What the fleet asks of a shard is bounded by those rows: within a renewal interval of a
//! change (a host starting to read, one leaving), the fleet may read a little more than five
//! times a second on it, never for longer. Inside a host, every tenant, app and identity
//! already takes its turns from the one pacing, so a host counts once whatever it reads for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use ruststream_common::escape::one_line;

use super::HostConfig;
use super::observed::Observed;
use super::presence::{self, Presence};
use crate::kinesis::ReadPacing;
use crate::lease::keeper::KeeperTiming;
use crate::lease::{LeaseStore, PresenceKey};
use crate::metrics::SHARD_READERS;

/// The fleet's reads table: who reads which shard, for every tenant and app of the fleet.
pub const READS_TABLE: &str = "ruststream.reads";

/// This host's part in its fleet's reads: announces the shards it reads and applies the
/// fleet's count of readers to its pacing, until stopped.
pub struct FleetReads {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl FleetReads {
    /// Starts taking part: `store` is the fleet's reads table, `pacing` the host's
    /// ([`Host::read_pacing`](super::Host::read_pacing)), `config` the host's (its owner id
    /// and lease timing).
    pub fn spawn(store: Arc<dyn LeaseStore>, pacing: Arc<ReadPacing>, config: &HostConfig) -> Self {
        let share = Share {
            store,
            pacing,
            owner: config.owner_id.clone(),
            timing: config.keeper_timing(),
            observed: Observed::default(),
            reading: HashMap::new(),
        };
        let (stop, stopped) = oneshot::channel();
        Self {
            stop: Some(stop),
            task: Some(tokio::spawn(share.run(stopped))),
        }
    }

    /// Stops taking part and withdraws this host's rows (each one try, bounded by the call
    /// timeout: a row left behind stops counting after a lease duration).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FleetReads {
    fn drop(&mut self) {
        // Dropped without `stop`, it ends as a crash would: rows stop moving and expire.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

struct Share {
    store: Arc<dyn LeaseStore>,
    pacing: Arc<ReadPacing>,
    owner: String,
    timing: KeeperTiming,
    observed: Observed,
    /// The shards this host announces it reads, by (stream, shard).
    reading: HashMap<(String, String), Presence>,
}

impl Share {
    async fn run(mut self, mut stopped: oneshot::Receiver<()>) {
        let mut tick = tokio::time::interval(self.timing.renew_every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tick.tick() => self.round().await,
            }
        }
        let mut withdrawn = tokio::task::JoinSet::new();
        for (_, presence) in self.reading.drain() {
            withdrawn.spawn(presence.withdraw());
        }
        withdrawn.join_all().await;
    }

    /// Announces what this host reads now, and spaces its turns by what the fleet reads.
    async fn round(&mut self) {
        let read: BTreeSet<(String, String)> = self
            .pacing
            .read_within(self.timing.ttl)
            .into_iter()
            .collect();
        let left: Vec<(String, String)> = self
            .reading
            .keys()
            .filter(|shard| !read.contains(*shard))
            .cloned()
            .collect();
        for shard in left {
            if let Some(presence) = self.reading.remove(&shard) {
                tracing::debug!(stream = %shard.0, shard = %shard.1, "no longer reading the shard; leaving its readers");
                tokio::spawn(presence.withdraw());
            }
        }
        for shard in &read {
            if !self.reading.contains_key(shard) {
                let key = PresenceKey::new(&scope(&shard.0, &shard.1), &self.owner);
                let presence = Presence::spawn(self.store.clone(), key, self.timing);
                self.reading.insert(shard.clone(), presence);
            }
        }
        let listed = tokio::time::timeout(self.timing.call_timeout, self.store.list_all()).await;
        let hosts = match listed {
            Ok(Ok(table)) => table.hosts,
            Ok(Err(error)) => {
                tracing::warn!(store = %self.store.describe(), error = %one_line(&error), "listing the fleet's reads failed; keeping the last shares");
                return;
            }
            Err(_) => {
                tracing::warn!(store = %self.store.describe(), "listing the fleet's reads timed out; keeping the last shares");
                return;
            }
        };
        self.observed
            .observe(hosts.iter().map(|host| (&host.key, host.counter)));
        let mut readers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for host in &hosts {
            let live = self.observed.unchanged_for(&host.key, host.counter) < self.timing.ttl;
            if live && host.owner != self.owner {
                readers.entry(&host.scope).or_default().insert(&host.owner);
            }
        }
        // For shard affinity: a free lease of a shard another host reads is left to it first.
        let elsewhere = readers
            .keys()
            .filter_map(|scope| scope.rsplit_once(':'))
            .map(|(stream, shard)| (stream.to_owned(), shard.to_owned()))
            .collect();
        self.pacing.read_elsewhere(elsewhere);
        for (stream, shard) in &read {
            let others = readers
                .get(scope(stream, shard).as_str())
                .map_or(0, BTreeSet::len);
            let hosts = u32::try_from(others + 1).unwrap_or(u32::MAX);
            self.pacing.share(stream, shard, hosts);
            metrics::gauge!(SHARD_READERS, "stream" => stream.clone(), "shard" => shard.clone())
                .set(f64::from(hosts));
        }
        let long_dead = self.timing.ttl * presence::FORGET_AFTER_TTLS;
        presence::forget_dead(
            &self.store,
            &hosts,
            &self.owner,
            &self.observed,
            long_dead,
            self.timing.call_timeout,
        )
        .await;
    }
}

/// A shard as the reads table names it: `stream:shard`.
fn scope(stream: &str, shard: &str) -> String {
    format!("{stream}:{shard}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lease::MemoryLeaseStore;

    fn config(owner: &str) -> HostConfig {
        HostConfig {
            owner_id: owner.to_owned(),
            lease_ttl: Duration::from_secs(10),
            renew_interval: Duration::from_secs(1),
            ..HostConfig::default()
        }
    }

    /// Waits (paused time) until `pacing`'s turns on shard-0 are `expected` apart.
    async fn spaced(pacing: &ReadPacing, expected: Duration) -> bool {
        for _ in 0..60 {
            if pacing.interval("s", "shard-0") == expected {
                return true;
            }
            pacing.turn("s", "shard-0").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    }

    #[tokio::test(start_paused = true)]
    async fn hosts_reading_one_shard_divide_its_turns_and_a_leaver_gives_them_back() {
        let store: Arc<dyn LeaseStore> = Arc::new(MemoryLeaseStore::new());
        let pacings: Vec<Arc<ReadPacing>> = (0..3).map(|_| Arc::new(ReadPacing::new())).collect();
        let mut shares: Vec<FleetReads> = ["a", "b", "c"]
            .iter()
            .zip(&pacings)
            .map(|(owner, pacing)| FleetReads::spawn(store.clone(), pacing.clone(), &config(owner)))
            .collect();
        for pacing in &pacings {
            pacing.turn("s", "shard-0").await;
        }
        for pacing in &pacings {
            assert!(
                spaced(pacing, Duration::from_millis(625)).await,
                "three hosts: 625 ms each"
            );
        }
        // A shard only one host reads is its alone.
        pacings[0].turn("s", "shard-1").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(pacings[0].interval("s", "shard-1"), MIN);
        // c stops (withdraws): a and b share the shard by two.
        shares.pop().expect("c").stop().await;
        assert!(spaced(&pacings[0], Duration::from_millis(400)).await);
        // b crashes: its row stops moving and, a lease duration later, a reads alone.
        drop(shares.pop());
        assert!(
            spaced(&pacings[0], MIN).await,
            "a crashed host stops counting"
        );
    }

    const MIN: Duration = crate::kinesis::MIN_READ_INTERVAL;
}
