//! The RustStream runtime: untrusted tenant handlers, compiled to WebAssembly components, run
//! in a sandbox and settled per shard. It knows no transport: `ruststream-kinesis` drives it from
//! Kinesis, and `TestApp` (feature `testing`) from in-process streams in paused time.
//!
//! A component (built with the `ruststream` guest SDK for `wasm32-wasip2`) declares its
//! subscriptions and answers each record with a handler outcome; see `wit/ruststream.wit`.
//! The runtime owns everything else, in the order a record meets it:
//!
//! - [`component`]: [`Runtime`] and [`LoadedComponent`]: compiling a component in a bounded
//!   worker ([`component::compile`]), checking it, instantiating it under its tenant's
//!   [`SandboxPolicy`](policy::SandboxPolicy), validating what it declares ([`app`]);
//! - [`pipeline`]: [`ShardPipeline`], one shard of one subscription: calls per batch with a
//!   deadline per record, settlement of each [`Outcome`] ([`outcome`]), counted copies and
//!   dead letters ([`dead_letter`]), the checkpoint; records come in and go out as
//!   [`record`]s, written through a transport's [`publish::Publisher`];
//! - [`tenant`] and [`policy`]: what a tenant is granted, its limits, its quarantine gate;
//!   [`rollout`]: judging a new version against the one it replaced;
//! - [`log`] and [`metrics`]: what components say and what the runtime decides, for the
//!   embedder's `tracing` subscriber and metrics recorder;
//! - [`envelope`]: the `RSK2` record format on the stream, shared with native RustStream
//!   services;
//! - `testing` (feature `testing`): `TestApp` and paused time, for tenants' tests.
//!
//! - [`Clock`]: the wall clock that due times of delayed copies are read from, the system's
//!   ([`SystemClock`]) or a test's.
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
//!
//! # The compile worker
//!
//! A few kilobytes of hostile WebAssembly can keep Cranelift busy for minutes or make it
//! allocate gigabytes, so by default ([`RuntimeConfig::default`], [`Compiler::default`]) a
//! component is compiled in a child process bounded by `setrlimit` (address space, CPU time)
//! and a timeout, and this process only loads the artifact. The child is **this program**
//! ([`std::env::current_exe`]) run as `PROGRAM compile-worker FLAGS`; it reads the component
//! on stdin and writes the artifact on stdout. So a program that embeds the runtime serves
//! the worker: before anything else, its `main` checks for
//! [`WORKER_COMMAND`](component::compile::WORKER_COMMAND) as its first argument and hands the
//! rest to [`compile_worker`](component::compile::compile_worker), which never returns to the
//! program's own work. (`Compiler::Worker { program }` names another executable that does.)
//!
//! ```no_run
//! use std::process::ExitCode;
//!
//! use ruststream_runtime::component::compile::{WORKER_COMMAND, compile_worker};
//! use ruststream_runtime::log::LogSink;
//! use ruststream_runtime::{LoadedComponent, Runtime, RuntimeConfig, Tenant};
//!
//! fn main() -> ExitCode {
//!     if std::env::args().nth(1).as_deref() == Some(WORKER_COMMAND) {
//!         return compile_worker(std::env::args().skip(2));
//!     }
//!     let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build();
//!     let result = tokio.map_err(Box::from).and_then(|tokio| tokio.block_on(serve()));
//!     match result {
//!         Ok(()) => ExitCode::SUCCESS,
//!         Err(error) => {
//!             eprintln!("error: {error}");
//!             ExitCode::FAILURE
//!         }
//!     }
//! }
//!
//! async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//!     // Compiles in a bounded worker: this very program, started again as above.
//!     let runtime = Runtime::new(RuntimeConfig::default())?;
//!     let tenant = Tenant::trusted("acme");
//!     let log = LogSink::new();
//!     let component =
//!         LoadedComponent::from_file(&runtime, "settlement.wasm", tenant.policy(), &log).await?;
//!     println!("{} subscriptions", component.app().subscriptions.len());
//!     Ok(())
//! }
//! ```
//!
//! Compiling in this process ([`Compiler::InProcess`], [`RuntimeConfig::in_process`]) is an
//! explicit opt-in for code whose author is trusted: `TestApp` uses it by default (a tenant
//! testing its own component), as do this workspace's benchmarks.
//!
//! [`Compiler::default`]: component::compile::Compiler::default
//! [`Compiler::InProcess`]: component::compile::Compiler::InProcess

pub mod app;
mod checkpoint;
mod clock;
pub mod component;
pub mod cpu;
pub mod dead_letter;
mod env;
pub mod envelope;
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
pub mod shadow;
mod stop;
pub mod tenant;
#[cfg(feature = "testing")]
pub mod testing;
mod text;

// The core types, at the root as well as in their modules (as wasmtime's `Engine` and `Store`).
pub use clock::{Clock, SystemClock};
pub use component::{LoadedComponent, Runtime, RuntimeConfig};
pub use outcome::Outcome;
pub use pipeline::ShardPipeline;
pub use record::Delivery;
pub use tenant::Tenant;
#[cfg(feature = "testing")]
pub use testing::TestApp;
