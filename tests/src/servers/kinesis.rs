//! The local Kinesis server: `kinesis-local` (kinesis-mock) without its artificial delays, and
//! stream creation that returns once the stream is ACTIVE.

use anyhow::{Result, anyhow, bail};
use aws_sdk_kinesis::error::DisplayErrorContext;
use aws_sdk_kinesis::types::StreamStatus;

use super::client::sdk_config;
use super::install::KINESIS_MAIN;
use super::node::{NodeSpec, ServerProcess};
use super::{API_PORT_SENTINEL, START_TIMEOUT, TLS_PORT_SENTINEL, servers_dir};
use crate::wait::poll_for;

/// A `kinesis-local` server listening only on 127.0.0.1, killed when dropped.
///
/// Stream creation, deletion and resharding complete immediately (no CREATING delay).
#[derive(Debug)]
pub struct LocalKinesis {
    server: ServerProcess,
}

impl LocalKinesis {
    /// Starts a fresh, empty server on a free port and returns once it answers HTTP.
    ///
    /// Fails (with the server's output) if it does not answer within 30 s, and with an
    /// explanation if node/npm are missing or `npm ci` fails.
    pub async fn start() -> Result<LocalKinesis> {
        Self::start_with_consumers_creating_for(None).await
    }

    /// [`start`](Self::start), with a registered enhanced fan-out consumer staying `CREATING`
    /// for `creating` (kinesis-mock's default, 500 ms, when `None`), as Kinesis keeps it a few
    /// seconds: no more than five of a stream's may be `CREATING` at once.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with_consumers_creating_for(
        creating: Option<std::time::Duration>,
    ) -> Result<LocalKinesis> {
        let dir = servers_dir();
        let mut envs = vec![
            (
                "KINESIS_MOCK_PLAIN_PORT",
                API_PORT_SENTINEL.to_string().into(),
            ),
            (
                "KINESIS_MOCK_TLS_PORT",
                TLS_PORT_SENTINEL.to_string().into(),
            ),
            // Needed even for plain HTTP: it crashes with ENOENT without a certificate.
            (
                "KINESIS_MOCK_CERT_PATH",
                dir.join("node_modules/kinesis-local/server.json").into(),
            ),
            ("LOG_LEVEL", "WARN".into()),
        ];
        for delay in [
            "CREATE_STREAM_DURATION",
            "DELETE_STREAM_DURATION",
            "SPLIT_SHARD_DURATION",
            "MERGE_SHARDS_DURATION",
            "UPDATE_SHARD_COUNT_DURATION",
        ] {
            envs.push((delay, "0ms".into()));
        }
        if let Some(creating) = creating {
            envs.push((
                "REGISTER_STREAM_CONSUMER_DURATION",
                format!("{}ms", creating.as_millis()).into(),
            ));
        }
        let spec = NodeSpec {
            name: "kinesis-local",
            script: KINESIS_MAIN,
            args: Vec::new(),
            envs,
        };
        Ok(LocalKinesis {
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
    pub async fn client(&self) -> aws_sdk_kinesis::Client {
        aws_sdk_kinesis::Client::new(&sdk_config(&self.endpoint()).await)
    }

    /// Creates stream `name` with `shards` shards and returns once it is ACTIVE (at most 30 s).
    pub async fn create_stream(&self, name: &str, shards: i32) -> Result<()> {
        let client = self.client().await;
        client
            .create_stream()
            .stream_name(name)
            .shard_count(shards)
            .send()
            .await
            .map_err(|e| anyhow!("CreateStream {name}: {}", DisplayErrorContext(&e)))?;
        wait_until_active(&client, name).await
    }
}

/// Polls DescribeStreamSummary until stream `name` is ACTIVE, for at most [`START_TIMEOUT`].
/// A failing DescribeStreamSummary ends the wait with its error.
async fn wait_until_active(client: &aws_sdk_kinesis::Client, name: &str) -> Result<()> {
    let mut status = None;
    let active = poll_for(START_TIMEOUT, async || {
        let summary = match client
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
        {
            Ok(summary) => summary,
            Err(e) => {
                let error = anyhow!("DescribeStreamSummary {name}: {}", DisplayErrorContext(&e));
                return Some(Err(error));
            }
        };
        status = summary
            .stream_description_summary()
            .map(|s| s.stream_status().clone());
        (status == Some(StreamStatus::Active)).then_some(Ok(()))
    })
    .await;
    match active {
        Some(result) => result,
        None => bail!("stream {name} not ACTIVE after {START_TIMEOUT:?} (status {status:?})"),
    }
}
