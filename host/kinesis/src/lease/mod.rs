//! Leases and stored checkpoints: which host reads a shard, and where its subscription stands.
//!
//! One lease row per shard (per subscription) holds its owner, an expiry, a **fencing counter**
//! that every write increments, and the checkpoint. Every write a holder makes is conditional on
//! the owner *and* the counter it last saw, so a host whose lease was taken over cannot write
//! again: its next renewal or checkpoint fails, and it stops delivering that shard at once.
//!
//! Expiry is judged the KCL way, not by trusting wall clocks: a lease held by someone else is
//! expired when its counter has not moved for the lease duration as seen by the observer's own
//! monotonic clock; taking it over is conditional on that same counter. The row also carries
//! `lease_expiry` (wall clock, epoch ms), which native RustStream services read.
//!
//! A store serves one namespace (a tenant's app), so two apps reading one stream keep separate
//! checkpoints. Keys are `stream:shard`, the seed's layout, so a table written by native
//! services is readable. Rows keyed by a bare shard id (as `ruststream-kinesis` 0.6 wrote them)
//! say no stream: a listing refuses them ([`LeaseError::LegacyRows`]) rather than ignore them.
//!
//! Next to the leases, each host reading a subscription keeps a **presence row** (key
//! `#host/<scope>/<owner>`, see [`PresenceKey`]), renewed like a lease, so that every host knows
//! every live host of the subscription, also those that hold no lease yet: a host's fair share
//! counts them.

mod dynamo;
pub(crate) mod keeper;
mod memory;
mod namespace;

pub use dynamo::{DynamoLeaseStore, DynamoStoreStats};
pub use memory::MemoryLeaseStore;
pub use namespace::{DEFAULT_TABLE_TEMPLATE, TableTemplate, TemplateError};

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ruststream_runtime::{Clock, SystemClock};

/// What each [`LeaseStore`] call returns: the call's result, as a boxed future, since the
/// store is used as `dyn LeaseStore` (which an `async fn` in a trait cannot be).
pub type LeaseFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LeaseError>> + Send + 'a>>;

/// The checkpoint of a shard that was read to its end (after a split or merge); its children
/// may start.
pub const SHARD_END: &str = "SHARD_END";

/// The checkpoint of a shard that starts at its oldest record: a child whose parent this
/// namespace read to its end.
pub const TRIM_HORIZON: &str = "TRIM_HORIZON";

/// The checkpoint of a shard opened at a time an operator gave that has no handled record
/// yet: `AT_TIMESTAMP:<ms since the epoch>`.
pub const AT_TIMESTAMP_PREFIX: &str = "AT_TIMESTAMP:";

/// The checkpoint of a shard opened at the tip whose first record was read but not handled
/// yet: `AT_SEQUENCE:<that record's sequence number>`, stored before the record is delivered,
/// so a restart reads from that record on. A position the stream gave, never a host's clock.
pub const AT_SEQUENCE_PREFIX: &str = "AT_SEQUENCE:";

/// What a stored checkpoint says: a sequence number, or one of the positions above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpoint {
    /// After this record.
    Sequence(String),
    /// The shard was read to its end.
    ShardEnd,
    /// From the shard's oldest record.
    TrimHorizon,
    /// From the records that arrived at or after this time (ms since the epoch).
    AtTimestamp(u64),
    /// From this record on, itself included.
    AtSequence(String),
}

impl Checkpoint {
    /// Reads a stored checkpoint.
    pub fn parse(stored: &str) -> Self {
        match stored {
            SHARD_END => Self::ShardEnd,
            TRIM_HORIZON => Self::TrimHorizon,
            other => {
                if let Some(ms) = other
                    .strip_prefix(AT_TIMESTAMP_PREFIX)
                    .and_then(|ms| ms.parse().ok())
                {
                    Self::AtTimestamp(ms)
                } else if let Some(sequence) = other
                    .strip_prefix(AT_SEQUENCE_PREFIX)
                    .filter(|s| !s.is_empty())
                {
                    Self::AtSequence(sequence.to_owned())
                } else {
                    Self::Sequence(other.to_owned())
                }
            }
        }
    }
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sequence(sequence) => f.write_str(sequence),
            Self::ShardEnd => f.write_str(SHARD_END),
            Self::TrimHorizon => f.write_str(TRIM_HORIZON),
            Self::AtTimestamp(ms) => write!(f, "{AT_TIMESTAMP_PREFIX}{ms}"),
            Self::AtSequence(sequence) => write!(f, "{AT_SEQUENCE_PREFIX}{sequence}"),
        }
    }
}

/// Identifies one shard of one subscription in a lease store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    stream: Arc<str>,
    shard_id: Arc<str>,
    /// Set only when several subscriptions of one app read the same stream.
    subscriber: Option<Arc<str>>,
}

impl LeaseKey {
    /// The key of `shard_id` of `stream`: `stream:shard`.
    pub fn new(stream: &str, shard_id: &str) -> Self {
        Self {
            stream: stream.into(),
            shard_id: shard_id.into(),
            subscriber: None,
        }
    }

    /// The key of a subscription that shares its stream with another of the same app:
    /// `stream:shard@subscriber`.
    pub fn for_subscriber(stream: &str, shard_id: &str, subscriber: &str) -> Self {
        Self {
            subscriber: Some(subscriber.into()),
            ..Self::new(stream, shard_id)
        }
    }

    /// The stream of the shard.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The shard.
    pub fn shard_id(&self) -> &str {
        &self.shard_id
    }

    /// The subscription the key belongs to, as presence rows name it: `stream`, or
    /// `stream@subscriber`.
    pub fn scope(&self) -> String {
        match &self.subscriber {
            Some(subscriber) => format!("{}@{subscriber}", self.stream),
            None => self.stream.to_string(),
        }
    }
}

impl fmt::Display for LeaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.stream, self.shard_id)?;
        if let Some(subscriber) = &self.subscriber {
            write!(f, "@{subscriber}")?;
        }
        Ok(())
    }
}

/// The start of every presence row's key. No lease key begins with it: a stream name holds
/// only `[A-Za-z0-9_.-]`, and a bare shard id (a legacy row) starts with `shardId-`.
pub const PRESENCE_PREFIX: &str = "#host/";

/// Names a host's presence among the readers of one subscription (its scope, see
/// [`LeaseKey::scope`]): `#host/<scope>/<owner>`.
///
/// A presence row holds `lease_owner`, `lease_expiry` and a `lease_counter` that every renewal
/// bumps, like a lease, and the scope; never a checkpoint. Hosts judge it live the way they
/// judge leases: while its counter moves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PresenceKey {
    scope: Arc<str>,
    owner: Arc<str>,
}

impl PresenceKey {
    /// The presence of `owner` among the readers of `scope`.
    pub fn new(scope: &str, owner: &str) -> Self {
        Self {
            scope: scope.into(),
            owner: owner.into(),
        }
    }

    /// The subscription: `stream` or `stream@subscriber`.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The host.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

impl fmt::Display for PresenceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PRESENCE_PREFIX}{}/{}", self.scope, self.owner)
    }
}

/// A presence row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRecord {
    /// The row's key as stored (`#host/<scope>/<owner>`).
    pub key: String,
    /// The subscription the host reads.
    pub scope: String,
    /// The host.
    pub owner: String,
    /// Bumped by every renewal.
    pub counter: u64,
    /// Wall-clock expiry (epoch ms) written by the host; informational.
    pub expiry_ms: Option<u64>,
}

/// Every row of a namespace, as one listing found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseTable {
    /// The lease rows.
    pub leases: Vec<LeaseRecord>,
    /// The presence rows, of every scope.
    pub hosts: Vec<HostRecord>,
}

/// The wall-clock expiry written with a lease: now + `ttl`, in ms since the epoch. Only
/// native services read it; we judge expiry by observing the fencing counter.
pub(crate) fn expiry_ms(ttl: Duration) -> u64 {
    SystemClock.now_ms().saturating_add(ttl.as_millis() as u64)
}

/// A lease row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The row's key as stored (`stream:shard`).
    pub key: String,
    /// The host holding it; none once released.
    pub owner: Option<String>,
    /// Wall-clock expiry (epoch ms) written by the owner; informational for us.
    pub expiry_ms: Option<u64>,
    /// The fencing counter: incremented by every write.
    pub counter: u64,
    /// The stored position: a sequence number, or a marker ([`Checkpoint`] reads both).
    pub checkpoint: Option<String>,
    /// The host that asked the owner to hand the lease over (balancing), if any.
    pub wanted_by: Option<String>,
    /// The last fleet seek carried out on the shard ([`LeaseStore::mark_seek`]), if any.
    pub seek_mark: Option<u64>,
}

/// What a renewal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    /// Whether the lease is still held (`false`: taken over or released by someone else).
    pub held: bool,
    /// The host that asked for it to be handed over, if one did.
    pub wanted_by: Option<String>,
}

/// A lease this host holds, with the counter of its last write (its fencing token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    /// The shard it is for.
    pub key: LeaseKey,
    /// This host.
    pub owner: String,
    /// The counter of this host's last write: every write is conditional on it.
    pub counter: u64,
    /// The checkpoint stored when the lease was taken.
    pub checkpoint: Option<String>,
    /// The last fleet seek carried out on the shard, as stored when the lease was taken or
    /// written since by this holder ([`LeaseStore::mark_seek`]).
    pub seek_mark: Option<u64>,
}

/// The condition under which [`LeaseStore::acquire`] takes a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The lease has no owner (or no row exists), or it is already ours (a restart with a
    /// fixed owner id).
    Free,
    /// Take it over from whoever holds it, provided its counter is still exactly this value:
    /// the caller observed it unchanged for the lease duration (expired), or is balancing.
    Observed(u64),
}

/// A lease store failed (not: a condition did not hold, which is a normal `false`/`None`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The lease table does not exist.
    #[error("lease table `{table}` does not exist")]
    NoTable {
        /// The table.
        table: String,
    },
    /// The lease table was created but did not become active in time.
    #[error("lease table `{table}` did not become active within a minute")]
    NotActive {
        /// The table.
        table: String,
    },
    /// The store's backend failed; the cause is its own error (an SDK error stays one).
    #[error("lease store `{store}`: {operation} on `{key}` failed")]
    Backend {
        /// The store, as [`LeaseStore::describe`] names it.
        store: String,
        /// The backend operation.
        operation: &'static str,
        /// The lease key, when the call was about one.
        key: String,
        /// What the backend said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A row of the table is not a lease row this host can read.
    #[error("lease row `{key}` is malformed: {reason}")]
    Malformed {
        /// The row's key (`?` when it has none).
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store did not answer in time; the call may or may not have taken effect.
    #[error("the lease store did not answer within {0:?}")]
    Timeout(Duration),
    /// The table holds rows keyed by a bare shard id, as `ruststream-kinesis` 0.6 wrote them.
    /// They do not say which stream they are for, so no lease of the table is taken until an
    /// operator migrates or deletes them.
    #[error(
        "lease table `{table}` holds {} row(s) keyed by a bare shard id ({}), written by \
         ruststream-kinesis 0.6 without their stream: no lease is taken until they are \
         migrated. With the 0.6 services stopped, run \
         `DynamoLeaseStore::adopt_legacy_rows(<stream>)` (a table of one stream), or rename each \
         row to `<stream>:<shard id>`, or delete them",
        keys.len(),
        sample(keys)
    )]
    LegacyRows {
        /// The table.
        table: String,
        /// The bare keys found.
        keys: Vec<String>,
    },
    /// A legacy row is still held by a live owner (a 0.6 service still runs), so it cannot be
    /// migrated yet.
    #[error(
        "lease table `{table}`: legacy row `{key}` is held by `{owner}` until {expiry_ms} (epoch \
         ms); stop the 0.6 services before migrating their rows"
    )]
    LegacyRowHeld {
        /// The table.
        table: String,
        /// The bare key.
        key: String,
        /// Its owner.
        owner: String,
        /// Its expiry as written.
        expiry_ms: u64,
    },
}

/// The first few of `keys`, for an error line.
fn sample(keys: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut shown = keys
        .iter()
        .take(SHOWN)
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > SHOWN {
        shown.push_str(&format!(" and {} more", keys.len() - SHOWN));
    }
    shown
}

/// Whether `key` is a lease row keyed by a bare shard id (`ruststream-kinesis` 0.6): neither a
/// `stream:shard` key nor a presence row.
pub(crate) fn is_legacy_key(key: &str) -> bool {
    !key.contains(':') && !key.starts_with(PRESENCE_PREFIX)
}

/// Where leases and checkpoints live. One store serves one namespace (a tenant's app).
///
/// Every mutating call is conditional: `Ok(None)`/`Ok(false)` means the condition did not hold
/// (someone else holds the lease, or this holder was fenced off); `Err` means the store itself
/// failed and the caller may retry.
pub trait LeaseStore: Send + Sync + 'static {
    /// A short description for logs (`memory`, `dynamodb:table`).
    fn describe(&self) -> String;

    /// Every row of the namespace, leases and presence rows, in one listing.
    ///
    /// # Errors
    /// [`LeaseError::LegacyRows`] when the table holds rows keyed by a bare shard id; a
    /// malformed row; the store failed.
    fn list_all(&self) -> LeaseFuture<'_, LeaseTable>;

    /// Every lease row of the namespace (no presence rows), with the errors of
    /// [`list_all`](Self::list_all).
    fn list(&self) -> LeaseFuture<'_, Vec<LeaseRecord>> {
        Box::pin(async move { Ok(self.list_all().await?.leases) })
    }

    /// One lease row, if it exists.
    fn read<'a>(&'a self, key: &'a LeaseKey) -> LeaseFuture<'a, Option<LeaseRecord>>;

    /// Takes the lease for `owner` under `claim`, setting its expiry to now + `ttl`.
    fn acquire<'a>(
        &'a self,
        key: &'a LeaseKey,
        owner: &'a str,
        ttl: Duration,
        claim: Claim,
    ) -> LeaseFuture<'a, Option<HeldLease>>;

    /// Extends a held lease, and says whether another host asked for it to be handed over.
    fn renew<'a>(&'a self, lease: &'a mut HeldLease, ttl: Duration) -> LeaseFuture<'a, Renewal>;

    /// Stores `sequence` as the checkpoint of a held lease (and extends it).
    /// `false`: the lease was lost; nothing was written.
    fn checkpoint<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        sequence: &'a str,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool>;

    /// Stores `checkpoint`, where a seek moved the shard, together with `mark`, the seek's
    /// id, in one write (and extends the lease). A later take of the shard reads the mark
    /// back ([`HeldLease::seek_mark`]) and so knows the seek was carried out here: a fleet
    /// seek moves each shard once, whichever host holds it when. Checkpoint writes keep the
    /// mark. `false`: the lease was lost; nothing was written.
    fn mark_seek<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        checkpoint: &'a str,
        mark: u64,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool>;

    /// Gives a held lease up, keeping its checkpoint. `false`: it was already lost.
    fn release(&self, lease: HeldLease) -> LeaseFuture<'_, bool>;

    /// Asks `holder` to hand the lease over to `taker` (balancing): marks the row, without
    /// touching its counter, so the holder goes on until it hands over.
    ///
    /// The request is conditional: it is written only while `holder` holds the lease and no
    /// other host's request stands. `true`: the row now holds `taker`'s request (also when it
    /// already did: asking again is harmless). `false`: `holder` no longer holds the lease, or
    /// another taker asked first; that request stands until the holder hands the lease over or
    /// lets it go (release, loss or a new owner clear it), and a second taker does not
    /// overwrite it. A taker that asked and then died is handed the lease all the same; the
    /// lease then sits with a host that never renews it and expires for others to take, as the
    /// lease of any host that dies does.
    fn request_handoff<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        taker: &'a str,
    ) -> LeaseFuture<'a, bool>;

    /// Hands a held lease over to `to`, keeping its checkpoint: `to` then takes it as its own
    /// (an acquire with [`Claim::Free`]). `false`: it was already lost.
    fn hand_off<'a>(&'a self, lease: HeldLease, to: &'a str) -> LeaseFuture<'a, bool>;

    /// Says that `presence`'s host reads its scope: creates the presence row or bumps its
    /// counter, and sets its expiry to now + `ttl`. Only that host writes the row.
    fn announce<'a>(&'a self, presence: &'a PresenceKey, ttl: Duration) -> LeaseFuture<'a, ()>;

    /// Deletes a presence row: with `None`, whatever it holds (a host's own row, at a graceful
    /// stop); with `Some(counter)`, only while its counter is still `counter` (another host's
    /// row, observed unchanged long enough to be dead). `false`: there was no such row, or its
    /// counter moved.
    fn withdraw<'a>(
        &'a self,
        presence: &'a PresenceKey,
        counter: Option<u64>,
    ) -> LeaseFuture<'a, bool>;

    /// Sets `checkpoint` on the row of `key` (creating it) unless it has one: where a shard
    /// with no handled record starts; with `mark`, the last fleet seek its parent carried
    /// out, which the child then counts as carried out too. The counter is not touched.
    /// `false`: it had one.
    fn seed_checkpoint<'a>(
        &'a self,
        key: &'a LeaseKey,
        checkpoint: &'a str,
        mark: Option<u64>,
    ) -> LeaseFuture<'a, bool>;
}
