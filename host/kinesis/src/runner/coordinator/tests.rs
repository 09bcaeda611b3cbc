//! The coordinator's rounds in paused time, several hosts sharing one memory store: takeover
//! of expired leases, fair share, handoffs and lost leases, with no server.
//!
//! Each host runs [`coordinate`] with the same [`Shards`] as the host's own except for what
//! needs Kinesis: the shards are a fixed list, and a worker does only its lease's part of a
//! real worker's life (a keeper, stopping when the keeper says so, flushing and releasing or
//! handing over), recording how it ended.

use std::sync::Mutex;

use tokio::task::JoinHandle;

use super::*;
use crate::lease::MemoryLeaseStore;
use crate::lease::keeper::Keeper;
use crate::metrics::LeaseMetrics;
use ruststream_common::sync::lock;
use ruststream_runtime::pipeline::Stop;
use std::collections::BTreeSet;

const STREAM: &str = "ledger";
const TTL: Duration = Duration::from_secs(10);
const RENEW: Duration = Duration::from_secs(3);
const SYNC: Duration = Duration::from_secs(10);

/// How each worker of the test ended: (host, shard, exit).
type Exits = Arc<Mutex<Vec<(String, String, WorkerExit)>>>;

/// The shards each host reads, for every subscription it runs (a worker adds its shard while
/// it runs): what the host's pacing and the fleet's reads table say in a real fleet.
type ReadBy = Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>;

struct TestShards {
    shards: Arc<Vec<ShardInfo>>,
    read: ReadBy,
    store: Arc<dyn LeaseStore>,
    config: Arc<HostConfig>,
    shutdown: watch::Receiver<bool>,
    exits: Exits,
}

impl Shards for TestShards {
    fn list(&self) -> ShardsFuture<'_, Result<Arc<Vec<ShardInfo>>, ReadError>> {
        Box::pin(async { Ok(self.shards.clone()) })
    }

    fn work(
        &self,
        assignment: Assignment,
        _seeks: mpsc::UnboundedReceiver<ShardSeek>,
    ) -> ShardsFuture<'static, (String, WorkerExit)> {
        let (store, config) = (self.store.clone(), self.config.clone());
        let (mut shutdown, exits) = (self.shutdown.clone(), self.exits.clone());
        let read = self.read.clone();
        Box::pin(async move {
            let shard = assignment.lease.key.shard_id().to_owned();
            let host = config.owner_id.clone();
            lock(&read)
                .entry(host.clone())
                .or_default()
                .insert(shard.clone());
            let metrics = LeaseMetrics::new("tenant", "app", STREAM, 100);
            let keeper = Keeper::spawn(
                store,
                assignment.lease,
                config.keeper_timing(),
                metrics,
                None,
            );
            let mut stop = keeper.stop();
            let grace = config.shutdown_grace;
            // The keeper's signal, or `None` at shutdown (no guard is held past the select).
            let signal = tokio::select! {
                said = stop.wait_for(Option::is_some) => said.map_or(Some(Stop::Lost), |s| s.clone()),
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            let exit = match signal {
                Some(Stop::HandOff(to)) => {
                    keeper.hand_off(to.clone(), grace).await;
                    WorkerExit::HandedOver(to)
                }
                Some(Stop::Lost) => WorkerExit::Lost,
                Some(Stop::Shutdown | Stop::Withdrawn) | None => {
                    keeper.finish(grace).await;
                    WorkerExit::Stopped
                }
            };
            lock(&read).entry(host).or_default().remove(&shard);
            lock(&exits).push((config.owner_id.clone(), shard.clone(), exit.clone()));
            (shard, exit)
        })
    }

    fn seek_start(&mut self, _start: StartPosition) {}

    fn affinity(&self) -> Affinity {
        let read = lock(&self.read);
        let mut affinity = Affinity::default();
        for (host, shards) in read.iter() {
            if *host == self.config.owner_id {
                affinity.here.extend(shards.iter().cloned());
            } else {
                affinity.elsewhere.extend(shards.iter().cloned());
            }
        }
        affinity
    }
}

/// A running host: its coordinator task and its shutdown switch.
struct TestHost {
    task: JoinHandle<()>,
    shutdown: Arc<watch::Sender<bool>>,
}

impl TestHost {
    /// Stops it gracefully: its workers release their leases.
    async fn stop(self) {
        self.shutdown.send_replace(true);
        let _ = self.task.await;
    }

    /// Stops it as a crash would: nothing more is written, its leases expire.
    async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

struct Fleet {
    store: Arc<MemoryLeaseStore>,
    shards: Arc<Vec<ShardInfo>>,
    exits: Exits,
}

impl Fleet {
    fn new(shards: usize) -> Self {
        let shards = (0..shards)
            .map(|i| ShardInfo {
                shard_id: format!("shard-{i}"),
                parents: Vec::new(),
                closed: false,
            })
            .collect();
        Self {
            store: Arc::new(MemoryLeaseStore::new()),
            shards: Arc::new(shards),
            exits: Arc::default(),
        }
    }

    fn start(&self, owner: &str) -> TestHost {
        self.start_reading(owner, ReadBy::default())
    }

    /// Starts `owner`'s coordinator of this subscription in a fleet whose hosts read `read`
    /// (shared with the fleet's other subscriptions).
    fn start_reading(&self, owner: &str, read: ReadBy) -> TestHost {
        let config = Arc::new(HostConfig {
            owner_id: owner.to_owned(),
            lease_ttl: TTL,
            renew_interval: RENEW,
            shard_sync_interval: SYNC,
            ..HostConfig::default()
        });
        let (shutdown, stopped) = watch::channel(false);
        let shutdown = Arc::new(shutdown);
        let store: Arc<dyn LeaseStore> = self.store.clone();
        let source = TestShards {
            shards: self.shards.clone(),
            store: store.clone(),
            config: config.clone(),
            shutdown: stopped.clone(),
            exits: self.exits.clone(),
            read,
        };
        let rounds = Rounds {
            tenant: "acme".to_owned(),
            subscriber: STREAM.to_owned(),
            stream: STREAM.to_owned(),
            store,
            config,
            status: StatusBoard::new(STREAM, STREAM, Arc::new(crate::kinesis::ReadPacing::new())),
            shutdown: stopped,
            stop: shutdown.clone(),
        };
        // Kept open: no seek is asked for.
        let (seeks, seek_rx) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            let _seeks = seeks;
            coordinate(rounds, Box::new(source), false, seek_rx).await;
        });
        TestHost { task, shutdown }
    }

    /// Each lease's owner, by shard.
    async fn owners(&self) -> BTreeMap<String, Option<String>> {
        let rows = self.store.list().await.unwrap_or_default();
        rows.into_iter()
            .map(|row| (row.key.replace(&format!("{STREAM}:"), ""), row.owner))
            .collect()
    }

    /// How many leases each host holds, sorted (hosts holding none are not counted).
    async fn loads(&self) -> Vec<usize> {
        let mut loads: BTreeMap<String, usize> = BTreeMap::new();
        for owner in self.owners().await.into_values().flatten() {
            *loads.entry(owner).or_default() += 1;
        }
        let mut loads: Vec<usize> = loads.into_values().collect();
        loads.sort_unstable();
        loads
    }

    /// Waits (in paused time, polling every 100 ms) until `condition` holds; panics after
    /// `limit`. Returns how long it took.
    async fn until(
        &self,
        limit: Duration,
        what: &str,
        condition: impl AsyncFn(&Self) -> bool,
    ) -> Duration {
        let started = Instant::now();
        while !condition(self).await {
            assert!(
                started.elapsed() < limit,
                "not within {limit:?}: {what}; {:?}",
                self.owners().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started.elapsed()
    }

    fn exits(&self) -> Vec<(String, String, WorkerExit)> {
        lock(&self.exits).clone()
    }
}

fn held_by(owners: &BTreeMap<String, Option<String>>, host: &str) -> usize {
    owners
        .values()
        .filter(|o| o.as_deref() == Some(host))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_lone_host_takes_every_shard_and_keeps_them() {
    let fleet = Fleet::new(4);
    let a = fleet.start("a");
    fleet
        .until(SYNC, "a holds all four", async |f| f.loads().await == [4])
        .await;
    let counters = |rows: Vec<LeaseRecord>| rows.into_iter().map(|r| r.counter).collect::<Vec<_>>();
    let before = counters(fleet.store.list().await.unwrap_or_default());
    // Time passes on purpose: the leases stay, renewed.
    tokio::time::sleep(TTL * 6).await;
    let after = counters(fleet.store.list().await.unwrap_or_default());
    assert_eq!(fleet.loads().await, [4]);
    assert!(
        before.iter().zip(&after).all(|(b, a)| a > b),
        "{before:?} -> {after:?}"
    );
    assert!(fleet.exits().is_empty(), "{:?}", fleet.exits());
    a.stop().await;
    assert!(
        fleet.owners().await.values().all(Option::is_none),
        "released at the stop"
    );
}

/// Shard affinity: a second subscription started on hosts that read the first one's shards
/// takes, and asks for, the shards each host reads already, whatever order its coordinators
/// start in: every lease of a shard ends on one host.
#[tokio::test(start_paused = true)]
async fn a_second_subscription_gathers_on_the_hosts_reading_its_shards() {
    let (first, second) = (Fleet::new(4), Fleet::new(4));
    let read = ReadBy::default();
    let mut hosts = Vec::new();
    for host in ["a", "b", "c"] {
        hosts.push(first.start_reading(host, read.clone()));
    }
    first
        .until(SYNC * 6, "2/1/1", async |f| f.loads().await == [1, 1, 2])
        .await;
    // The other way round: left to itself, c would take the first two shards.
    for host in ["c", "b", "a"] {
        hosts.push(second.start_reading(host, read.clone()));
    }
    let together = async |f: &Fleet| f.owners().await == first.owners().await;
    second
        .until(SYNC * 12, "each shard's two leases on one host", together)
        .await;
    tokio::time::sleep(SYNC * 6).await;
    assert_eq!(second.owners().await, first.owners().await, "and they stay");
    for host in hosts {
        host.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn four_shards_on_three_hosts_settle_at_two_one_one_by_handoffs() {
    let fleet = Fleet::new(4);
    let a = fleet.start("a");
    fleet
        .until(SYNC, "a holds all four", async |f| f.loads().await == [4])
        .await;
    let b = fleet.start("b");
    let c = fleet.start("c");
    fleet
        .until(SYNC * 6, "2/1/1", async |f| f.loads().await == [1, 1, 2])
        .await;
    let settled = fleet.owners().await;
    // Nothing moves back and forth once settled: several rounds later, the same owners.
    tokio::time::sleep(SYNC * 6).await;
    assert_eq!(fleet.owners().await, settled);
    for host in ["a", "b", "c"] {
        assert!(held_by(&settled, host) >= 1, "{host} idles: {settled:?}");
    }
    // Every lease that moved was handed over by its holder, none taken live, none lost.
    let exits = fleet.exits();
    assert!(
        (2..=3).contains(&exits.len()),
        "moves from 4/0/0: {exits:?}"
    );
    let handed = |(from, _, exit): &(String, String, WorkerExit)| matches!(exit, WorkerExit::HandedOver(to) if to != from && to != "a");
    assert!(exits.iter().all(handed), "{exits:?}");
    for host in [a, b, c] {
        host.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_crashed_hosts_leases_are_taken_over_once_they_expire() {
    let fleet = Fleet::new(4);
    let a = fleet.start("a");
    let b = fleet.start("b");
    fleet
        .until(SYNC * 4, "2/2", async |f| f.loads().await == [2, 2])
        .await;
    let handed_over = fleet.exits();
    b.crash().await;
    let took = fleet
        .until(TTL + SYNC * 3, "a takes b's leases", async |f| {
            f.loads().await == [4]
        })
        .await;
    // Taken only once b's counters stood still for a lease duration on a's clock: b's last
    // renewal was at most one interval before the crash.
    assert!(
        took >= TTL - RENEW,
        "taken {took:?} after the crash, before expiry"
    );
    assert_eq!(fleet.exits(), handed_over, "no worker of a ended");
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stopped_hosts_leases_are_taken_at_the_next_round() {
    let fleet = Fleet::new(4);
    let a = fleet.start("a");
    let b = fleet.start("b");
    fleet
        .until(SYNC * 4, "2/2", async |f| f.loads().await == [2, 2])
        .await;
    let handed_over = fleet.exits().len();
    b.stop().await;
    // Released, not left to expire: free at a's next round.
    let took = fleet
        .until(SYNC * 2, "a takes b's leases", async |f| {
            f.loads().await == [4]
        })
        .await;
    assert!(took <= SYNC + Duration::from_millis(100), "{took:?}");
    let stopped = fleet.exits().split_off(handed_over);
    let b_stopped = |(host, _, exit): &(String, String, WorkerExit)| {
        host == "b" && *exit == WorkerExit::Stopped
    };
    assert!(
        stopped.len() == 2 && stopped.iter().all(b_stopped),
        "{stopped:?}"
    );
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_host_whose_lease_is_taken_stops_its_worker_and_writes_nothing_more() {
    let fleet = Fleet::new(1);
    let a = fleet.start("a");
    fleet
        .until(SYNC, "a holds the shard", async |f| f.loads().await == [1])
        .await;
    let key = LeaseKey::new(STREAM, "shard-0");
    let row = fleet
        .store
        .read(&key)
        .await
        .ok()
        .flatten()
        .expect("a's row");
    // Another host took it over (it judged it expired): a must notice and stop.
    let taken = fleet
        .store
        .acquire(&key, "intruder", TTL, Claim::Observed(row.counter))
        .await;
    let taken = taken
        .ok()
        .flatten()
        .expect("the observed counter is current");
    let noticed = fleet
        .until(RENEW * 2, "a's worker stops", async |f| {
            !f.exits().is_empty()
        })
        .await;
    assert!(noticed <= RENEW + Duration::from_millis(100), "{noticed:?}");
    assert_eq!(
        fleet.exits(),
        [("a".to_owned(), "shard-0".to_owned(), WorkerExit::Lost)]
    );
    let row = fleet
        .store
        .read(&key)
        .await
        .ok()
        .flatten()
        .expect("the row");
    assert_eq!(
        (row.owner.as_deref(), row.counter),
        (Some("intruder"), taken.counter)
    );
    // The intruder never renews: a takes the lease back once it expired, and not before.
    let back = fleet
        .until(TTL + SYNC * 2, "a takes it back", async |f| {
            f.owners().await.values().all(|o| o.as_deref() == Some("a"))
        })
        .await;
    assert!(
        back + noticed >= TTL,
        "taken back {:?} after the takeover",
        back + noticed
    );
    a.stop().await;
}
