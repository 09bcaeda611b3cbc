//! The npm packages of the servers (pinned in `tests/servers/package-lock.json`): installed
//! with `npm ci` at most once per process, never by two processes at once, and only when
//! `node_modules` is missing or older than the lock file.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};

use super::servers_dir;

/// The entry point of `kinesis-local`, relative to `tests/servers`.
pub(super) const KINESIS_MAIN: &str = "node_modules/kinesis-local/main.js";
/// The entry point of `dynalite`, relative to `tests/servers`.
pub(super) const DYNALITE_CLI: &str = "node_modules/dynalite/cli.js";

/// Makes sure `tests/servers/node_modules` matches `package-lock.json`, running `npm ci` at
/// most once per process and never concurrently with another process doing the same.
pub(super) fn ensure_installed() -> Result<()> {
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
pub(super) fn missing_tool(error: std::io::Error, tool: &str) -> anyhow::Error {
    if error.kind() == ErrorKind::NotFound {
        anyhow!(
            "`{tool}` is not on PATH: install Node.js (20 or later, with npm); the tests run \
             local Kinesis and DynamoDB servers with it"
        )
    } else {
        anyhow::Error::new(error).context(format!("starting `{tool}`"))
    }
}
