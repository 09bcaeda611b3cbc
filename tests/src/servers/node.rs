//! One server as a child process: a `node` one spawned under `loopback.cjs` once the npm
//! packages are installed (or any process that announces its port the same way), waited for
//! until it listens and answers HTTP, killed on drop, and reported with its exit status and
//! output when it fails to start.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout, timeout_at};

use super::install::{ensure_installed, missing_tool};
use super::output::{capture, lock};
use super::{API_PORT_SENTINEL, LOOPBACK, START_TIMEOUT, TLS_PORT_SENTINEL, servers_dir};
use crate::wait::poll_for;

/// What to run: `node -r loopback.cjs <script> <args>` in `tests/servers` with `envs`.
pub(super) struct NodeSpec {
    pub(super) name: &'static str,
    pub(super) script: &'static str,
    pub(super) args: Vec<OsString>,
    pub(super) envs: Vec<(&'static str, OsString)>,
}

/// A running server: killed on drop (`kill_on_drop`), and exits on its own when our end of its
/// stdin pipe closes, i.e. when this process dies without running destructors.
#[derive(Debug)]
pub(super) struct ServerProcess {
    name: &'static str,
    child: Child,
    port: u16,
    output: Arc<Mutex<String>>,
}

impl ServerProcess {
    /// Installs the npm packages if needed, spawns `spec` and returns once the server answers
    /// HTTP, all within [`START_TIMEOUT`].
    pub(super) async fn start(spec: NodeSpec) -> Result<ServerProcess> {
        tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("the npm install task panicked")??;
        Self::watch(spec.name, spawn(&spec)?).await
    }

    /// Takes over `child`, spawned with piped stdin, stdout and stderr and `kill_on_drop`, which
    /// announces its port as `loopback.cjs` does; returns once it answers HTTP, all within
    /// [`START_TIMEOUT`].
    pub(super) async fn watch(name: &'static str, mut child: Child) -> Result<ServerProcess> {
        let output = Arc::new(Mutex::new(String::new()));
        let (ports_tx, ports_rx) = mpsc::unbounded_channel();
        capture(child.stdout.take(), Arc::clone(&output), None);
        capture(child.stderr.take(), Arc::clone(&output), Some(ports_tx));
        let mut server = ServerProcess {
            name,
            child,
            port: 0,
            output,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        server.port = server.wait_for_port(ports_rx, deadline).await?;
        server.wait_until_answering(deadline).await?;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`.
    pub(super) fn endpoint(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    /// The loopback port the server listens on.
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// What the server has printed so far (its capped tail).
    pub(super) fn output(&self) -> String {
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
    /// Stops early if the process exits.
    async fn wait_until_answering(&mut self, deadline: Instant) -> Result<()> {
        let port = self.port;
        let child = &mut self.child;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let answered = poll_for(remaining, async || {
            if answers_http(port).await {
                Some(Ok(()))
            } else if matches!(child.try_wait(), Ok(Some(_))) {
                Some(Err("exited before answering HTTP"))
            } else {
                None
            }
        })
        .await;
        match answered {
            Some(Ok(())) => Ok(()),
            Some(Err(what)) => Err(self.failure(what).await),
            None => Err(self
                .failure(&format!("did not answer HTTP within {START_TIMEOUT:?}"))
                .await),
        }
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
