//! RustStream's fleet: the serving host, what runs a fleet of tenants' components against
//! Kinesis, as a library.
//!
//! `ruststream-runtime` runs components (pipeline, settlement, sandbox) and `ruststream-kinesis`
//! reads Kinesis for them (leases, checkpoints, the runner, redrives); this crate runs many
//! tenants on one host and operates it: the tenants file and its validation, the fleet and
//! its one reload path (start, file change, SIGHUP, upload, rollback), whose rights each
//! tenant's AWS calls run with (STS), the admin API (its `Control` surface, JSON model, HTTP
//! server, token, TLS), the state directory, the fleet's desired state (what every host runs,
//! with fleet deploys), the file watch and the metrics endpoint. The verbs beside `run`
//! (check, dev, test, tail, put, redrive, new) and the admin API's client are
//! `ruststream-tools`; the layers only point down: common ← runtime ← kinesis ← fleet ← tools
//! ← cli.
//!
//! # Embedding the host
//!
//! [`run::RunningHost`] is what `ruststream run` runs: a tenants file in, the host's control
//! surface out. The program must serve the compile worker ([`engine::WORKER_COMMAND`]), as
//! every host compiles components in a child process of its own program by default; an
//! embedder whose components are all trusted may compile them in its own process instead
//! ([`run::RunOptions::compile_in`] = [`engine::CompileIn::ThisProcess`]), and the host's
//! credentials may be given in hand ([`aws::AwsOptions::credentials`]). The tests crate's
//! `embed` tests run one that way against the local servers.
//!
//! ```no_run
//! use std::process::ExitCode;
//!
//! use ruststream_fleet::admin::control::Control as _;
//! use ruststream_fleet::engine::{WORKER_COMMAND, compile_worker};
//! use ruststream_fleet::run::{RunOptions, RunningHost};
//!
//! fn main() -> ExitCode {
//!     if std::env::args().nth(1).as_deref() == Some(WORKER_COMMAND) {
//!         return compile_worker(std::env::args().skip(2));
//!     }
//!     let done = tokio::runtime::Runtime::new()
//!         .map_err(anyhow::Error::from)
//!         .and_then(|runtime| runtime.block_on(host()));
//!     match done {
//!         Ok(()) => ExitCode::SUCCESS,
//!         Err(error) => {
//!             eprintln!("error: {error:#}");
//!             ExitCode::FAILURE
//!         }
//!     }
//! }
//!
//! async fn host() -> anyhow::Result<()> {
//!     let options = RunOptions {
//!         config: Some("tenants.toml".into()),
//!         // No admin API: this program drives the host itself.
//!         admin_addr: None,
//!         ..RunOptions::default()
//!     };
//!     let host = RunningHost::start(options).await?;
//!     for tenant in host.control().status().tenants {
//!         println!("{}: {} apps", tenant.name, tenant.apps.len());
//!     }
//!     host.control().pause("acme").await?;
//!     // Runs (reloading when the tenants file or a component file changes) until Ctrl-C, then
//!     // stops every app with its checkpoints flushed.
//!     host.run_until(async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await?;
//!     Ok(())
//! }
//! ```
//!
//! A remote host is driven over its admin API with `ruststream_tools::client::AdminClient`.
//!
//! # Modules
//!
//! The host: [`run`] (start, run, stop), [`config`] (the tenants file), [`Fleet`] (the tenants
//! running and the reload path), [`identity`] and [`aws`] (the AWS clients, a tenant's assumed
//! role), [`engine`] (the runtime components compile and run on), [`state`] (the state
//! directory: token, kept versions), [`watch`] (the debounced file watch), [`metrics`]
//! (`GET /metrics`), [`admin`] (the admin API), [`json_log`] (`--log-format json`) and
//! [`escape`] (text from components and the network made safe for an operator's terminal).

#![forbid(unsafe_code)]

pub mod admin;
pub mod aws;
pub mod config;
pub mod desired;
pub mod engine;
pub mod escape;
mod fleet;
mod http_server;
pub mod identity;
pub mod json_log;
pub mod metrics;
pub mod recent_errors;
pub mod run;
pub mod settings;
pub mod state;
pub mod tokens;
pub mod watch;

pub use fleet::Fleet;
