//! RustStream's fleet: what runs a fleet of tenants' components against Kinesis.
#![forbid(unsafe_code)]

pub mod admin;
pub mod aws;
pub mod check;
pub mod client;
pub mod config;
pub mod dev;
pub mod engine;
pub mod fleet;
mod http_server;
pub mod identity;
pub mod json_log;
pub mod metrics;
pub mod new;
pub mod put;
pub mod redrive;
pub mod run;
pub mod state;
pub mod tail;
pub mod testrun;
pub mod watch;
