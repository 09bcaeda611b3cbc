//! The RustStream host: runs untrusted tenant handlers, compiled to WebAssembly components,
//! against Kinesis streams.
//!
//! The host owns everything a tenant must not touch: reading shards, leases, per-shard
//! checkpoint bookkeeping, counted copies and dead letters, and the sandbox's limits. A
//! component (built with the `ruststream` guest SDK for `wasm32-wasip2`) only declares its
//! subscriptions and answers each record with a handler outcome; see `wit/ruststream.wit`.
//!
//! The parts, in the order a record meets them:
//!
//! - [`component`]: loading and checking a component, instantiating it in the sandbox,
//!   calling it once per batch, replacing a trapped instance;
//! - [`pipeline`]: one shard of one subscription: delivery, settlement, the checkpoint;
//! - [`settlement`]: the rules that turn an outcome into a disposition;
//! - [`checkpoint`]: the watermark over a shard's deliveries;
//! - [`envelope`] and [`record`]: records as they travel, with the seed's `RSK2` headers;
//! - [`testapp`]: the same runtime over in-process streams in paused time, for tests.
//!
//! ```no_run
//! use ruststream_host::settlement::Outcome;
//! use ruststream_host::testapp::TestApp;
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
pub mod checkpoint;
pub mod clock;
pub mod component;
pub mod envelope;
pub mod escape;
pub mod kinesis;
pub mod lease;
pub mod log;
pub mod pipeline;
pub mod publish;
pub mod quota;
pub mod record;
pub mod runner;
mod sdk_error;
pub mod settlement;
pub mod tenant;
pub mod testapp;
