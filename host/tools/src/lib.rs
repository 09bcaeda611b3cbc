//! RustStream's tools: what the `ruststream` verbs other than `run` do, as a library.
//!
//! `ruststream-fleet` is the serving host; this crate is everything an operator or a tenant's
//! developer runs beside it: a component or a tenants file checked offline ([`check`]), the
//! developer's loop ([`dev`]) and a component judged against an expectations file
//! ([`testrun`]), both on the runtime's in-process `TestApp` (which is why this crate, and not
//! the host, enables the runtime's `testing` feature; [`streams`] is which streams exist for
//! them), streams read and written ([`tail`], [`put`]), dead letters sent back ([`redrive`]),
//! a tenant crate written from templates ([`new`]) and the admin API's client ([`client`]).
//! The layers only point down: common ← runtime ← kinesis ← fleet ← tools ← cli.
//!
//! # Example
//!
//! Pausing a tenant on a running host, as `ruststream pause acme` does:
//!
//! ```no_run
//! use ruststream_tools::client::{AdminClient, Credentials};
//! use ruststream_fleet::admin::token::AdminToken;
//!
//! # async fn pause() -> anyhow::Result<()> {
//! let token = AdminToken::read(std::path::Path::new("state/admin-token"))?;
//! let credentials = Credentials {
//!     token,
//!     token_from: "state/admin-token".to_owned(),
//!     ca: None,
//! };
//! let client = AdminClient::new("http://127.0.0.1:9465", credentials)?;
//! let paused = client.pause("acme").await?;
//! assert!(paused.paused);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod check;
pub mod client;
pub mod dev;
pub mod new;
pub mod put;
pub mod redrive;
pub mod streams;
pub mod tail;
pub mod testrun;
