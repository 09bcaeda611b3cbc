//! The RustStream runtime: untrusted tenant handlers, compiled to WebAssembly components, run
//! in a sandbox and settled per shard. It knows no transport: `ruststream-host` drives it from
//! Kinesis, and `TestApp` (feature `testing`) from in-process streams in paused time.
//!
//! A component (built with the `ruststream` guest SDK for `wasm32-wasip2`) declares its
//! subscriptions and answers each record with a handler outcome; see `wit/ruststream.wit`.
//! The runtime owns everything else, in the order a record meets it:
//!
//! - [`Runtime`] and [`LoadedComponent`]: compiling a component in a bounded worker, checking
//!   it, instantiating it under its tenant's [`SandboxPolicy`], validating what it declares;
//! - [`ShardPipeline`]: one shard of one subscription: calls per batch with a deadline per
//!   record, settlement of each [`Outcome`], counted copies, the checkpoint;
//! - [`Tenant`]: what a tenant is granted, its limits, its quarantine gate.
//!
//! ```no_run
//! use ruststream_runtime::{Outcome, TestApp};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut app = TestApp::start("settlement.wasm").await?;
//! app.publish("ledger", &serde_json::json!({ "id": 1, "amount": -5 })).await?;
//! let book = app.subscriber("book")?;
//! assert_eq!(book.outcomes(), [Outcome::Retry]);
//! assert_eq!(book.checkpoint(), None); // held in front of the refund
//! # Ok(()) }
//! ```

pub mod app;
pub mod backoff;
mod checkpoint;
pub mod clock;
pub mod component;
pub mod dead_letter;
pub mod env;
pub mod envelope;
pub mod escape;
mod limits;
pub mod log;
pub mod metrics;
pub mod outcome;
pub mod pipeline;
pub mod policy;
pub mod publish;
mod quota;
pub mod record;
pub mod rollout;
mod sequence;
mod stop;
pub mod sync;
pub mod tenant;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;

// The core types, at the root as well as in their modules (as wasmtime's `Engine` and `Store`).
pub use component::{LoadedComponent, Runtime, RuntimeConfig};
pub use outcome::Outcome;
pub use pipeline::ShardPipeline;
pub use record::Delivery;
pub use tenant::Tenant;
#[cfg(feature = "testing")]
pub use testing::TestApp;
