//! Real AWS-compatible servers on 127.0.0.1 for tests.
//!
//! - [`LocalKinesis`] runs `kinesis-local` (kinesis-mock) and [`LocalDynamo`] runs `dynalite`,
//!   each as its own `node` process on an OS-picked loopback port, so any number of tests and
//!   test binaries can run side by side. The process is killed when the value is dropped (also
//!   while a failing test unwinds) and exits by itself if the test process dies.
//! - [`sdk_config`] is the client configuration for any of them: region `us-east-1`, static
//!   test credentials, an explicit loopback endpoint.
//! - Faults are injected at the SDK's HTTP client seam instead (`crate::faults`).
//!
//! The npm packages are pinned in `tests/servers/package.json`; the first start in a process
//! runs `npm ci` there if `node_modules` is missing or older than `package-lock.json`. Node.js
//! and npm must be on `PATH`: without them a start fails with an error saying so.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_kinesis::config::Credentials;
use aws_sdk_kinesis::error::DisplayErrorContext;
use aws_sdk_kinesis::types::StreamStatus;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout, timeout_at};

/// The only address the harness ever listens on or connects to.
const LOOPBACK: &str = "127.0.0.1";
/// Bound on starting a server, and on waiting for a stream to become active.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Port numbers handed to the servers that `loopback.cjs` swaps for OS-picked free ports (see
/// its header). Real ports 1 and 2 are privileged, so they can never be meant literally.
const API_PORT_SENTINEL: u16 = 1;
const TLS_PORT_SENTINEL: u16 = 2;
/// Most server output kept for error messages; the tail is what explains a crash.
const OUTPUT_CAP: usize = 64 * 1024;

const KINESIS_MAIN: &str = "node_modules/kinesis-local/main.js";
const DYNALITE_CLI: &str = "node_modules/dynalite/cli.js";

/// `tests/servers`: the npm project holding the server packages and `loopback.cjs`.
fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("servers")
}

// ---------------------------------------------------------------------------------------------
// Client configuration

/// Client configuration for a local server at `endpoint`: region `us-east-1`, static test
/// credentials, [`BehaviorVersion::latest`] and the standard retry policy.
///
/// # Panics
///
/// If `endpoint` is not `http://127.0.0.1:<port>`: tests must never reach a real AWS account.
pub async fn sdk_config(endpoint: &str) -> SdkConfig {
    if let Err(error) = loopback_port(endpoint) {
        panic!("refusing a non-loopback endpoint: {error:#}");
    }
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "AKIDRUSTSTREAMTEST",
            "ruststream-test-secret",
            None,
            None,
            "ruststream-tests",
        ))
        // Pinned so AWS_MAX_ATTEMPTS or a profile on the developer's machine can't change tests.
        .retry_config(aws_config::retry::RetryConfig::standard())
        .endpoint_url(endpoint)
        .load()
        .await
}

/// The port of `endpoint` if it is `http://127.0.0.1:<port>` (a trailing `/` allowed).
fn loopback_port(endpoint: &str) -> Result<u16> {
    let port = endpoint
        .strip_prefix("http://127.0.0.1:")
        .map(|rest| rest.trim_end_matches('/'))
        .with_context(|| format!("`{endpoint}` is not an http://127.0.0.1:<port> endpoint"))?;
    port.parse()
        .with_context(|| format!("bad port in endpoint `{endpoint}`"))
}

// ---------------------------------------------------------------------------------------------
// Kinesis

/// A `kinesis-local` server listening only on 127.0.0.1, killed when dropped.
///
/// Stream creation, deletion and resharding complete immediately (no CREATING delay).
#[derive(Debug)]
pub struct LocalKinesis {
    server: NodeServer,
}

impl LocalKinesis {
    /// Starts a fresh, empty server on a free port and returns once it answers HTTP.
    ///
    /// Fails (with the server's output) if it does not answer within 30 s, and with an
    /// explanation if node/npm are missing or `npm ci` fails.
    pub async fn start() -> Result<LocalKinesis> {
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
        let spec = NodeSpec {
            name: "kinesis-local",
            script: KINESIS_MAIN,
            args: Vec::new(),
            envs,
        };
        Ok(LocalKinesis {
            server: NodeServer::start(spec).await?,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.server.port
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
async fn wait_until_active(client: &aws_sdk_kinesis::Client, name: &str) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let summary = client
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
            .map_err(|e| anyhow!("DescribeStreamSummary {name}: {}", DisplayErrorContext(&e)))?;
        let status = summary
            .stream_description_summary()
            .map(|s| s.stream_status().clone());
        if status == Some(StreamStatus::Active) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("stream {name} not ACTIVE after {START_TIMEOUT:?} (status {status:?})");
        }
        sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// DynamoDB

/// A `dynalite` server listening only on 127.0.0.1, in memory, killed when dropped.
///
/// Table creation, deletion and updates have no configured delay, but CreateTable still answers
/// before the table accepts writes: wait for ACTIVE (as `DynamoLeaseStore::create_table_if_missing`
/// does) before using a new table.
#[derive(Debug)]
pub struct LocalDynamo {
    server: NodeServer,
}

impl LocalDynamo {
    /// Starts a fresh, empty server on a free port and returns once it answers HTTP.
    ///
    /// Fails like [`LocalKinesis::start`].
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
            server: NodeServer::start(spec).await?,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.server.port
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

// ---------------------------------------------------------------------------------------------
// npm install

/// Makes sure `tests/servers/node_modules` matches `package-lock.json`, running `npm ci` at
/// most once per process and never concurrently with another process doing the same.
fn ensure_installed() -> Result<()> {
    // anyhow::Error is not Clone; every later caller gets the first outcome as text.
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install_exclusively().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn install_exclusively() -> Result<()> {
    let dir = servers_dir();
    let package_json = dir.join("package.json");
    // package.json doubles as the cross-process lock: it always exists and nothing else locks it.
    let lock = std::fs::File::open(&package_json)
        .with_context(|| format!("opening {}", package_json.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", package_json.display()))?;
    if !is_installed(&dir) {
        run_npm_ci(&dir)?;
    }
    Ok(())
}

/// Whether both servers are installed from the current `package-lock.json`.
fn is_installed(dir: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let entry_points = [KINESIS_MAIN, DYNALITE_CLI]
        .iter()
        .all(|entry| dir.join(entry).is_file());
    // npm writes node_modules/.package-lock.json last; older than package-lock.json means the
    // pinned versions changed since the install.
    let installed = modified(dir.join("node_modules/.package-lock.json"));
    let locked = modified(dir.join("package-lock.json"));
    entry_points && matches!((installed, locked), (Some(i), Some(l)) if i >= l)
}

fn run_npm_ci(dir: &Path) -> Result<()> {
    let output = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| missing_tool(e, "npm"))?;
    if !output.status.success() {
        bail!(
            "`npm ci` in {} failed ({}):\n{}{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
    Ok(())
}

/// Turns a spawn failure into an error that says what to install.
fn missing_tool(error: std::io::Error, tool: &str) -> anyhow::Error {
    if error.kind() == ErrorKind::NotFound {
        anyhow!(
            "`{tool}` is not on PATH: install Node.js (20 or later, with npm); the tests run \
             local Kinesis and DynamoDB servers with it"
        )
    } else {
        anyhow::Error::new(error).context(format!("starting `{tool}`"))
    }
}

// ---------------------------------------------------------------------------------------------
// node processes

/// What to run: `node -r loopback.cjs <script> <args>` in `tests/servers` with `envs`.
struct NodeSpec {
    name: &'static str,
    script: &'static str,
    args: Vec<OsString>,
    envs: Vec<(&'static str, OsString)>,
}

/// A running node server: killed on drop (`kill_on_drop`), and exits on its own when our end
/// of its stdin pipe closes, i.e. when this process dies without running destructors.
#[derive(Debug)]
struct NodeServer {
    name: &'static str,
    child: Child,
    port: u16,
    output: Arc<Mutex<String>>,
}

impl NodeServer {
    async fn start(spec: NodeSpec) -> Result<NodeServer> {
        tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("the npm install task panicked")??;
        let mut child = spawn(&spec)?;
        let output = Arc::new(Mutex::new(String::new()));
        let (ports_tx, ports_rx) = mpsc::unbounded_channel();
        capture(child.stdout.take(), Arc::clone(&output), None);
        capture(child.stderr.take(), Arc::clone(&output), Some(ports_tx));
        let mut server = NodeServer {
            name: spec.name,
            child,
            port: 0,
            output,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        server.port = server.wait_for_port(ports_rx, deadline).await?;
        server.wait_until_answering(deadline).await?;
        Ok(server)
    }

    fn endpoint(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    fn output(&self) -> String {
        lock(&self.output).clone()
    }

    /// Waits for `loopback.cjs` to announce the port that replaced [`API_PORT_SENTINEL`].
    async fn wait_for_port(
        &mut self,
        mut announced: mpsc::UnboundedReceiver<(u16, u16)>,
        deadline: Instant,
    ) -> Result<u16> {
        loop {
            match timeout_at(deadline, announced.recv()).await {
                Ok(Some((API_PORT_SENTINEL, port))) => return Ok(port),
                Ok(Some(_other_listener)) => continue,
                // stderr closed: the process is exiting.
                Ok(None) => return Err(self.failure("exited before listening").await),
                Err(_) => {
                    return Err(self
                        .failure(&format!("did not listen within {START_TIMEOUT:?}"))
                        .await);
                }
            }
        }
    }

    /// Waits until the port gives any HTTP answer: listening precedes being able to serve.
    async fn wait_until_answering(&mut self, deadline: Instant) -> Result<()> {
        while !answers_http(self.port).await {
            if Instant::now() >= deadline {
                return Err(self
                    .failure(&format!("did not answer HTTP within {START_TIMEOUT:?}"))
                    .await);
            }
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return Err(self.failure("exited before answering HTTP").await);
            }
            sleep(Duration::from_millis(25)).await;
        }
        Ok(())
    }

    /// An error naming the server, its exit status and everything it printed.
    async fn failure(&mut self, what: &str) -> anyhow::Error {
        let _ = self.child.start_kill();
        let status = timeout(Duration::from_secs(2), self.child.wait()).await;
        // Give the output readers a moment to drain what the process wrote before dying.
        sleep(Duration::from_millis(50)).await;
        let status = match status {
            Ok(Ok(status)) => status.to_string(),
            other => format!("exit status unknown: {other:?}"),
        };
        anyhow!(
            "{} {what} ({status}); its output:\n{}",
            self.name,
            self.output()
        )
    }
}

fn spawn(spec: &NodeSpec) -> Result<Child> {
    let dir = servers_dir();
    Command::new("node")
        .arg("-r")
        .arg(dir.join("loopback.cjs"))
        .arg(dir.join(spec.script))
        .args(&spec.args)
        .current_dir(&dir)
        .env(
            "LOOPBACK_EPHEMERAL_PORTS",
            format!("{API_PORT_SENTINEL},{TLS_PORT_SENTINEL}"),
        )
        .env("LOOPBACK_EXIT_ON_STDIN_EOF", "1")
        .envs(spec.envs.iter().map(|(key, value)| (key, value)))
        // Our end of stdin stays open inside `Child` for as long as the server should live.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| missing_tool(e, "node"))
}

/// Copies `stream` line by line into `output`, sending each port announcement of
/// `loopback.cjs` to `ports`. Reading never stops early, so the server never blocks on a full
/// pipe.
fn capture<R>(
    stream: Option<R>,
    output: Arc<Mutex<String>>,
    ports: Option<mpsc::UnboundedSender<(u16, u16)>>,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    let Some(stream) = stream else { return };
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
            let text = String::from_utf8_lossy(&line);
            if let (Some(ports), Some(announced)) = (&ports, parse_announcement(&text)) {
                let _ = ports.send(announced);
            }
            append_capped(&output, &text);
            line.clear();
        }
    });
}

/// Parses `loopback-listening requested=<port> port=<port>` (see `loopback.cjs`).
fn parse_announcement(line: &str) -> Option<(u16, u16)> {
    let rest = line.trim().strip_prefix("loopback-listening requested=")?;
    let (requested, port) = rest.split_once(" port=")?;
    Some((requested.parse().ok()?, port.parse().ok()?))
}

fn append_capped(output: &Mutex<String>, text: &str) {
    let mut output = lock(output);
    output.push_str(text);
    if output.len() > OUTPUT_CAP {
        let mut cut = output.len() - OUTPUT_CAP / 2;
        while !output.is_char_boundary(cut) {
            cut += 1;
        }
        output.replace_range(..cut, "[…]\n");
    }
}

/// Whether something on `port` answers a plain HTTP request with an HTTP status line.
async fn answers_http(port: u16) -> bool {
    let probe = async {
        let mut stream = TcpStream::connect((LOOPBACK, port)).await?;
        let request =
            format!("GET / HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut head = [0u8; 7];
        stream.read_exact(&mut head).await?;
        Ok::<bool, std::io::Error>(&head == b"HTTP/1.")
    };
    matches!(timeout(Duration::from_secs(2), probe).await, Ok(Ok(true)))
}

/// Locks `mutex`, ignoring poisoning: the data (counters, logs) stays meaningful after a panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
