//! Turns to read a shard, shared by every reader of it in a host that calls Kinesis with one
//! client, and divided between tenants.
//!
//! Kinesis serves at most five GetRecords a second per shard to all its readers together;
//! past that it throttles. Each read takes a turn first: turns on one shard are 200 ms apart
//! whoever takes them, and reads of different shards do not wait for each other. When several
//! reads wait for a shard, its next turn goes to the next **tenant** waiting (round-robin, in
//! name order), and within that tenant to its next subscription waiting: a tenant's share of
//! a shard does not grow with its number of subscriptions. A read shared by several readers
//! (`shared.rs`) waits once for all of them and may be picked as any of theirs.
//!
//! A throttle pushes the shard's next turn back for all its readers, by a pause that doubles
//! with each throttle in a row (from the reader's first backoff pause up to its largest), and
//! a read that succeeds ends the run.
//!
//! One pacing serves every identity of a host (tenants reading with their own roles take
//! turns from it like the others), and a fleet divides a shard's five reads a second between
//! the hosts that read it: told by [`ReadPacing::share`] that `n` hosts read a shard
//! (`runner/fleet_reads.rs` counts them in the fleet's reads table), this host's turns on it
//! are `n × 200 ms` apart.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;

use ruststream_common::{backoff::Backoff, sync::lock};

/// Least time between two turns on one shard: Kinesis serves 5 GetRecords a second per shard.
pub const MIN_READ_INTERVAL: Duration = Duration::from_millis(200);

/// What a shard's [`ShardReads`] are counted over: Kinesis's limit holds averaged over 10 s.
pub const READS_WINDOW: Duration = Duration::from_secs(10);
/// The turns a fleet takes on a shard in [`READS_WINDOW`], at most: five a second.
const TURNS_PER_WINDOW: u32 = 50;

/// What this host asks of one shard, for every subscription it reads it for, and how many
/// hosts of the fleet read it: a status's view of the pacing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardReads {
    /// GetRecords calls this host made on the shard per second over the last
    /// [`READS_WINDOW`], for all its readers (each call is one turn).
    pub get_records_per_second: f64,
    /// Subscriptions of this host (any tenant) whose reads of the shard took a turn within
    /// the window: one reads the shard alone; more share its turns, and those standing at
    /// the same place share one answer.
    pub subscriptions: u32,
    /// Hosts of the fleet reading the shard, this one included, as the fleet's reads table
    /// said last (1 without one): this host's turns are that many times 200 ms apart.
    pub fleet_hosts: u32,
    /// Reads of the shard Kinesis throttled since this host started.
    pub throttled: u64,
}

/// Whose read it is: turns on a shard are divided by tenant, then by subscription (app and
/// subscriber) within the tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ReaderOwner {
    /// The tenant running the subscription.
    pub tenant: String,
    /// The app (as its component declares it).
    pub app: String,
    /// The subscription, by its subscriber name.
    pub subscriber: String,
}

impl ReaderOwner {
    /// The reader of `subscriber` of `app`, run by `tenant`.
    pub fn new(tenant: &str, app: &str, subscriber: &str) -> Self {
        Self {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
            subscriber: subscriber.to_owned(),
        }
    }

    fn subscription(&self) -> (&str, &str) {
        (&self.app, &self.subscriber)
    }
}

/// The turns of every shard a host reads, by (stream, shard).
#[derive(Debug, Default)]
pub struct ReadPacing {
    shards: Arc<Mutex<HashMap<(String, String), ShardTurns>>>,
    /// The shards other hosts of the fleet read, as the fleet's reads table said last.
    elsewhere: Mutex<BTreeSet<(String, String)>>,
}

/// A place in the line for a shard's turns: resolves when granted.
pub(crate) struct Ticket {
    place: Place,
    granted: oneshot::Receiver<()>,
}

/// Which read a ticket is, to add owners to it.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    key: (String, String),
    id: u64,
}

#[derive(Debug)]
struct ShardTurns {
    /// No turn is granted before this.
    next_at: Instant,
    /// Reads waiting for a turn, oldest first.
    waiting: Vec<Waiter>,
    /// The tenant served last, and per tenant the subscription served last.
    last_tenant: Option<String>,
    last_subscription: HashMap<String, (String, String)>,
    /// Throttles in a row, and the pause they have grown to.
    throttles: Option<Backoff>,
    /// Hosts of the fleet reading the shard, this one included (at least 1).
    hosts: u32,
    /// When this host last took a turn on it.
    last_turn: Option<Instant>,
    /// The turns taken within [`READS_WINDOW`], oldest first (at most one per 200 ms).
    recent: VecDeque<Instant>,
    /// When each subscription's read last took (or shared) a turn, kept for [`READS_WINDOW`].
    readers: HashMap<Arc<ReaderOwner>, Instant>,
    /// Throttles since this host started.
    throttled: u64,
    /// A task grants the waiting reads their turns.
    driving: bool,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    owners: Vec<Arc<ReaderOwner>>,
    grant: oneshot::Sender<()>,
}

impl ReadPacing {
    /// No turn taken yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for a turn to read `shard` of `stream`, for no particular subscription (one
    /// tenant of its own for all such callers, served in the order they came), and takes it:
    /// returns at once when the shard's last turn was 200 ms ago or more and nobody waits.
    pub async fn turn(&self, stream: &str, shard: &str) {
        self.turn_for(stream, shard, &ReaderOwner::default()).await;
    }

    /// Waits for `owner`'s turn to read `shard` of `stream`, and takes it. Turns are 200 ms
    /// apart; among the reads waiting, the next tenant in turn goes first, then its next
    /// subscription. Cancel-safe: a dropped wait gives its place up.
    pub async fn turn_for(&self, stream: &str, shard: &str, owner: &ReaderOwner) {
        let ticket = self.line_up(stream, shard, Arc::new(owner.clone()));
        ticket.granted().await;
    }

    /// Lines `owner` up for a turn on `shard` of `stream`.
    pub(crate) fn line_up(&self, stream: &str, shard: &str, owner: Arc<ReaderOwner>) -> Ticket {
        let key = (stream.to_owned(), shard.to_owned());
        let (grant, granted) = oneshot::channel();
        let mut shards = lock(&self.shards);
        let turns = shards.entry(key.clone()).or_insert_with(ShardTurns::new);
        turns.next_id += 1;
        let id = turns.next_id;
        let now = Instant::now();
        if !turns.driving && turns.waiting.is_empty() && turns.next_at <= now {
            // A rested shard nobody waits for: the turn is this caller's at once.
            turns.served(&owner);
            turns.taken(now, std::slice::from_ref(&owner));
            let _ = grant.send(());
        } else {
            turns.waiting.push(Waiter {
                id,
                owners: vec![owner],
                grant,
            });
            if !turns.driving {
                turns.driving = true;
                tokio::spawn(drive(self.shards.clone(), key.clone()));
            }
        }
        Ticket {
            place: Place { key, id },
            granted,
        }
    }

    /// Adds `owner` to the read waiting at `place`: the read is shared, and may now be picked
    /// as `owner`'s too.
    pub(crate) fn join(&self, place: &Place, owner: &Arc<ReaderOwner>) {
        let mut shards = lock(&self.shards);
        let waiter = shards
            .get_mut(&place.key)
            .and_then(|turns| turns.waiting.iter_mut().find(|w| w.id == place.id));
        // A reader joins a read once; a repeated owner changes nothing in `pick`.
        if let Some(waiter) = waiter {
            waiter.owners.push(owner.clone());
        }
    }

    /// Kinesis throttled a read of `shard`: its next turn moves back, for every reader of it,
    /// by a pause that doubles with each throttle in a row (from `first` up to `max`).
    /// Returns the pause.
    pub fn throttled(&self, stream: &str, shard: &str, first: Duration, max: Duration) -> Duration {
        let mut shards = lock(&self.shards);
        let turns = shards
            .entry((stream.to_owned(), shard.to_owned()))
            .or_insert_with(ShardTurns::new);
        turns.throttled += 1;
        let pause = turns
            .throttles
            .get_or_insert_with(|| Backoff::new(first, max))
            .next_pause();
        turns.next_at = turns.next_at.max(Instant::now() + pause);
        pause
    }

    /// `hosts` hosts of the fleet read `shard` of `stream`, this one included: its turns here
    /// are `hosts × 200 ms` apart from now on (a turn already due waits for the new spacing).
    pub fn share(&self, stream: &str, shard: &str, hosts: u32) {
        let mut shards = lock(&self.shards);
        let turns = shards
            .entry((stream.to_owned(), shard.to_owned()))
            .or_insert_with(ShardTurns::new);
        turns.hosts = hosts.max(1);
        if let Some(last) = turns.last_turn {
            turns.next_at = turns.next_at.max(last + turns.interval());
        }
    }

    /// How far apart this host's turns on `shard` of `stream` are.
    pub fn interval(&self, stream: &str, shard: &str) -> Duration {
        lock(&self.shards)
            .get(&(stream.to_owned(), shard.to_owned()))
            .map_or(MIN_READ_INTERVAL, ShardTurns::interval)
    }

    /// The shards this host read within `window`, or that a read waits for now.
    pub fn read_within(&self, window: Duration) -> Vec<(String, String)> {
        let now = Instant::now();
        lock(&self.shards)
            .iter()
            .filter(|(_, turns)| {
                !turns.waiting.is_empty()
                    || turns
                        .last_turn
                        .is_some_and(|at| now.saturating_duration_since(at) <= window)
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// What this host asked of `shard` of `stream` lately; `None` for a shard it never read.
    pub fn reads(&self, stream: &str, shard: &str) -> Option<ShardReads> {
        let mut shards = lock(&self.shards);
        let turns = shards.get_mut(&(stream.to_owned(), shard.to_owned()))?;
        turns.forget_old(Instant::now());
        Some(ShardReads {
            get_records_per_second: turns.recent.len() as f64 / READS_WINDOW.as_secs_f64(),
            subscriptions: u32::try_from(turns.readers.len()).unwrap_or(u32::MAX),
            fleet_hosts: turns.hosts,
            throttled: turns.throttled,
        })
    }

    /// The fleet's reads table says other hosts read `shards` (stream, shard), as of now.
    pub fn read_elsewhere(&self, shards: BTreeSet<(String, String)>) {
        *lock(&self.elsewhere) = shards;
    }

    /// The shards of `stream` other hosts of the fleet read, as last said (none without a
    /// fleet's reads table).
    pub fn elsewhere(&self, stream: &str) -> BTreeSet<String> {
        lock(&self.elsewhere)
            .iter()
            .filter(|(s, _)| s == stream)
            .map(|(_, shard)| shard.clone())
            .collect()
    }

    /// A read of `shard` was answered: the throttles in a row, if any, are over.
    pub fn answered(&self, stream: &str, shard: &str) {
        if let Some(turns) = lock(&self.shards).get_mut(&(stream.to_owned(), shard.to_owned())) {
            turns.throttles = None;
        }
    }
}

impl Ticket {
    /// Which read it is.
    pub(crate) fn place(&self) -> Place {
        self.place.clone()
    }

    /// Waits until the turn is granted. Should the line end without a grant (the pacing is
    /// gone), the read goes ahead rather than wait for ever.
    pub(crate) async fn granted(self) {
        let _ = self.granted.await;
    }
}

impl ShardTurns {
    fn new() -> Self {
        Self {
            next_at: Instant::now(),
            waiting: Vec::new(),
            last_tenant: None,
            last_subscription: HashMap::new(),
            throttles: None,
            hosts: 1,
            last_turn: None,
            recent: VecDeque::new(),
            readers: HashMap::new(),
            throttled: 0,
            driving: false,
            next_id: 0,
        }
    }

    /// This host's share of the shard's turns: 200 ms for each host reading it, rounded up so
    /// that a whole number of its turns fits the fleet's 50 in any 10 s. Turns `n × 200 ms`
    /// apart are up to `⌈10 s / (n × 200 ms)⌉` in a 10 s window (17 for three hosts at
    /// 600 ms: 51 together); spaced `10 s / ⌊50 / n⌋` (625 ms) they are at most `⌊50 / n⌋`
    /// (16: 48 together).
    fn interval(&self) -> Duration {
        let per_window = TURNS_PER_WINDOW / self.hosts;
        let even = MIN_READ_INTERVAL * self.hosts;
        if per_window == 0 {
            return even;
        }
        // Rounded up to the nanosecond: `per_window` turns must not fit in under 10 s.
        let share = READS_WINDOW.as_nanos().div_ceil(u128::from(per_window));
        even.max(Duration::from_nanos(
            u64::try_from(share).unwrap_or(u64::MAX),
        ))
    }

    /// A turn was granted at `now`, to a read of `owners`.
    fn taken(&mut self, now: Instant, owners: &[Arc<ReaderOwner>]) {
        self.last_turn = Some(now);
        self.next_at = now + self.interval();
        self.forget_old(now);
        self.recent.push_back(now);
        for owner in owners {
            self.readers.insert(owner.clone(), now);
        }
    }

    /// Forgets the turns and readers older than [`READS_WINDOW`]: what is kept is bounded by
    /// the turns and subscriptions of one window.
    fn forget_old(&mut self, now: Instant) {
        // The window is (now - 10 s, now]: a turn exactly 10 s old is out of it.
        let window_start = now.checked_sub(READS_WINDOW);
        let old = |at: &Instant| window_start.is_some_and(|start| *at <= start);
        while self.recent.front().is_some_and(old) {
            self.recent.pop_front();
        }
        self.readers.retain(|_, at| !old(at));
    }

    fn served(&mut self, owner: &ReaderOwner) {
        self.last_tenant = Some(owner.tenant.clone());
        self.last_subscription.insert(
            owner.tenant.clone(),
            (owner.app.clone(), owner.subscriber.clone()),
        );
    }

    /// Takes the read whose turn is next: the next tenant waiting after the one served last,
    /// its next subscription waiting, that subscription's oldest read.
    fn pick(&mut self) -> Option<Waiter> {
        self.waiting.retain(|w| !w.grant.is_closed());
        let tenants: BTreeSet<&str> = self
            .waiting
            .iter()
            .flat_map(|w| w.owners.iter().map(|o| o.tenant.as_str()))
            .collect();
        let tenant = next_after(&tenants, self.last_tenant.as_deref())?.to_owned();
        let subscriptions: BTreeSet<(&str, &str)> = self
            .waiting
            .iter()
            .flat_map(|w| w.owners.iter())
            .filter(|o| o.tenant == tenant)
            .map(|o| o.subscription())
            .collect();
        let last = self
            .last_subscription
            .get(&tenant)
            .map(|(app, sub)| (app.as_str(), sub.as_str()));
        let (app, subscriber) = next_after(&subscriptions, last)?;
        let owner = ReaderOwner::new(&tenant, app, subscriber);
        let index = self
            .waiting
            .iter()
            .position(|w| w.owners.iter().any(|o| **o == owner))?;
        self.served(&owner);
        Some(self.waiting.remove(index))
    }
}

/// The first of `set` after `last`, wrapping around to the first of all.
fn next_after<T: Ord + Copy>(set: &BTreeSet<T>, last: Option<T>) -> Option<T> {
    let after = last.and_then(|last| {
        set.range((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded))
            .next()
    });
    after.or_else(|| set.first()).copied()
}

/// Grants the turns of one shard while reads wait for them: one every 200 ms (later after a
/// throttle), to the read [`ShardTurns::pick`] names. Ends when nobody waits.
async fn drive(shards: Arc<Mutex<HashMap<(String, String), ShardTurns>>>, key: (String, String)) {
    loop {
        let at = {
            let mut shards = lock(&shards);
            let Some(turns) = shards.get_mut(&key) else {
                return;
            };
            turns.waiting.retain(|w| !w.grant.is_closed());
            if turns.waiting.is_empty() {
                turns.driving = false;
                return;
            }
            turns.next_at
        };
        tokio::time::sleep_until(at).await;
        let mut shards = lock(&shards);
        let Some(turns) = shards.get_mut(&key) else {
            return;
        };
        let now = Instant::now();
        if now < turns.next_at {
            continue; // a throttle moved the turn back meanwhile
        }
        // A read that went away before its turn takes none.
        while let Some(waiter) = turns.pick() {
            if waiter.grant.send(()).is_ok() {
                turns.taken(now, &waiter.owners);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn turns_on_one_shard_are_spaced_and_other_shards_do_not_wait() {
        let pacing = ReadPacing::new();
        let start = Instant::now();
        for expected in [0, 200, 400] {
            pacing.turn("s", "shard-0").await;
            assert_eq!(start.elapsed().as_millis(), expected);
        }
        pacing.turn("s", "shard-1").await;
        assert_eq!(
            start.elapsed().as_millis(),
            400,
            "another shard reads at once"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let rested = Instant::now();
        pacing.turn("s", "shard-0").await;
        assert_eq!(
            rested.elapsed().as_millis(),
            0,
            "a rested shard reads at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_read_by_several_hosts_takes_their_share_of_the_turns() {
        let pacing = ReadPacing::new();
        pacing.turn("s", "shard-0").await;
        pacing.share("s", "shard-0", 3);
        let start = Instant::now();
        pacing.turn("s", "shard-0").await;
        pacing.turn("s", "shard-0").await;
        assert_eq!(
            start.elapsed().as_millis(),
            1_250,
            "three hosts: 625 ms apart (16 turns each in 10 s)"
        );
        assert_eq!(pacing.interval("s", "shard-0"), Duration::from_millis(625));
        for (hosts, ms) in [
            (1, 200),
            (2, 400),
            (4, 833),
            (7, 1_428),
            (50, 10_000),
            (60, 12_000),
        ] {
            pacing.share("s", "shard-2", hosts);
            let interval = pacing.interval("s", "shard-2");
            assert_eq!(interval.as_millis(), ms, "{hosts} hosts");
            // Each host's turns in any 10 s, times the hosts: at most 50.
            let turns = READS_WINDOW.as_nanos().div_ceil(interval.as_nanos()) as u32;
            assert!(
                turns * hosts <= 50 || hosts > 50,
                "{hosts} hosts: {turns} each"
            );
        }
        assert_eq!(pacing.interval("s", "shard-1"), MIN_READ_INTERVAL);
        pacing.share("s", "shard-0", 1);
        let alone = Instant::now();
        pacing.turn("s", "shard-0").await;
        pacing.turn("s", "shard-0").await;
        assert_eq!(
            alone.elapsed().as_millis(),
            825,
            "alone again: the last 625 ms turn, then 200"
        );
        pacing.share("s", "shard-0", 0);
        assert_eq!(
            pacing.interval("s", "shard-0"),
            MIN_READ_INTERVAL,
            "never below one host"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shards_read_lately_are_the_ones_this_host_reads() {
        let pacing = ReadPacing::new();
        pacing.turn("s", "shard-0").await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        pacing.turn("s", "shard-1").await;
        let window = Duration::from_secs(3);
        assert_eq!(
            pacing.read_within(window),
            [("s".to_owned(), "shard-1".to_owned())]
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(pacing.read_within(window).is_empty());
    }

    /// Turns taken in a minute by each owner, every owner asking again as soon as served.
    async fn a_minute_of_turns(owners: Vec<ReaderOwner>) -> BTreeMap<ReaderOwner, u32> {
        let pacing = Arc::new(ReadPacing::new());
        let taken = Arc::new(Mutex::new(Vec::<(Instant, ReaderOwner)>::new()));
        let readers: Vec<_> = owners
            .into_iter()
            .map(|owner| {
                let (pacing, taken) = (pacing.clone(), taken.clone());
                tokio::spawn(async move {
                    loop {
                        pacing.turn_for("s", "shard-0", &owner).await;
                        lock(&taken).push((Instant::now(), owner.clone()));
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(60)).await;
        for reader in readers {
            reader.abort();
        }
        let taken = lock(&taken).clone();
        for pair in taken.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= MIN_READ_INTERVAL,
                "turns 200 ms apart"
            );
        }
        let mut counts = BTreeMap::new();
        for (_, owner) in taken {
            *counts.entry(owner).or_default() += 1;
        }
        counts
    }

    #[tokio::test(start_paused = true)]
    async fn a_tenant_s_share_does_not_grow_with_its_subscriptions() {
        let mut owners: Vec<ReaderOwner> = (0..64)
            .map(|n| ReaderOwner::new("a", "app", &format!("sub-{n}")))
            .collect();
        owners.push(ReaderOwner::new("b", "app", "only"));
        let counts = a_minute_of_turns(owners).await;
        let b = counts[&ReaderOwner::new("b", "app", "only")];
        let a: u32 = counts
            .iter()
            .filter(|(owner, _)| owner.tenant == "a")
            .map(|(_, n)| n)
            .sum();
        assert!(a + b <= 301, "5 turns a second: {a} + {b}");
        assert!(
            b * 2 >= a && a * 2 >= b,
            "tenant b's turns ({b}) within 2x of tenant a's ({a})"
        );
        // Within tenant a, its 64 subscriptions take turns in round-robin.
        let a_counts: Vec<u32> = counts
            .iter()
            .filter(|(owner, _)| owner.tenant == "a")
            .map(|(_, n)| *n)
            .collect();
        let (least, most) = (a_counts.iter().min(), a_counts.iter().max());
        assert!(
            most.zip(least)
                .is_some_and(|(most, least)| most - least <= 1),
            "{a_counts:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_s_reads_count_the_last_ten_seconds_and_its_subscriptions() {
        let pacing = Arc::new(ReadPacing::new());
        assert_eq!(pacing.reads("s", "shard-0"), None, "never read");
        let owners = [
            ReaderOwner::new("a", "app", "one"),
            ReaderOwner::new("b", "app", "two"),
        ];
        let readers: Vec<_> = owners
            .into_iter()
            .map(|owner| {
                let pacing = pacing.clone();
                tokio::spawn(async move {
                    loop {
                        pacing.turn_for("s", "shard-0", &owner).await;
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(30)).await;
        pacing.share("s", "shard-0", 2);
        pacing.throttled("s", "shard-0", MIN_READ_INTERVAL, MIN_READ_INTERVAL);
        tokio::time::sleep(Duration::from_secs(30)).await;
        let reads = pacing.reads("s", "shard-0").expect("read");
        assert_eq!(reads.subscriptions, 2);
        assert_eq!(reads.fleet_hosts, 2);
        assert_eq!(reads.throttled, 1);
        // Two hosts: 2.5 turns a second, give or take the turn at the window's edge.
        assert!(
            (2.4..=2.6).contains(&reads.get_records_per_second),
            "{reads:?}"
        );
        for reader in readers {
            reader.abort();
        }
        tokio::time::sleep(READS_WINDOW).await;
        let idle = pacing.reads("s", "shard-0").expect("read before");
        assert_eq!((idle.get_records_per_second, idle.subscriptions), (0.0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_moves_every_reader_s_next_turn_back() {
        let pacing = ReadPacing::new();
        let owner = ReaderOwner::new("a", "app", "sub");
        pacing.turn_for("s", "shard-0", &owner).await;
        let first = Duration::from_millis(400);
        let pause = pacing.throttled("s", "shard-0", first, Duration::from_secs(10));
        assert!(pause >= first / 2 && pause <= first, "{pause:?}");
        let start = Instant::now();
        pacing
            .turn_for("s", "shard-0", &ReaderOwner::new("b", "app", "sub"))
            .await;
        assert!(
            start.elapsed() >= pause.max(MIN_READ_INTERVAL),
            "another tenant waits the pause out too: {:?}",
            start.elapsed()
        );
        let second = pacing.throttled("s", "shard-0", first, Duration::from_secs(10));
        assert!(
            second >= first,
            "throttles in a row double the pause: {second:?}"
        );
        pacing.answered("s", "shard-0");
        let after = pacing.throttled("s", "shard-0", first, Duration::from_secs(10));
        assert!(after <= first, "an answer ends the run: {after:?}");
    }
}
