//! The local DynamoDB server: `dynalite`, in memory, without table delays.

use std::ffi::OsString;

use anyhow::Result;

use super::client::sdk_config;
use super::install::DYNALITE_CLI;
use super::node::{NodeSpec, ServerProcess};
use super::{API_PORT_SENTINEL, LOOPBACK};

/// A `dynalite` server listening only on 127.0.0.1, in memory, killed when dropped.
///
/// Table creation, deletion and updates have no configured delay, but CreateTable still answers
/// before the table accepts writes: wait for ACTIVE (as `DynamoLeaseStore::create_table_if_missing`
/// does) before using a new table.
#[derive(Debug)]
pub struct LocalDynamo {
    server: ServerProcess,
}

impl LocalDynamo {
    /// Starts a fresh, empty server on a free port and returns once it answers HTTP.
    ///
    /// Fails like [`LocalKinesis::start`](super::LocalKinesis::start).
    pub async fn start() -> Result<LocalDynamo> {
        let args = [
            "--host",
            LOOPBACK,
            "--port",
            // dynalite treats `--port 0` as "default 4567", hence the sentinel.
            &API_PORT_SENTINEL.to_string(),
            "--createTableMs",
            "0",
            "--deleteTableMs",
            "0",
            "--updateTableMs",
            "0",
        ];
        let spec = NodeSpec {
            name: "dynalite",
            script: DYNALITE_CLI,
            args: args.iter().map(OsString::from).collect(),
            envs: Vec::new(),
        };
        Ok(LocalDynamo {
            server: ServerProcess::start(spec).await?,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// What the server has printed so far (its last 64 KiB), for diagnosing a failing test.
    pub fn output(&self) -> String {
        self.server.output()
    }

    /// A client of this server, configured by [`sdk_config`].
    pub async fn client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&sdk_config(&self.endpoint()).await)
    }
}
