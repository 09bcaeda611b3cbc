//! Real AWS-compatible servers on 127.0.0.1 for tests.
//!
//! - [`LocalKinesis`] runs `kinesis-local` (kinesis-mock) and [`LocalDynamo`] runs `dynalite`,
//!   each as its own `node` process on an OS-picked loopback port, so any number of tests and
//!   test binaries can run side by side. The process is killed when the value is dropped (also
//!   while a failing test unwinds) and exits by itself if the test process dies.
//! - [`LocalSts`] runs moto's STS server as a Python process, from a virtualenv of pinned
//!   packages (`tests/servers/requirements.txt`) installed on first use, for the tests of
//!   tenants' assumed roles.
//! - [`sdk_config`] is the client configuration for any of them: region `us-east-1`, static
//!   test credentials, an explicit loopback endpoint.
//! - Faults are injected at the SDK's HTTP client seam instead (`crate::faults`).
//!
//! The npm packages are pinned in `tests/servers/package.json`; the first start in a process
//! runs `npm ci` there if `node_modules` is missing or older than `package-lock.json`. Node.js
//! and npm must be on `PATH`: without them a start fails with an error saying so.
//!
//! By concern:
//!
//! - `kinesis` and `dynamo`: the two servers, what they run with and their clients;
//! - `client`: the client configuration, refusing any endpoint but loopback;
//! - `node`: one server as a child process (node, or the STS server's Python): spawning it, waiting until it listens and answers
//!   HTTP, and the error that reports its failure with its output;
//! - `install`: the npm packages, installed once per process (`npm ci`);
//! - `python`: the Python packages (the STS server's, kubernetes-validate), installed once per
//!   process into a virtualenv ([`python_packages`]);
//! - `sts`: the STS server and the sessions it handed out;
//! - `output`: what a server prints, kept (capped) for error messages, and the port
//!   announcements of `loopback.cjs` picked out of it.
//!
//! This module holds what they share: the loopback address, the start timeout, the port
//! sentinels of `loopback.cjs` and where the npm project lives.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod client;
mod dynamo;
mod install;
mod kinesis;
mod node;
mod output;
mod python;
mod sts;

pub use client::sdk_config;
pub use dynamo::LocalDynamo;
pub use kinesis::LocalKinesis;
pub use python::ensure_installed as python_packages;
pub use sts::{AssumedRole, LocalSts};

/// The only address the harness ever listens on or connects to.
const LOOPBACK: &str = "127.0.0.1";
/// Bound on starting a server, and on waiting for a stream to become active.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Port numbers handed to the servers that `loopback.cjs` swaps for OS-picked free ports (see
/// its header). Real ports 1 and 2 are privileged, so they can never be meant literally.
const API_PORT_SENTINEL: u16 = 1;
const TLS_PORT_SENTINEL: u16 = 2;

/// `tests/servers`: the npm project holding the server packages and `loopback.cjs`.
fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("servers")
}
