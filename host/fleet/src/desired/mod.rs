//! The fleet's desired state: what every host of a lease namespace should run, kept where all
//! of them read it instead of on one host's disk.
//!
//! - [`DesiredTable`]: one DynamoDB item per (tenant, app), beside the lease tables: the live
//!   version (its content hash), the versions kept for a rollback, a shadow and its sample, a
//!   pause, the rollout under way. Every change is a conditional write on the item's
//!   `revision`, so two operators changing one app at once cannot interleave: the later one is
//!   refused with what it raced ([`DesiredError::Raced`]), and the item always holds one
//!   change whole.
//! - [`ComponentBucket`]: the component bytes, content-addressed in an S3 bucket
//!   (`components/sha256/<hash>.wasm`); what is read back is checked against its hash.
//!
//! - [`HostTally`]: beside them, each host's counts of an app's rollout and shadow (written
//!   only while one is under way), which one judge, elected through a lease item
//!   ([`DesiredTable::claim_judge`]), sums to decide a rollout for every host.
//!
//! A host whose tenants file names a component bucket (`[host] component_bucket`) records
//! each deploy through its admin API here and polls the table for what to run
//! (`fleet/deploys.rs`).
//!
//! ```no_run
//! # async fn demo(dynamo: aws_sdk_dynamodb::Client, s3: aws_sdk_s3::Client) -> Result<(), ruststream_fleet::desired::DesiredError> {
//! use ruststream_fleet::desired::{AppId, ComponentBucket, DesiredTable, LiveVersion};
//!
//! let bytes = std::fs::read("books_v2.wasm").unwrap_or_default();
//! let bucket = ComponentBucket::new(s3, "acme-components");
//! let hash = bucket.put(&bytes).await?;
//! let table = DesiredTable::new(dynamo, "ruststream.desired");
//! table.create_if_missing().await?;
//! let app = AppId::new("acme", "books");
//! let seen = table.get(&app).await?;
//! let changed = table
//!     .change(&app, seen.as_ref().map(|s| s.revision), "operator", |state| {
//!         state.go_live(LiveVersion::new(&hash, "2.0.0"), 10);
//!     })
//!     .await?;
//! assert_eq!(changed.live.map(|live| live.hash), Some(hash));
//! # Ok(()) }
//! ```

mod bucket;
mod state;
mod table;
mod tally;

pub use bucket::ComponentBucket;
pub use state::{AppDesired, AppId, Came, FleetSeek, LiveVersion, Rollout, SeekTarget, Shadow};
pub use table::{DesiredTable, Snapshot};
pub use tally::{
    HostReport, HostTally, RolloutCounts, RunningVersion, ShadowTally, rollout_sum, shadow_sum,
};

/// The desired-state table's name unless `[host] desired_table` says otherwise.
pub const DESIRED_TABLE: &str = "ruststream.desired";

/// Calls this host made to the fleet's desired-state table, by `operation` (`Scan`,
/// `GetItem`, `PutItem`): what following the fleet costs at rest and under change.
pub const DESIRED_STATE_CALLS: &str = "ruststream_desired_state_calls_total";

/// Counts one call to the desired-state table.
fn count_call(operation: &'static str) {
    metrics::counter!(DESIRED_STATE_CALLS, "operation" => operation).increment(1);
}

/// What failed in the desired-state stores, naming the table or bucket and the app or hash.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    /// Another change of the app was recorded since `seen` was read: this one is refused
    /// whole; `now` is what the item holds (the change it raced).
    #[error(
        "`{app}` changed since revision {seen}: revision {} by {} is recorded; nothing of this change was applied",
        now.revision,
        now.changed_by
    )]
    Raced {
        /// The app.
        app: AppId,
        /// The revision the change was made from (0: none recorded).
        seen: u64,
        /// What the item holds now.
        now: Box<AppDesired>,
    },
    /// An item of the table is not a desired state this host reads (written by a newer host,
    /// or by hand).
    #[error("desired-state table `{table}`: the item of `{key}` cannot be read: {reason}")]
    Unreadable {
        /// The table.
        table: String,
        /// The item's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The table did not become active within a minute of being created.
    #[error("desired-state table `{table}` did not become active")]
    NotActive {
        /// The table.
        table: String,
    },
    /// A component's bytes are not in the bucket.
    #[error("component {hash} is not in bucket `{bucket}`")]
    Missing {
        /// The bucket.
        bucket: String,
        /// The content hash asked for.
        hash: String,
    },
    /// The bytes stored under a hash are not the bytes of that hash: refused, never run.
    #[error("component {hash} in bucket `{bucket}` has been altered: its bytes hash to {found}")]
    Altered {
        /// The bucket.
        bucket: String,
        /// The content hash asked for.
        hash: String,
        /// The hash of the bytes found.
        found: String,
    },
    /// DynamoDB or S3 refused or failed a call.
    #[error("{store}: {operation} on `{target}` failed")]
    Backend {
        /// The table or bucket.
        store: String,
        /// The call.
        operation: &'static str,
        /// The item or object it was about.
        target: String,
        /// The SDK's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
