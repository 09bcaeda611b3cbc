//! `ruststream run` as a user runs it: a spawned process against the local servers, its log
//! in a file, stopped by signals, its state (admin token, kept versions) beside its tenants
//! file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::binary;
use crate::servers::LocalKinesis;

/// A running `ruststream run`; killed when dropped, so a failed test leaves no host behind.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

impl Running {
    /// Sends `signal` (`TERM`, `HUP`, ...) to the host.
    ///
    /// # Errors
    /// When `kill` cannot be run or refuses.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.0.id().to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} failed: {status}");
        Ok(())
    }
}

/// `ruststream run --config config` against `kinesis`, with quick polling, its admin API and
/// metrics endpoint on free loopback ports (see [`admin_addr`], [`metrics_addr`]), its state
/// in [`state_dir`] and its log in `log`; `args` adds to the command line.
///
/// # Errors
/// When the log file cannot be created or the binary cannot be spawned.
pub fn run_host(
    config: &Path,
    kinesis: &LocalKinesis,
    log: &Path,
    args: &[&str],
) -> anyhow::Result<Running> {
    run_host_at(config, &kinesis.endpoint(), log, args)
}

/// [`run_host`] with the Kinesis endpoint given as a URL (a proxy in front of the server).
///
/// # Errors
/// As [`run_host`].
pub fn run_host_at(
    config: &Path,
    kinesis_endpoint: &str,
    log: &Path,
    args: &[&str],
) -> anyhow::Result<Running> {
    let mut command = host_command(config, kinesis_endpoint, args);
    log_to(&mut command, log)?;
    Ok(Running(command.spawn()?))
}

/// Gives `command` (from [`host_command`]) the test credentials and `log` as its stdout.
///
/// # Errors
/// When the log file cannot be created.
pub fn log_to(command: &mut Command, log: &Path) -> anyhow::Result<()> {
    command
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .stdout(std::fs::File::create(log)?);
    Ok(())
}

/// The command [`run_host_at`] spawns, before its credentials and log are set: for a test
/// that gives the host its credentials another way.
pub fn host_command(config: &Path, kinesis_endpoint: &str, args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command
        .args(["run", "--config"])
        .arg(config)
        .args(["--kinesis-endpoint", kinesis_endpoint])
        .args(["--region", "us-east-1", "--poll-interval", "200ms"])
        .args([
            "--admin-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(args)
        // The environment variable rather than the flag: a test can take it away to run the
        // host with its default state directory.
        .env("RUSTSTREAM_STATE_DIR", state_dir(config))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// The state directory of a host that [`host_command`] runs with tenants file `config`:
/// `state/` beside the file, so each test's host has its own, and a host restarted from the
/// same file finds its state again.
pub fn state_dir(config: &Path) -> PathBuf {
    config.parent().unwrap_or(Path::new(".")).join("state")
}

/// The address the host's admin API listens on, from its log (`admin API listening`), once it
/// does.
pub fn admin_addr(log: &str) -> Option<String> {
    listening(log, "admin API listening")
}

/// The address the host's metrics endpoint listens on, from its log, once it does.
pub fn metrics_addr(log: &str) -> Option<String> {
    listening(log, "metrics endpoint listening")
}

/// The `addr` of the first line saying `message`, in the text or the JSON log format.
fn listening(log: &str, message: &str) -> Option<String> {
    let line = log.lines().find(|line| line.contains(message))?;
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(line) {
        let addr = json
            .get("addr")
            .or_else(|| json.get("fields")?.get("addr"))?;
        return addr.as_str().map(str::to_owned);
    }
    line.split_whitespace()
        .find_map(|token| token.strip_prefix("addr="))
        .map(str::to_owned)
}

/// `ruststream ARGS` with the test credentials, to its end: whether it succeeded, and its
/// stdout and stderr together.
///
/// # Errors
/// When the binary cannot be run.
pub fn verb(args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = Command::new(binary())
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}
