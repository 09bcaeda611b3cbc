//! The guest examples in other languages (`guest-examples/settlement-python`,
//! `guest-examples/settlement-js`), built by the toolchains a tenant in that language uses:
//! componentize-py from PyPI and componentize-js from npm, pinned in `tests/toolchains/`
//! (`requirements.txt`, `package-lock.json`) and installed there on first use, as the STS
//! server's packages are.
//!
//! A component is built into `<target>/guests/polyglot/` under a name holding the hash of
//! everything it is built from (its source, the WIT, the toolchain's pins), so a test run
//! builds each at most once, and a changed input builds it again. Installs and builds hold a
//! file lock: test processes running at once wait for each other instead of racing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, anyhow, bail};

/// A toolchain that builds components from another language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// componentize-py (CPython inside the component), in `tests/toolchains/.venv`.
    Python,
    /// componentize-js (StarlingMonkey inside the component), in `tests/toolchains/node_modules`.
    JavaScript,
}

/// One guest example written in another language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolyglotGuest {
    /// Its directory in `guest-examples/`.
    pub name: &'static str,
    /// Its source file there.
    pub source: &'static str,
    /// What builds it.
    pub toolchain: Toolchain,
}

/// The seed's settlement handler in Python.
pub const SETTLEMENT_PYTHON: PolyglotGuest = PolyglotGuest {
    name: "settlement-python",
    source: "app.py",
    toolchain: Toolchain::Python,
};

/// The seed's settlement handler in JavaScript.
pub const SETTLEMENT_JS: PolyglotGuest = PolyglotGuest {
    name: "settlement-js",
    source: "app.js",
    toolchain: Toolchain::JavaScript,
};

/// The world both examples are built against.
const WORLD: &str = "subscriber";

impl PolyglotGuest {
    /// The built component (`settlement_python.wasm` ...), building it first when no build of
    /// the current inputs exists.
    ///
    /// # Errors
    /// When the toolchain cannot be installed (no `python3` with venv, no `npm`, no registry),
    /// or the build fails: what the toolchain said.
    pub fn build(self) -> Result<PathBuf> {
        // One build at a time in this process: both examples share the output directory.
        static BUILDING: Mutex<()> = Mutex::new(());
        let _one = BUILDING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tools = self.toolchain.ensure_installed()?;
        let dir = output_dir();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let stem = self.name.replace('-', "_");
        let hash = self.input_hash()?;
        let out = dir.join(format!("{stem}-{}.wasm", &hash[..16]));
        let lock = lock_file(&dir.join(format!("{stem}.lock")))?;
        if !out.is_file() {
            let partial = dir.join(format!("{stem}.partial.wasm"));
            self.run_build(&tools, &partial)?;
            std::fs::rename(&partial, &out)
                .with_context(|| format!("moving the build to {}", out.display()))?;
        }
        drop(lock);
        Ok(out)
    }

    /// Its directory in `guest-examples/`.
    pub fn dir(self) -> PathBuf {
        repo_root().join("guest-examples").join(self.name)
    }

    /// The hex SHA-256 of what the component is built from.
    fn input_hash(self) -> Result<String> {
        let mut inputs = Vec::new();
        inputs.extend_from_slice(self.name.as_bytes());
        let mut files = vec![
            self.dir().join(self.source),
            toolchains_dir().join(self.toolchain.pins()),
        ];
        let wit = repo_root().join("wit");
        let mut wit_files: Vec<PathBuf> = std::fs::read_dir(&wit)
            .with_context(|| format!("reading {}", wit.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect();
        wit_files.sort();
        files.extend(wit_files);
        for file in files {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            inputs.extend_from_slice(file.to_string_lossy().as_bytes());
            inputs.extend_from_slice(&bytes);
        }
        Ok(ruststream_runtime::component::compile::content_hash(
            &inputs,
        ))
    }

    fn run_build(self, tools: &Path, out: &Path) -> Result<()> {
        let wit = repo_root().join("wit");
        let dir = self.dir();
        let mut command = match self.toolchain {
            Toolchain::Python => {
                let mut command = Command::new(tools.join("bin/componentize-py"));
                command
                    .arg("-d")
                    .arg(&wit)
                    .args(["-w", WORLD, "componentize", "-p"])
                    .arg(&dir)
                    .arg(Path::new(self.source).with_extension(""))
                    .arg("-o")
                    .arg(out);
                command
            }
            Toolchain::JavaScript => {
                let mut command = Command::new(tools.join(".bin/componentize-js"));
                command
                    .arg(dir.join(self.source))
                    .arg("--wit")
                    .arg(&wit)
                    .args(["--world-name", WORLD, "-o"])
                    .arg(out);
                command
            }
        };
        run(command.current_dir(&dir), "build the component")
    }
}

impl Toolchain {
    /// The file pinning its packages, in `tests/toolchains/`.
    fn pins(self) -> &'static str {
        match self {
            Self::Python => "requirements.txt",
            Self::JavaScript => "package-lock.json",
        }
    }

    /// Installs the toolchain if needed (at most once per process); returns the virtualenv
    /// (Python) or `node_modules` (JavaScript).
    fn ensure_installed(self) -> Result<PathBuf> {
        static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        static NODE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let once = match self {
            Self::Python => &PYTHON,
            Self::JavaScript => &NODE,
        };
        once.get_or_init(|| self.install().map_err(|e| format!("{e:#}")))
            .clone()
            .map_err(|e| anyhow!(e))
    }

    fn install(self) -> Result<PathBuf> {
        let dir = toolchains_dir();
        let pins = dir.join(self.pins());
        // The pin file doubles as the cross-process lock, as in `servers/`.
        let _lock = lock_file(&pins)?;
        let (installed, mark) = match self {
            Self::Python => (dir.join(".venv"), dir.join(".venv/installed")),
            Self::JavaScript => (
                dir.join("node_modules"),
                dir.join("node_modules/.package-lock.json"),
            ),
        };
        if !newer_than(&mark, &pins) {
            match self {
                Self::Python => install_python(&dir)?,
                Self::JavaScript => run(
                    Command::new("npm")
                        .args(["ci", "--no-audit", "--no-fund"])
                        .current_dir(&dir),
                    "install componentize-js (Node.js 20 or later, with npm, is needed)",
                )?,
            }
        }
        Ok(installed)
    }
}

fn install_python(dir: &Path) -> Result<()> {
    let doing = "install componentize-py (python3 with venv and pip is needed)";
    run(
        Command::new("python3")
            .args(["-m", "venv", "--clear", ".venv"])
            .current_dir(dir),
        doing,
    )?;
    run(
        Command::new(dir.join(".venv/bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg("requirements.txt")
            .current_dir(dir),
        doing,
    )?;
    let mark = dir.join(".venv/installed");
    std::fs::write(&mark, "").with_context(|| format!("writing {}", mark.display()))
}

/// Whether `file` exists and was written after `than`.
fn newer_than(file: &Path, than: &Path) -> bool {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    matches!((modified(file), modified(than)), (Some(f), Some(t)) if f >= t)
}

/// `path`, opened (created if missing) and locked exclusively until the file is dropped.
fn lock_file(path: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// Runs `command` to `doing`; its output is the error when it fails.
fn run(command: &mut Command, doing: &str) -> Result<()> {
    let shown = format!("{:?}", command);
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {shown} to {doing}"))?;
    if !output.status.success() {
        bail!(
            "{shown} failed to {doing} ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
    Ok(())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

fn toolchains_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("toolchains")
}

/// `<target>/guests/polyglot`, beside the Rust guests' own target dir.
fn output_dir() -> PathBuf {
    let guests = PathBuf::from(crate::GUEST_DIR);
    guests
        .ancestors()
        .nth(2)
        .map_or_else(|| guests.join("polyglot"), |dir| dir.join("polyglot"))
}
