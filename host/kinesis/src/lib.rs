//! The Kinesis side of RustStream: runs components of `ruststream-runtime` against Amazon
//! Kinesis.
//!
//! It owns what a tenant must not touch: reading shards (paced, retried, reopened where it
//! stood after an expired iterator), leases with fencing and graceful handoff, stored
//! checkpoints in memory or DynamoDB, children of split and merged shards, and the admin
//! hooks of a running app (status, seek, quarantine).
//!
//! - [`kinesis`]: listing shards, the paced and shared shard readers, publishing records;
//! - [`lease`]: lease stores (in memory, DynamoDB) with fencing, stored checkpoints, presence
//!   rows, and the lease keeper that renews a held lease;
//! - [`runner`]: running an app ([`Host`], [`Deployment`], [`RunningApp`]): coordinators,
//!   shard workers, swaps and rollbacks, operator settings, status and seek;
//! - [`redrive`]: writing dead letters back to the stream they came from, each exactly once;
//! - [`metrics`]: the host's metric names and labels.
//! - [`dynamo_table`]: a DynamoDB table of one string key, made when missing (the lease
//!   table, and the fleet's desired state).
//!
//! The runtime compiles components in its bounded worker by default: the program embedding
//! the host serves it from `main` (see the `ruststream_runtime` crate docs, "The compile
//! worker").
//!
//! ```no_run
//! # async fn demo(kinesis: aws_sdk_kinesis::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ruststream_kinesis::{Deployment, Host, HostConfig, MemoryLeaseStore};
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

pub mod dynamo_table;
pub mod kinesis;
pub mod lease;
pub mod metrics;
pub mod redrive;
pub mod runner;

/// An error of the SDK (or of the task running a call), kept whole as the cause of ours.
type Cause = Box<dyn std::error::Error + Send + Sync>;

// The types a deployment needs, at the root as well as in their modules.
pub use lease::{DynamoLeaseStore, LeaseStore, MemoryLeaseStore};
pub use runner::{Deployment, Host, HostConfig, RunningApp};
