//! What a running subscription is doing, shard by shard.
//!
//! These types are also the admin API's JSON (`ruststream-fleet`'s `admin::model` re-exports
//! them): the serde attributes give the wire form, the state in words
//! ([`ShardState`]'s `Display`), a subscription's shards as a list each carrying its
//! `shard_id`, and what only this process's metrics read (`unhandled`, `copies_pending`,
//! `iterator_age_ms`) left out.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use ruststream_common::sync::lock;
use ruststream_runtime::{
    Clock, ShardPipeline, SystemClock,
    pipeline::{OutcomeCounter, OutcomeCounts},
};

use crate::kinesis::{ReadMode, ReadPacing, ReadProgress, ShardReads};

/// The state of one shard on this host; in JSON and on the status page, the words of its
/// `Display` (`reading`, `handed over to host-b`, `failed: why`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardState {
    /// Leased; the reader is opening its iterator.
    Opening,
    /// Reading and delivering.
    Reading,
    /// Read to its end and settled (`SHARD_END` stored).
    Finished,
    /// Another host took the lease; nothing more is delivered here.
    Lost,
    /// Handed over to the host that asked for it (balancing), checkpoint flushed.
    HandedOver(String),
    /// Stopped by shutdown (checkpoint flushed, lease released).
    Stopped,
    /// Stopped by an error, which says why.
    Failed(String),
}

impl fmt::Display for ShardState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Opening => f.write_str("opening"),
            Self::Reading => f.write_str("reading"),
            Self::Finished => f.write_str("finished"),
            Self::Lost => f.write_str("lost"),
            Self::HandedOver(to) => write!(f, "handed over to {to}"),
            Self::Stopped => f.write_str("stopped"),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// A shard state's words that name no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a shard state (opening, reading, finished, lost, handed over to HOST, stopped, failed: WHY)"
)]
pub struct UnknownShardState(pub String);

impl FromStr for ShardState {
    type Err = UnknownShardState;

    /// Reads back what `Display` wrote.
    fn from_str(words: &str) -> Result<Self, Self::Err> {
        Ok(match words {
            "opening" => Self::Opening,
            "reading" => Self::Reading,
            "finished" => Self::Finished,
            "lost" => Self::Lost,
            "stopped" => Self::Stopped,
            _ => {
                if let Some(to) = words.strip_prefix("handed over to ") {
                    Self::HandedOver(to.to_owned())
                } else if let Some(why) = words.strip_prefix("failed: ") {
                    Self::Failed(why.to_owned())
                } else {
                    return Err(UnknownShardState(words.to_owned()));
                }
            }
        })
    }
}

impl Serialize for ShardState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ShardState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(D::Error::custom)
    }
}

/// One shard's status. The fields are in the order the admin API's JSON shows them; the ones
/// marked `skip` are not sent (they read as zero/`None` in a status parsed from JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStatus {
    /// Where its worker stands.
    pub state: ShardState,
    /// The host holding its lease while this host reads it.
    pub owner: Option<String>,
    /// The checkpoint the pipeline reached (stored within the checkpoint interval).
    pub checkpoint: Option<String>,
    /// The first unhandled record, in front of which the checkpoint is held.
    pub held_at: Option<String>,
    /// Since when (ms since the epoch) the checkpoint has been held in front of `held_at`.
    pub held_since_ms: Option<u64>,
    /// Records delivered to the component on this host.
    pub delivered: u64,
    /// How its deliveries settled on this host.
    pub outcomes: OutcomeCounts,
    /// How far behind the tip of the shard its last read was, as Kinesis reported it.
    pub millis_behind_latest: Option<i64>,
    /// How it is read (none before its reader opened; a status from a host that did not
    /// say reads as none).
    #[serde(default)]
    pub read: Option<ReadMode>,
    /// What this host asks of the shard for every subscription it reads it for (GetRecords a
    /// second, shared or alone, throttles) and how many hosts of the fleet read it; none
    /// before this host read it.
    #[serde(default)]
    pub reads: Option<ShardReads>,
    /// Enhanced fan-out: when the subscription it is read through began (ms since the
    /// epoch); none between subscriptions, and when it is polled.
    #[serde(default)]
    pub subscribed_since_ms: Option<u64>,
    /// Delivery is paused: the component's tenant is quarantined or paused by an operator
    /// (as of the worker's last turn; the fleet's status also sets it from the tenant's state
    /// now).
    pub paused: bool,
    /// Records read and not handled yet: held, waiting for a due time, or whose copy is still
    /// being published.
    #[serde(skip)]
    pub unhandled: u64,
    /// Copies owed to a stream: waiting for their due time or being published.
    #[serde(skip)]
    pub copies_pending: u64,
    /// How old the last record of the last non-empty read was when it was read (ms): Lambda's
    /// iterator age.
    #[serde(skip)]
    pub iterator_age_ms: Option<u64>,
}

/// One subscription's status. In JSON the subscriber is `name` and the shards a list, each
/// with its `shard_id` first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SubscriptionStatus {
    /// The subscription.
    #[serde(rename = "name")]
    pub subscriber: String,
    /// The stream it reads.
    pub stream: String,
    /// Set when the subscription stopped as a whole (e.g. its stream was deleted), or takes
    /// no lease until an operator acts (its lease table holds legacy rows).
    pub error: Option<String>,
    /// Shards this host holds or held, by shard id.
    #[serde(with = "shard_list")]
    pub shards: BTreeMap<String, ShardStatus>,
    /// The live hosts reading the subscription, as its last balancing round saw them (their
    /// presence rows and live leases), this host among them, each with the shards it holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, Vec<String>>,
}

/// A subscription's shards as the JSON list `[{"shard_id": ..., <ShardStatus>}, ...]`.
mod shard_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::ShardStatus;

    #[derive(Serialize)]
    struct Entry<'a> {
        shard_id: &'a str,
        #[serde(flatten)]
        shard: &'a ShardStatus,
    }

    #[derive(Deserialize)]
    struct OwnedEntry {
        shard_id: String,
        #[serde(flatten)]
        shard: ShardStatus,
    }

    pub(super) fn serialize<S: Serializer>(
        shards: &BTreeMap<String, ShardStatus>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            shards
                .iter()
                .map(|(shard_id, shard)| Entry { shard_id, shard }),
        )
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<String, ShardStatus>, D::Error> {
        Ok(Vec::<OwnedEntry>::deserialize(deserializer)?
            .into_iter()
            .map(|entry| (entry.shard_id, entry.shard))
            .collect())
    }
}

impl SubscriptionStatus {
    /// Shards in `state`.
    pub fn count(&self, state: &ShardState) -> usize {
        self.shards.values().filter(|s| s.state == *state).count()
    }
}

/// A subscription's status, shared by its coordinator and workers.
#[derive(Debug, Clone)]
pub(crate) struct StatusBoard {
    status: Arc<Mutex<SubscriptionStatus>>,
    /// Each shard's reader progress, read at every snapshot: lag stays current while a worker
    /// is not reading (its tenant stopped, a long call).
    progress: Arc<Mutex<HashMap<String, Arc<ReadProgress>>>>,
    /// Each shard's outcome counts, which its pipelines (one per lease this host took of it)
    /// count in and every snapshot reads: the one source of a shard's `outcomes`, so they
    /// never lag what the pipeline settled, whatever step settled it.
    outcomes: Arc<Mutex<HashMap<String, OutcomeCounter>>>,
    /// The host's turns on every shard, read at every snapshot for each shard's `reads`.
    pacing: Arc<ReadPacing>,
}

impl StatusBoard {
    /// The status of `subscriber` on `stream`, whose shards' reads `pacing` (the host's) counts.
    pub(crate) fn new(subscriber: &str, stream: &str, pacing: Arc<ReadPacing>) -> Self {
        Self {
            status: Arc::new(Mutex::new(SubscriptionStatus {
                subscriber: subscriber.to_owned(),
                stream: stream.to_owned(),
                ..SubscriptionStatus::default()
            })),
            progress: Arc::default(),
            outcomes: Arc::default(),
            pacing,
        }
    }

    /// The status now; each shard's `millis_behind_latest` is its reader's last figure plus
    /// the time since, beyond the reader's usual gap, that nobody read the shard, its
    /// `outcomes` what its pipelines counted up to now, and its `reads` what the host's
    /// pacing counted over the last 10 s.
    pub(crate) fn snapshot(&self) -> SubscriptionStatus {
        let mut status = self.lock().clone();
        for (shard_id, counter) in lock(&self.outcomes).iter() {
            if let Some(shard) = status.shards.get_mut(shard_id) {
                shard.outcomes = counter.get();
            }
        }
        let now_ms = SystemClock.now_ms();
        for (shard_id, progress) in lock(&self.progress).iter() {
            if let (Some(shard), Some(behind)) =
                (status.shards.get_mut(shard_id), progress.behind_ms(now_ms))
            {
                shard.millis_behind_latest = Some(i64::try_from(behind).unwrap_or(i64::MAX));
            }
            if let Some(shard) = status.shards.get_mut(shard_id) {
                shard.subscribed_since_ms = progress.subscribed_since_ms();
            }
        }
        for (shard_id, shard) in &mut status.shards {
            shard.reads = self.pacing.reads(&status.stream, shard_id);
        }
        status
    }

    /// Whether a reader of any shard was answered after `since_ms` (ms since the epoch).
    pub(crate) fn answered_since(&self, since_ms: u64) -> bool {
        lock(&self.progress)
            .values()
            .any(|progress| progress.answered_at_ms() > since_ms)
    }

    /// Whether the reader of `shard_id` was answered after `since_ms` (ms since the epoch).
    pub(crate) fn shard_answered_since(&self, shard_id: &str, since_ms: u64) -> bool {
        lock(&self.progress)
            .get(shard_id)
            .is_some_and(|progress| progress.answered_at_ms() > since_ms)
    }

    /// Reports `shard_id`'s lag from `progress` from now on (its reader, opened or reopened).
    pub(crate) fn follow_reads(&self, shard_id: &str, progress: Arc<ReadProgress>) {
        lock(&self.progress).insert(shard_id.to_owned(), progress);
    }

    /// The counter `shard_id`'s pipelines count their outcomes in (see
    /// [`ShardPipeline::count_outcomes_in`]): the same for every lease of the shard this host
    /// takes, so the shard's counts add up to what the subscription's metrics counted here.
    pub(crate) fn outcome_counter(&self, shard_id: &str) -> OutcomeCounter {
        lock(&self.outcomes)
            .entry(shard_id.to_owned())
            .or_default()
            .clone()
    }

    /// Notes how `shard_id` is read now.
    pub(crate) fn set_read(&self, shard_id: &str, mode: ReadMode) {
        self.update(shard_id, |s| s.read = Some(mode));
    }

    pub(crate) fn set_state(&self, shard_id: &str, state: ShardState) {
        self.update(shard_id, |s| s.state = state);
    }

    pub(crate) fn update(&self, shard_id: &str, change: impl FnOnce(&mut ShardStatus)) {
        let mut status = self.lock();
        let shard = status
            .shards
            .entry(shard_id.to_owned())
            .or_insert_with(|| ShardStatus {
                state: ShardState::Opening,
                owner: None,
                delivered: 0,
                checkpoint: None,
                held_at: None,
                held_since_ms: None,
                unhandled: 0,
                copies_pending: 0,
                outcomes: OutcomeCounts::default(),
                millis_behind_latest: None,
                read: None,
                reads: None,
                subscribed_since_ms: None,
                iterator_age_ms: None,
                paused: false,
            });
        change(shard);
    }

    /// Records what `pipeline` holds: where the checkpoint is held (keeping the time it first
    /// stood there), how many records are unhandled and how many copies are owed.
    pub(crate) fn set_holds(&self, shard_id: &str, pipeline: &ShardPipeline, now_ms: u64) {
        let held_at = pipeline.held_at();
        self.update(shard_id, |s| {
            if s.held_at.as_deref() != held_at {
                s.held_since_ms = held_at.map(|_| now_ms);
                s.held_at = held_at.map(str::to_owned);
            }
            s.unhandled = pipeline.unhandled() as u64;
            s.copies_pending = pipeline.pending_copies() as u64;
        });
    }

    pub(crate) fn set_error(&self, error: String) {
        self.lock().error = Some(error);
    }

    pub(crate) fn clear_error(&self) {
        self.lock().error = None;
    }

    /// The live hosts of the subscription and the shards each holds, as a balancing round
    /// saw them.
    pub(crate) fn set_hosts(&self, hosts: BTreeMap<String, Vec<String>>) {
        self.lock().hosts = hosts;
    }

    fn lock(&self) -> MutexGuard<'_, SubscriptionStatus> {
        lock(&self.status)
    }
}

/// One version of an app's component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The component's name (its file stem, or the name it was uploaded under).
    pub component: String,
    /// The version the app declares.
    pub version: String,
    /// The SHA-256 of the component's bytes, hex.
    pub content_hash: String,
}

/// How the newest version of an app is doing against the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStatus {
    /// Calls the new version made since it went live.
    pub calls: u64,
    /// Of which failed (trapped).
    pub failures: u64,
    /// How many of its first calls are judged.
    pub judged_over: u32,
    /// How often the version it replaced failed over its last calls, in thousandths: what
    /// the new version is judged against.
    #[serde(default)]
    pub replaced_failure_permille: u32,
    /// `pending`, `kept`, or `rolled back: <why>`.
    pub verdict: String,
}

/// Which versions of an app run, and how the last swap went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppVersions {
    /// The version serving now.
    pub current: VersionInfo,
    /// The version it replaced, which a rollback returns to.
    pub previous: Option<VersionInfo>,
    /// The rollout of the last swap, if there was one.
    pub rollout: Option<RolloutStatus>,
    /// How many times the app was rolled back since the host started.
    pub rollbacks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(state: ShardState) -> ShardStatus {
        ShardStatus {
            state,
            owner: Some("host-a".to_owned()),
            checkpoint: Some("4959".to_owned()),
            held_at: None,
            held_since_ms: Some(7),
            delivered: 3,
            outcomes: OutcomeCounts {
                ack: 3,
                ..OutcomeCounts::default()
            },
            millis_behind_latest: Some(-1),
            read: Some(ReadMode::FanOut),
            reads: None,
            subscribed_since_ms: None,
            paused: true,
            unhandled: 0,
            copies_pending: 0,
            iterator_age_ms: None,
        }
    }

    /// The admin API's JSON as it was when the model had its own copy of these types: field
    /// order, `name`, `shard_id` first, the state in words.
    #[test]
    fn a_subscription_is_sent_as_the_admin_api_always_sent_it() {
        let status = SubscriptionStatus {
            subscriber: "book".to_owned(),
            stream: "ledger".to_owned(),
            error: None,
            shards: BTreeMap::from([(
                "shardId-1".to_owned(),
                shard(ShardState::HandedOver("host-b".to_owned())),
            )]),
            hosts: BTreeMap::new(),
        };
        let json = serde_json::to_string(&status).expect("serializes");
        assert_eq!(
            json,
            r#"{"name":"book","stream":"ledger","error":null,"shards":[{"shard_id":"shardId-1","state":"handed over to host-b","owner":"host-a","checkpoint":"4959","held_at":null,"held_since_ms":7,"delivered":3,"outcomes":{"ack":3,"drop":0,"retry":0,"retry_after":0,"trapped":0,"foreign_copies":0},"millis_behind_latest":-1,"read":"fan-out","reads":null,"subscribed_since_ms":null,"paused":true}]}"#
        );
        let back: SubscriptionStatus = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, status);
        // A host from before read modes does not say: none, not an error.
        let older = json.replace(
            r#""read":"fan-out","reads":null,"subscribed_since_ms":null,"#,
            "",
        );
        let back: SubscriptionStatus = serde_json::from_str(&older).expect("parses");
        let read = back.shards.values().next().and_then(|s| s.read);
        assert_eq!(read, None);
    }

    #[test]
    fn every_state_reads_back_from_its_words() {
        for state in [
            ShardState::Opening,
            ShardState::Reading,
            ShardState::Finished,
            ShardState::Lost,
            ShardState::HandedOver("host-b".to_owned()),
            ShardState::Stopped,
            ShardState::Failed("stream deleted: gone".to_owned()),
        ] {
            assert_eq!(state.to_string().parse::<ShardState>(), Ok(state));
        }
        assert_eq!(
            "waiting".parse::<ShardState>(),
            Err(UnknownShardState("waiting".to_owned()))
        );
    }
}
