//! The admin API's JSON: what the server sends and accepts, and what the client verbs parse.
//!
//! Every type is both `Serialize` and `Deserialize` so the server and `ruststream status` share
//! one definition. Times are milliseconds since the Unix epoch; hashes and sequence numbers are
//! strings, as the host shows them.

use serde::{Deserialize, Serialize};

/// How a kept version came to be live (`file`, `upload`, `rollback`): the state directory's
/// word, shown as is.
pub use crate::state::versions::VersionOrigin;

/// `GET /v1/status`: this host, whether it is ready, and every tenant it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    /// This host's lease owner id.
    pub owner: String,
    /// True when `not_ready` is empty.
    pub ready: bool,
    /// Why the host is not ready; empty when it is.
    pub not_ready: Vec<String>,
    /// Every configured tenant, loaded or not.
    pub tenants: Vec<TenantStatus>,
}

/// One tenant: paused or not, its apps, and the components it was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantStatus {
    /// The tenant's name as configured.
    pub name: String,
    /// True while the tenant's handlers receive no records (paused or quarantined).
    pub paused: bool,
    /// Why it is paused (an operator, a quarantine); `None` when not paused.
    pub pause_reason: Option<String>,
    /// The tenant's running apps.
    pub apps: Vec<AppStatus>,
    /// Components the host refused to load for this tenant, oldest first.
    pub refused: Vec<Refusal>,
    /// The memory its instances on this host reserve (each its `memory_mib`), live and
    /// shadow, and its `memory_budget_mib` if it has one.
    #[serde(default)]
    pub instance_memory: ReservedMemory,
}

/// What a tenant's instances on a host reserve: the runtime's own type, sent as it is
/// (`live_bytes`, `shadow_bytes`, `budget_bytes`).
pub use ruststream_runtime::tenant::ReservedMemory;

/// A component the host refused to load, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The component's file or upload name.
    pub component: String,
    /// Why it was refused, one line.
    pub reason: String,
    /// When it was refused.
    pub at_ms: u64,
}

/// One running app: the version serving it, the one before, and how the newest is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppStatus {
    /// The app's name as its component declares it.
    pub name: String,
    /// The component's file or upload name.
    pub component: String,
    /// The app version the component declares.
    pub version: String,
    /// The hash of the component's bytes.
    pub content_hash: String,
    /// The version this one replaced, which a rollback returns to; `None` for a first version.
    pub previous: Option<VersionInfo>,
    /// How the current version is being judged, while it is; `None` once there is no rollout.
    pub rollout: Option<RolloutStatus>,
    /// How many times this app was rolled back, automatically or by an operator.
    pub rollbacks: u64,
    /// The app's subscriptions.
    pub subscriptions: Vec<SubscriptionStatus>,
    /// The version running beside the live one as a shadow, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowStatus>,
    /// What the fleet's desired state records for the app, as this host last read it (fleet
    /// deploys only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetVersion>,
}

/// An app's version as the fleet records it, and whether this host runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetVersion {
    /// The desired state's revision this host last read.
    pub revision: u64,
    /// The hash of the version it records as live; `None` once undeployed.
    pub live_hash: Option<String>,
    /// Whether this host runs that version.
    pub converged: bool,
    /// When this host last read the desired state (ms since the epoch).
    pub read_at_ms: u64,
    /// The rollout the fleet's judge decides, summed over every host's counts since it
    /// began; `None` when none is under way.
    #[serde(default)]
    pub rollout: Option<RolloutCounts>,
    /// The shadow's comparisons summed over every host; `None` when none runs.
    #[serde(default)]
    pub shadow: Option<ShadowTally>,
    /// Each host's part of those sums, as each last wrote it.
    #[serde(default)]
    pub hosts: Vec<HostTally>,
    /// What each host of the fleet runs of the app, as each last reported it (hosts that
    /// stopped reporting a few minutes ago are left out).
    #[serde(default)]
    pub running: Vec<HostRunning>,
}

/// One host's version of an app, as it reported it to the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRunning {
    /// The host (its owner id).
    pub host: String,
    /// The content hash of the version it runs; `None` when it runs none.
    pub hash: Option<String>,
    /// Whether that is the version the fleet records as live.
    pub converged: bool,
    /// When it reported it (ms since the epoch).
    pub reported_at_ms: u64,
}

pub use crate::desired::{HostTally, RolloutCounts, ShadowTally};

/// `PUT /v1/tenants/{tenant}/components/{name}/shadow`: the shadow now running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowDeployed {
    /// The tenant.
    pub tenant: String,
    /// The app it shadows.
    pub app: String,
    /// The component the app runs as.
    pub component: String,
    /// The shadow's app version.
    pub version: String,
    /// The hash of its bytes.
    pub content_hash: String,
    /// The percentage of records it is given.
    pub sample_percent: u32,
}

/// `DELETE /v1/tenants/{tenant}/apps/{app}/shadow`: whether a shadow was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowDropped {
    /// The tenant.
    pub tenant: String,
    /// The app.
    pub app: String,
    /// Whether a shadow ran (and was dropped).
    pub dropped: bool,
}

/// One version of an app's component: the runner's own type, sent as it is.
pub use ruststream_kinesis::runner::VersionInfo;

/// How a newly swapped-in version is being judged: the runner's own type, sent as it is.
pub use ruststream_kinesis::runner::RolloutStatus;

/// One subscription of an app and its shards: the runner's own status, whose serde attributes
/// give the wire form (`name`, `stream`, `error`, `shards` as a list).
pub use ruststream_kinesis::runner::SubscriptionStatus;

/// One shard of a subscription as this host sees it: the runner's own status (`shard_id`
/// first, the state in words, `paused` for a paused or quarantined tenant).
pub use ruststream_kinesis::runner::{ShardState, ShardStatus};

/// How a shard is read (`polling`, `fan-out`), and what a host asks of it: the reader's own
/// types.
pub use ruststream_kinesis::kinesis::{ReadMode, ShardReads};

/// A shadow version and how it compares with the live one so far, on this host: the runner's
/// own status (the counts flattened beside the version).
pub use ruststream_kinesis::runner::ShadowStatus;

/// One record the shadow handled otherwise than the live version: the runtime's own record.
pub use ruststream_runtime::shadow::Disagreement as ShadowDisagreement;

/// A shadow's records by result, and its skipped ones by reason: the runtime's own counts.
pub use ruststream_runtime::shadow::ShadowCounts;

/// Records counted by outcome: the runtime's own counts, sent as they are.
pub use ruststream_runtime::pipeline::OutcomeCounts;

/// A component version the host loaded (`PUT .../components/{name}`, reload, rollback).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    /// The tenant it was loaded for.
    pub tenant: String,
    /// The app it declares.
    pub app: String,
    /// Its file or upload name.
    pub component: String,
    /// The app version it declares.
    pub version: String,
    /// The hash of its bytes.
    pub content_hash: String,
    /// True when it replaced a running version; false when the app is new.
    pub swapped: bool,
}

/// `DELETE /v1/tenants/{tenant}/components/{name}`: what stopped for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undeployed {
    /// The tenant.
    pub tenant: String,
    /// The component.
    pub component: String,
    /// The app it ran.
    pub app: String,
}

/// `GET /v1/tenants/{tenant}/apps/{app}/versions`: the versions the host keeps of an app,
/// newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppVersionList {
    /// The tenant.
    pub tenant: String,
    /// The app.
    pub app: String,
    /// The kept versions, the one that went live last first.
    pub versions: Vec<KeptVersion>,
    /// Whether they are the fleet's (its desired state, alike on every host) rather than
    /// this host's state directory's.
    #[serde(default)]
    pub fleet: bool,
}

/// One kept version of an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptVersion {
    /// The hex SHA-256 of its bytes: what `rollback --to` takes (or a prefix of it).
    pub content_hash: String,
    /// The app version it declares.
    pub version: String,
    /// The component name it came under.
    pub component: String,
    /// When it last went live.
    pub at_ms: u64,
    /// How it came then.
    pub came_by: VersionOrigin,
    /// Whether it is the live one.
    pub live: bool,
}

/// The body of `POST .../rollback`: `{"to":"<hash or prefix>"}` for a given kept version;
/// no body (or `{}`) for the version the last swap replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackTo {
    /// The content hash (or a unique prefix of it) of the version to return to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// Where a seek moves a subscription's shards: the body of `POST .../seek`.
///
/// JSON, tagged by `at`: `{"at":"horizon"}`, `{"at":"latest"}`, `{"at":"timestamp","ms":N}`,
/// `{"at":"sequence","shard":"shardId-...","sequence":"4959..."}`. The first three move every
/// shard of the subscription; `sequence` moves only the shard named, and reads again from that
/// record on (inclusive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum SeekPosition {
    /// The oldest record each shard still holds.
    Horizon,
    /// The tip: only records written from now on.
    Latest,
    /// The first record written at or after `ms`.
    Timestamp {
        /// Milliseconds since the Unix epoch.
        ms: u64,
    },
    /// One shard, from one record on.
    Sequence {
        /// The shard to move.
        shard: String,
        /// The sequence number of the first record to read again.
        sequence: String,
    },
}

/// `POST .../seek`: the shards that moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// Their shard ids.
    pub moved: Vec<String>,
}

/// `POST /v1/tenants/{tenant}/pause` and `.../resume`: the tenant's state afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseState {
    /// The tenant.
    pub tenant: String,
    /// Whether it is now paused.
    pub paused: bool,
}

/// `GET /readyz`: `{"ready":true}`, or `{"ready":false,"reasons":[...]}`; `notices` says what
/// is worth knowing without making the host unready (a tenant an operator paused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    /// True when the host is ready.
    pub ready: bool,
    /// Why it is not; absent when ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// What is reported without failing readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// `POST /v1/redrives`: a redrive, as `ruststream redrive` takes it (the state directory
/// keeps it to resume it, so it is defined there).
pub use crate::state::redrives::RedriveRequest;

/// One redrive of `GET /v1/redrives`: whoever started it (the API, a verb, the console).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveListed {
    /// Its id.
    pub id: String,
    /// The dead-letter stream it reads.
    pub stream: String,
    /// The tenant whose dead letters it moves; `None` for every tenant's (an operator's).
    pub tenant: Option<String>,
    /// Whether it runs on this host now.
    pub running: bool,
    /// Its progress while it runs, else its last report (`null` for one the host stopped
    /// under, to resume).
    pub progress: serde_json::Value,
}

pub use crate::recent_errors::ErrorEvent;

/// `GET /v1/errors`: the warnings and errors this host logged lately, newest first; a tenant's
/// token sees its tenant's alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorList {
    /// The events.
    pub errors: Vec<ErrorEvent>,
}

/// `GET /v1/redrives`: the redrives this host keeps, by id; a tenant's token sees its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveList {
    /// The redrives.
    pub redrives: Vec<RedriveListed>,
}

/// The body of every error response: `{"error":"<one line>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, one line without control characters.
    pub error: String,
}

pub use crate::state::audit::AuditEntry;

/// `GET /v1/audit`: the changes this host took, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditList {
    /// Where the host keeps them (its audit file), or why it keeps none.
    pub kept_in: String,
    /// The entries the query asked for.
    pub entries: Vec<AuditEntry>,
}

/// The body of `POST /v1/tokens`: a token for `tenant`, called `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The tenant it reaches.
    pub tenant: String,
    /// What to call it (`ci`, a person's name).
    #[serde(default)]
    pub name: String,
}

/// A tenant token just made: the token itself is shown here once and kept nowhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMade {
    /// Its id, as lists and the audit trail name it.
    pub id: String,
    /// The tenant it reaches.
    pub tenant: String,
    /// What it is called.
    pub name: String,
    /// The token.
    pub token: String,
    /// Where it is kept (hashed).
    pub store: String,
}

/// One tenant token, as `GET /v1/tokens` lists it (never the token, nor its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Its id.
    pub id: String,
    /// The tenant it reaches.
    pub tenant: String,
    /// What it is called.
    pub name: String,
    /// When it was made (ms since the epoch).
    pub created_ms: u64,
    /// Which token made it, by id.
    pub created_by: String,
}

/// `GET /v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenList {
    /// Where they are kept.
    pub store: String,
    /// Every tenant token, in id order.
    pub tokens: Vec<TokenInfo>,
}

/// `DELETE /v1/tokens/{id}`: the token revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRevoked {
    /// Its id.
    pub id: String,
}

/// `GET /v1/history`: what the console plots, a bounded ring of samples per series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostHistory {
    /// How often a sample is taken (ms).
    pub interval_ms: u64,
    /// Each shard this host reads, `tenant/app/subscriber/shard`: ms behind the tip.
    pub lag: Vec<HistorySeries>,
    /// Each app, `tenant/app`: records a second its shards here delivered.
    pub rate: Vec<HistorySeries>,
}

/// One series: `[ms since the epoch, value]`, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistorySeries {
    /// What it is of.
    pub key: String,
    /// Its samples.
    pub points: Vec<(u64, f64)>,
}
