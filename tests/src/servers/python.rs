//! The Python packages of the STS server and of the Kubernetes manifests' check (pinned in
//! `tests/servers/requirements.txt`): installed into `tests/servers/.venv` at most once per
//! process, never by two processes at once, and only when the virtualenv is missing or older
//! than the requirements.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};

use super::servers_dir;

const REQUIREMENTS: &str = "requirements.txt";
/// Written last by a complete install: an interrupted one is started again.
const INSTALLED_MARK: &str = ".venv/installed";

/// The virtualenv's interpreter, once the packages are installed (its scripts, such as
/// `kubernetes-validate`, are beside it).
///
/// # Errors
/// When Python 3 with venv and pip is missing, or the install fails: the error carries pip's
/// output.
pub fn ensure_installed() -> Result<PathBuf> {
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install_exclusively().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn install_exclusively() -> Result<PathBuf> {
    let dir = servers_dir();
    let requirements = dir.join(REQUIREMENTS);
    // The requirements file doubles as the cross-process lock, as package.json does for npm.
    let lock = std::fs::File::open(&requirements)
        .with_context(|| format!("opening {}", requirements.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", requirements.display()))?;
    if !is_installed(&dir) {
        install(&dir)?;
    }
    Ok(dir.join(".venv/bin/python"))
}

fn is_installed(dir: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let installed = modified(dir.join(INSTALLED_MARK));
    let wanted = modified(dir.join(REQUIREMENTS));
    matches!((installed, wanted), (Some(i), Some(w)) if i >= w)
}

fn install(dir: &Path) -> Result<()> {
    run(
        dir,
        Path::new("python3"),
        &["-m", "venv", "--clear", ".venv"],
    )?;
    let pip = dir.join(".venv/bin/pip");
    let quiet = ["--quiet", "--disable-pip-version-check"];
    run(
        dir,
        &pip,
        &[&["install"], &quiet[..], &["-r", REQUIREMENTS]].concat(),
    )?;
    std::fs::write(dir.join(INSTALLED_MARK), "")
        .with_context(|| format!("marking {} installed", dir.join(".venv").display()))
}

/// Runs `program` (looked up on PATH when it is a bare name) in `dir`.
fn run(dir: &Path, program: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            anyhow!(
                "`{}` cannot be run ({e}): install Python 3 with venv and pip; the credentials \
                 tests run a local STS server with it, the Kubernetes tests kubernetes-validate",
                program.display()
            )
        })?;
    if !output.status.success() {
        bail!(
            "`{} {}` in {} failed ({}):\n{}{}",
            program.display(),
            args.join(" "),
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
    Ok(())
}
