//! What an end-to-end test of the `ruststream` binary starts with, in one place: the local
//! servers it needs (Kinesis always, DynamoDB and STS when asked), its streams, a folder of its
//! own for the tenants file, state and log, the host process, and a producer. Then waits on
//! what the host says or stores, each failing with the host's log.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use ruststream_tests::fixture::Fixture;
//! use ruststream_tests::guests;
//!
//! let fixture = Fixture::builder("contract").stream("ledger", 1).dynamo().start().await?;
//! let tenants = fixture.tenants(&format!(
//!     "[[tenants]]\nname = \"plain\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
//!     guests::SETTLEMENT_PLAIN.path().display()
//! ))?;
//! let host = fixture.host(&tenants).dynamo_leases().owner("contract-host").start()?;
//! host.wait_for_log("reading shard", 1).await?;
//! fixture.put("ledger", &serde_json::json!({"id": 1, "amount": 5})).await?;
//! host.wait_for_log("booked", 1).await?;
//! host.stop().await?;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use ruststream_kinesis::{DynamoLeaseStore, LeaseStore, lease::LeaseKey};

use crate::e2e::put_json;
use crate::http::http;
use crate::process::{self, Running};
use crate::scrape::Scrape;
use crate::scratch::ScratchDir;
use crate::servers::{LocalDynamo, LocalKinesis, LocalSts};
use crate::wait::{eventually, poll_for};

/// How long a wait of the fixture lasts unless the test says otherwise: long enough for a
/// component to compile in the worker on a loaded machine.
pub const WAIT: Duration = Duration::from_secs(60);

/// What to start for one test: see [`Fixture::builder`].
#[must_use]
pub struct FixtureBuilder {
    name: String,
    streams: Vec<(String, i32)>,
    dynamo: bool,
    sts: bool,
    consumers_creating_for: Option<Duration>,
}

impl FixtureBuilder {
    /// Creates `stream` with `shards` shards on the Kinesis server.
    pub fn stream(mut self, stream: &str, shards: i32) -> Self {
        self.streams.push((stream.to_owned(), shards));
        self
    }

    /// Starts a DynamoDB server too (hosts keep leases there with [`HostBuilder::dynamo_leases`]).
    pub fn dynamo(mut self) -> Self {
        self.dynamo = true;
        self
    }

    /// Keeps each enhanced fan-out consumer registered on the Kinesis server `CREATING` for
    /// `creating` (500 ms unless asked).
    pub fn consumers_creating_for(mut self, creating: Duration) -> Self {
        self.consumers_creating_for = Some(creating);
        self
    }

    /// Starts an STS server too, for tenants that assume roles.
    pub fn sts(mut self) -> Self {
        self.sts = true;
        self
    }

    /// Starts the servers (side by side), creates the streams and a fresh folder
    /// `$TMPDIR/ruststream-<name>-<pid>-<n>`, removed with the fixture unless the test failed.
    ///
    /// # Errors
    /// A server does not start, a stream is not created, or the folder cannot be made.
    pub async fn start(self) -> Result<Fixture> {
        let (kinesis, dynamo, sts) = tokio::try_join!(
            LocalKinesis::start_with_consumers_creating_for(self.consumers_creating_for),
            optional(self.dynamo, LocalDynamo::start),
            optional(self.sts, LocalSts::start),
        )?;
        for (stream, shards) in &self.streams {
            kinesis.create_stream(stream, *shards).await?;
        }
        let client = kinesis.client().await;
        let dir =
            ScratchDir::new(&self.name).with_context(|| format!("a folder for {}", self.name))?;
        Ok(Fixture {
            kinesis,
            dynamo,
            sts,
            client,
            dir,
        })
    }
}

/// Starts a server when `wanted`.
async fn optional<T>(wanted: bool, start: impl AsyncFnOnce() -> Result<T>) -> Result<Option<T>> {
    if wanted {
        Ok(Some(start().await?))
    } else {
        Ok(None)
    }
}

/// The servers, streams and folder of one test; the servers stop when it is dropped.
pub struct Fixture {
    /// The Kinesis server.
    pub kinesis: LocalKinesis,
    dynamo: Option<LocalDynamo>,
    sts: Option<LocalSts>,
    client: aws_sdk_kinesis::Client,
    dir: ScratchDir,
}

impl Fixture {
    /// A fixture named `name` (its folder's name): Kinesis only until the builder asks for more.
    pub fn builder(name: &str) -> FixtureBuilder {
        FixtureBuilder {
            name: name.to_owned(),
            streams: Vec::new(),
            dynamo: false,
            sts: false,
            consumers_creating_for: None,
        }
    }

    /// The DynamoDB server.
    ///
    /// # Panics
    /// When the builder did not ask for it (a mistake in the test).
    pub fn dynamo(&self) -> &LocalDynamo {
        self.dynamo
            .as_ref()
            .expect("the fixture was built without `.dynamo()`")
    }

    /// The STS server.
    ///
    /// # Panics
    /// When the builder did not ask for it (a mistake in the test).
    pub fn sts(&self) -> &LocalSts {
        self.sts
            .as_ref()
            .expect("the fixture was built without `.sts()`")
    }

    /// A client of the Kinesis server.
    pub fn client(&self) -> &aws_sdk_kinesis::Client {
        &self.client
    }

    /// The test's own folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `tenants` (TOML `[[tenants]]` tables, perhaps a `[host]` table) to `tenants.toml`
    /// in the folder and returns its path.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn tenants(&self, tenants: &str) -> Result<PathBuf> {
        self.tenants_file("tenants.toml", tenants)
    }

    /// Writes `tenants` to `file` in the folder and returns its path.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn tenants_file(&self, file: &str, tenants: &str) -> Result<PathBuf> {
        let path = self.dir.join(file);
        std::fs::write(&path, tenants).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// A host running the tenants file `tenants`, to configure and start.
    pub fn host(&self, tenants: &Path) -> HostBuilder<'_> {
        HostBuilder {
            fixture: self,
            tenants: tenants.to_owned(),
            log: "host.log".to_owned(),
            endpoint: None,
            dynamo_endpoint: None,
            adjust: None,
            args: Vec::new(),
        }
    }

    /// Puts `payload` as JSON on `stream`; returns its sequence number.
    ///
    /// # Errors
    /// The put fails.
    pub async fn put(&self, stream: &str, payload: &serde_json::Value) -> Result<String> {
        Ok(put_json(&self.client, stream, payload, None).await?.1)
    }

    /// Puts each payload, in order; returns their sequence numbers.
    ///
    /// # Errors
    /// A put fails.
    pub async fn put_all(
        &self,
        stream: &str,
        payloads: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<Vec<String>> {
        let mut sequences = Vec::new();
        for payload in payloads {
            sequences.push(self.put(stream, &payload).await?);
        }
        Ok(sequences)
    }

    /// The lease table `table` on the DynamoDB server.
    ///
    /// # Panics
    /// When the builder did not ask for DynamoDB.
    pub async fn lease_store(&self, table: &str) -> DynamoLeaseStore {
        DynamoLeaseStore::new(self.dynamo().client().await, table)
    }

    /// Waits until `owner` holds a lease of `stream` in `table`; returns its key.
    ///
    /// # Errors
    /// No such lease within [`WAIT`].
    pub async fn wait_for_lease(&self, table: &str, stream: &str, owner: &str) -> Result<LeaseKey> {
        let store = self.lease_store(table).await;
        let prefix = format!("{stream}:");
        poll_for(WAIT, async || {
            let rows = store.list().await.ok()?;
            let row = rows
                .into_iter()
                .find(|r| r.owner.as_deref() == Some(owner) && r.key.starts_with(&prefix))?;
            Some(LeaseKey::new(stream, row.key.trim_start_matches(&prefix)))
        })
        .await
        .ok_or_else(|| anyhow::anyhow!("{owner} never took a lease of `{stream}` in {table}"))
    }
}

/// A change to a host's command before it is spawned.
type Adjust = Box<dyn FnOnce(&mut std::process::Command)>;

/// How to run one host: see [`Fixture::host`].
#[must_use]
pub struct HostBuilder<'a> {
    fixture: &'a Fixture,
    tenants: PathBuf,
    log: String,
    endpoint: Option<String>,
    dynamo_endpoint: Option<String>,
    adjust: Option<Adjust>,
    args: Vec<String>,
}

impl HostBuilder<'_> {
    /// Its log file, a path relative to the folder (`host.log` unless said).
    pub fn log(mut self, file: &str) -> Self {
        file.clone_into(&mut self.log);
        self
    }

    /// Keeps its leases on the fixture's DynamoDB server, creating the table
    /// (`--lease-store dynamodb --create-lease-table`); without it they are in memory.
    pub fn dynamo_leases(self) -> Self {
        self.args(&["--lease-store", "dynamodb", "--create-lease-table"])
    }

    /// Its owner id (`--owner-id`).
    pub fn owner(self, owner: &str) -> Self {
        self.args(&["--owner-id", owner])
    }

    /// Reaches Kinesis at `endpoint` (a proxy in front of the server) instead.
    pub fn kinesis_endpoint(mut self, endpoint: &str) -> Self {
        self.endpoint = Some(endpoint.to_owned());
        self
    }

    /// Reaches DynamoDB at `endpoint` (a proxy in front of the server) instead.
    pub fn dynamo_endpoint(mut self, endpoint: &str) -> Self {
        self.dynamo_endpoint = Some(endpoint.to_owned());
        self
    }

    /// Changes its command just before it is spawned (its environment, say), after the
    /// fixture has set the test credentials and the log.
    pub fn adjust(mut self, adjust: impl FnOnce(&mut std::process::Command) + 'static) -> Self {
        self.adjust = Some(Box::new(adjust));
        self
    }

    /// Adds `args` to its command line.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Spawns `ruststream run` (see [`process::run_host_at`]), given the fixture's DynamoDB
    /// server when it has one (for leases, redrives).
    ///
    /// # Errors
    /// The log file cannot be created or the binary cannot be spawned.
    pub fn start(self) -> Result<BinaryHost> {
        let fixture = self.fixture;
        let mut args = self.args;
        let dynamo = self
            .dynamo_endpoint
            .or_else(|| fixture.dynamo.as_ref().map(LocalDynamo::endpoint));
        if let Some(dynamo) = dynamo {
            args.extend(["--dynamodb-endpoint".to_owned(), dynamo]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let endpoint = self.endpoint.unwrap_or_else(|| fixture.kinesis.endpoint());
        let log = fixture.dir.join(&self.log);
        let mut command = process::host_command(&self.tenants, &endpoint, &args);
        process::log_to(&mut command, &log)?;
        if let Some(adjust) = self.adjust {
            adjust(&mut command);
        }
        Ok(BinaryHost {
            running: Running(command.spawn()?),
            log,
            tenants: self.tenants,
        })
    }
}

/// A running `ruststream run`, killed when dropped.
pub struct BinaryHost {
    /// The process.
    pub running: Running,
    log: PathBuf,
    tenants: PathBuf,
}

impl BinaryHost {
    /// Its log so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its state directory (admin token, kept versions).
    pub fn state_dir(&self) -> PathBuf {
        process::state_dir(&self.tenants)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.running.0.id()
    }

    /// Waits until its log holds `text` at least `count` times.
    ///
    /// # Errors
    /// Not within [`WAIT`]; the error holds the log.
    pub async fn wait_for_log(&self, text: &str, count: usize) -> Result<()> {
        self.wait_until(WAIT, &format!("{count} × `{text}`"), |log| {
            log.matches(text).count() >= count
        })
        .await
    }

    /// Waits until `condition` holds for its log, for at most `timeout`.
    ///
    /// # Errors
    /// Not within `timeout`; the error names `what` and holds the log.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        condition: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let held = eventually(timeout, || condition(&self.output())).await;
        anyhow::ensure!(held, "waited {timeout:?} for {what}: {}", self.output());
        Ok(())
    }

    /// The address of its admin API, once it listens.
    ///
    /// # Errors
    /// Not within [`WAIT`].
    pub async fn admin_addr(&self) -> Result<String> {
        poll_for(WAIT, async || process::admin_addr(&self.output()))
            .await
            .ok_or_else(|| anyhow::anyhow!("no admin API: {}", self.output()))
    }

    /// Scrapes its metrics endpoint once it listens.
    ///
    /// # Errors
    /// No endpoint within [`WAIT`], or the scrape fails.
    pub async fn scrape(&self) -> Result<Scrape> {
        let addr = poll_for(WAIT, async || process::metrics_addr(&self.output()))
            .await
            .ok_or_else(|| anyhow::anyhow!("no metrics endpoint: {}", self.output()))?;
        let (status, body) =
            tokio::task::spawn_blocking(move || http(&addr, "GET", "/metrics", b"")).await??;
        anyhow::ensure!(status == 200, "GET /metrics: {status} {body}");
        Scrape::parse(&body)
    }

    /// Sends `signal` (`TERM`, `INT`, ...).
    ///
    /// # Errors
    /// When `kill` fails.
    pub fn signal(&self, signal: &str) -> Result<()> {
        self.running.signal(signal)
    }

    /// Waits, for at most `timeout`, for the process to exit; returns its exit status and log.
    ///
    /// # Errors
    /// It did not exit in time, or waiting failed.
    pub async fn exit(self, timeout: Duration) -> Result<(std::process::ExitStatus, String)> {
        let Self {
            mut running, log, ..
        } = self;
        let exit = tokio::time::timeout(
            timeout,
            tokio::task::spawn_blocking(move || {
                let status = running.0.wait();
                (status, running)
            }),
        )
        .await
        .context("the host did not exit in time")??;
        let status = exit.0?;
        Ok((status, std::fs::read_to_string(log).unwrap_or_default()))
    }

    /// Stops it with SIGTERM and checks that it exits cleanly within 60 s; returns its log.
    ///
    /// # Errors
    /// The signal fails, it does not exit in time, or it exits with a failure.
    pub async fn stop(self) -> Result<String> {
        self.signal("TERM")?;
        let (exit, output) = self.exit(WAIT).await?;
        anyhow::ensure!(exit.success(), "exit {exit:?}: {output}");
        Ok(output)
    }
}
