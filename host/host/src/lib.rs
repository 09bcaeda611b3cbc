//! The RustStream host: runs components of `ruststream-runtime` against Amazon Kinesis.
//!
//! It owns what a tenant must not touch: reading shards (paced, retried, reopened where it
//! stood after an expired iterator), leases with fencing and graceful handoff, stored
//! checkpoints in memory or DynamoDB, children of split and merged shards, and the admin
//! hooks of a running app (status, seek, quarantine).
//!
//! ```no_run
//! # async fn demo(kinesis: aws_sdk_kinesis::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ruststream_host::{Deployment, Host, HostConfig, MemoryLeaseStore};
//! use ruststream_runtime::{LoadedComponent, Runtime, RuntimeConfig, Tenant, log::LogSink};
//!
//! let runtime = Runtime::new(RuntimeConfig::default())?;
//! let tenant = Arc::new(Tenant::trusted("acme"));
//! let log = LogSink::new();
//! let component =
//!     LoadedComponent::from_file(&runtime, "settlement.wasm", tenant.policy(), &log).await?;
//! let host = Host::new(kinesis, HostConfig::default());
//! let store = Arc::new(MemoryLeaseStore::new());
//! let app = host.start(Deployment::new(component, store).for_tenant(tenant))?;
//! // ... until SIGTERM:
//! app.shutdown().await; // stop reading, finish calls, flush checkpoints, release leases
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod kinesis;
mod lease;
pub mod metrics;
pub mod redrive;
mod runner;

/// An error of the SDK (or of the task running a call), kept whole as the cause of ours.
type Cause = Box<dyn std::error::Error + Send + Sync>;

pub use kinesis::{
    Batch, KinesisPublisher, MIN_READ_INTERVAL, ReadError, ReadPacing, ReadProgress, ReaderConfig,
    ReaderOwner, ShardInfo, ShardReader, SharedReads, StartAt, list_shards,
};
pub use lease::{
    AT_SEQUENCE_PREFIX, AT_TIMESTAMP_PREFIX, Checkpoint, Claim, DEFAULT_TABLE_TEMPLATE,
    DynamoLeaseStore, DynamoStoreStats, HeldLease, HostRecord, LeaseError, LeaseKey, LeaseRecord,
    LeaseStore, LeaseTable, MemoryLeaseStore, PRESENCE_PREFIX, PresenceKey, Renewal, SHARD_END,
    TRIM_HORIZON, TableTemplate, TemplateError,
};
pub use runner::{
    AppVersions, Deployment, Host, HostConfig, OperatorSettings, RolloutStatus, RunningApp,
    SeekError, ShardState, ShardStatus, SubscriptionStatus, SwapError, Swapped, VersionInfo,
};
