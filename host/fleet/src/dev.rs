//! `ruststream dev`: a tenant developer's loop. Builds a tenant crate into its component (or
//! takes a component file), runs it on `TestApp`'s in-process streams, feeds it records as
//! JSON lines from stdin or a file, and prints what each record came to for every subscriber:
//! outcomes, where the checkpoint stands, the record held in front of it, and the log lines
//! the record caused. With `--watch` it rebuilds on every save and hot-swaps the running app
//! to the new version, keeping the streams, checkpoints and held records; a build or load
//! that fails is one line, and the running version goes on.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};
use ruststream_runtime::{
    TestApp,
    component::compile::CompileLimits,
    escape::{escape_controls, one_line},
    log::{LogLine, Origin},
    record::Published,
};
use tokio::sync::mpsc;

use crate::engine::{CompileCache, runtime_config};
use crate::watch::FileWatch;

/// The target tenant components are built for.
const TARGET: &str = "wasm32-wasip2";

/// Lines read ahead of the app from the records' input.
const READ_AHEAD: usize = 64;

/// What `ruststream dev` runs and how.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// A tenant crate (a directory with Cargo.toml, built with `cargo build --release --target
    /// wasm32-wasip2` into its own target/), or a component file (`.wasm`).
    pub path: PathBuf,
    /// Read the records, one JSON value a line, from this file instead of stdin.
    pub records: Option<PathBuf>,
    /// The stream the records are published to [default: the stream of the component's
    /// first subscription].
    pub stream: Option<String>,
    /// Rebuild (or reload the component file) on every change and swap the new version in.
    pub watch: bool,
    /// Where compiled components are cached.
    pub compile: CompileCache,
}

/// Runs `ruststream dev`: until the records end, or with `--watch` until Ctrl-C.
///
/// # Errors
/// When the first build or load fails, the records file cannot be opened or read, or no
/// stream is named and the component subscribes to none.
pub async fn dev(args: DevOptions) -> anyhow::Result<()> {
    let source = Source::at(&args.path)?;
    let input = open_records(args.records.as_deref())?;
    let component = source.build().await?;
    let config = runtime_config(
        CompileLimits::default(),
        args.compile.cache_dir(None),
        false,
    )?;
    let app = TestApp::builder(&component).runtime(config).start().await?;
    let mut session = Session::new(app, args.stream, source);
    session.show_app(&component);
    let stream = session.stream()?;
    let from = args.records.as_ref().map_or_else(
        || "stdin".to_owned(),
        |path| escape_controls(&path.display().to_string()).into_owned(),
    );
    // Watching before saying so: a change made once this line is out is seen.
    let watch = if args.watch {
        Some(FileWatch::new(&session.source.watched())?)
    } else {
        None
    };
    println!("records: JSON lines from {from}, to stream `{stream}`\n");
    session.serve(read_lines(input), watch).await
}

/// What `dev` runs: a tenant crate to build, or a component file.
enum Source {
    /// A directory holding `Cargo.toml`.
    Crate(PathBuf),
    /// A `.wasm` file.
    Component(PathBuf),
}

impl Source {
    /// A crate when `path` is a directory, else a component file.
    fn at(path: &Path) -> anyhow::Result<Self> {
        if path.is_dir() {
            let manifest = path.join("Cargo.toml");
            anyhow::ensure!(
                manifest.is_file(),
                "{} is a directory without Cargo.toml: give a tenant crate or a .wasm file",
                path.display()
            );
            return Ok(Self::Crate(path.to_owned()));
        }
        anyhow::ensure!(path.is_file(), "{} does not exist", path.display());
        Ok(Self::Component(path.to_owned()))
    }

    /// What `--watch` watches: the crate's sources and manifest, or the component file.
    fn watched(&self) -> Vec<PathBuf> {
        match self {
            Self::Crate(dir) => vec![dir.join("src"), dir.join("Cargo.toml")],
            Self::Component(file) => vec![file.clone()],
        }
    }

    /// The component file to load: built first for a crate.
    async fn build(&self) -> anyhow::Result<PathBuf> {
        match self {
            Self::Component(file) => Ok(file.clone()),
            Self::Crate(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || build_crate(&dir))
                    .await
                    .context("the build task failed")?
            }
        }
    }
}

/// Builds the tenant crate in `dir` as `cargo build-component` does, into the crate's own
/// `target/` (never a target directory set in the environment, which another build may hold
/// locked), and returns the `.wasm` it produced. Cargo's progress and diagnostics go to
/// stderr as they come.
fn build_crate(dir: &Path) -> anyhow::Result<PathBuf> {
    // Absolute, so that messages and cargo's paths name the crate wherever `dev` was started.
    let dir = &dir
        .canonicalize()
        .with_context(|| format!("cannot find the crate {}", dir.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--release", "--target", TARGET])
        .args([
            "--message-format",
            "json-render-diagnostics",
            "--target-dir",
        ])
        .arg(dir.join("target"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run cargo to build {}", dir.display()))?;
    if !output.status.success() {
        bail!(
            "cargo build in {} failed ({}): see its errors above",
            dir.display(),
            output.status
        );
    }
    built_component(&output.stdout, &dir.join("Cargo.toml")).with_context(|| {
        format!(
            "cargo built {} but no .wasm: is its [lib] crate-type = [\"cdylib\"]?",
            dir.display()
        )
    })
}

/// The `.wasm` file among the artifacts cargo reported (one JSON message a line) for the
/// package whose manifest is `manifest`.
fn built_component(messages: &[u8], manifest: &Path) -> Option<PathBuf> {
    messages
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| {
            let reported = message["manifest_path"].as_str().map(Path::new);
            reported.is_some_and(|path| {
                path == manifest || path.canonicalize().ok().as_deref() == Some(manifest)
            })
        })
        .filter_map(|message| message["filenames"].as_array().cloned())
        .flatten()
        .filter_map(|file| file.as_str().map(PathBuf::from))
        .find(|file| file.extension().is_some_and(|ext| ext == "wasm"))
}

/// Opens the records file, or stdin when there is none.
fn open_records(path: Option<&Path>) -> anyhow::Result<Box<dyn BufRead + Send>> {
    match path {
        None => Ok(Box::new(std::io::BufReader::new(std::io::stdin()))),
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot open the records file {}", path.display()))?;
            Ok(Box::new(std::io::BufReader::new(file)))
        }
    }
}

/// Reads `input` line by line on a thread of its own (reading stdin blocks), each line's
/// bytes as they are: one that is not UTF-8 is reported as not JSON, not as a read error.
/// The channel closes at the end of the input, after a read error if there is one.
fn read_lines(mut input: Box<dyn BufRead + Send>) -> mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (sender, lines) = mpsc::channel(READ_AHEAD);
    std::thread::spawn(move || {
        loop {
            let mut line = Vec::new();
            let sent = match input.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => sender.blocking_send(Ok(line)),
                Err(error) => {
                    let _ = sender.blocking_send(Err(error));
                    return;
                }
            };
            // The app is gone: nobody reads further lines.
            if sent.is_err() {
                return;
            }
        }
    });
    lines
}

/// The running app and what has been shown of it.
struct Session {
    app: TestApp,
    /// `--stream`; else the first subscription's stream of the running version.
    stream: Option<String>,
    source: Source,
    /// Records fed so far.
    records: usize,
    /// Log lines already printed.
    logs_shown: usize,
}

impl Session {
    fn new(app: TestApp, stream: Option<String>, source: Source) -> Self {
        let logs_shown = app.logs().len();
        Self {
            app,
            stream,
            source,
            records: 0,
            logs_shown,
        }
    }

    /// Feeds each line as a record and, with `watch`, swaps in each rebuilt version, until
    /// the input ends (without `watch`) or Ctrl-C.
    async fn serve(
        &mut self,
        mut lines: mpsc::Receiver<std::io::Result<Vec<u8>>>,
        mut watch: Option<FileWatch>,
    ) -> anyhow::Result<()> {
        let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
        let mut reading = true;
        loop {
            tokio::select! {
                line = lines.recv(), if reading => match line {
                    Some(line) => self.feed(&line.context("cannot read the records")?).await,
                    None if watch.is_none() => return Ok(()),
                    None => {
                        reading = false;
                        println!("end of records; watching for changes (Ctrl-C stops)");
                    }
                },
                changed = next_change(&mut watch) => self.reload(&changed).await,
                _ = &mut interrupt => return Ok(()),
            }
        }
    }

    /// The stream records go to.
    fn stream(&self) -> anyhow::Result<String> {
        let first = || {
            self.app
                .app()
                .subscriptions
                .first()
                .map(|s| s.stream.clone())
        };
        self.stream.clone().or_else(first).context(
            "the component subscribes to no stream: name one for the records with --stream",
        )
    }

    /// Publishes one line as a record and prints what it came to.
    async fn feed(&mut self, line: &[u8]) {
        if line.trim_ascii().is_empty() {
            return;
        }
        self.records += 1;
        let number = self.records;
        let value = match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(value) => value,
            Err(error) => return println!("record {number}: not JSON ({error}); skipped"),
        };
        let stream = match self.stream() {
            Ok(stream) => stream,
            Err(error) => return println!("record {number}: {error:#}; skipped"),
        };
        self.app.create_stream(&stream);
        let before = self.calls();
        match self.app.publish(&stream, &value).await {
            Ok(Published {
                sequence_number, ..
            }) => println!("record {number} -> {stream} {sequence_number}: {value}"),
            Err(error) => println!("record {number} -> {stream}: {}", one_line(&error)),
        }
        self.show_subscribers(&before, Some(&stream));
        self.show_logs();
    }

    /// Rebuilds after `changed` and swaps the new version in; a failure is one line and the
    /// running version goes on.
    async fn reload(&mut self, changed: &[PathBuf]) {
        let shown: Vec<_> = changed.iter().map(|p| p.display().to_string()).collect();
        println!("changed: {}", escape_controls(&shown.join(", ")));
        let running = self.running();
        let component = match self.source.build().await {
            Ok(component) => component,
            Err(error) => return println!("build failed: {error:#}; still running {running}"),
        };
        let before = self.calls();
        if let Err(error) = self.app.swap(&component).await {
            self.show_logs();
            return println!("load failed: {}; still running {running}", one_line(&error));
        }
        println!("swapped {running} for {}", self.running());
        self.show_app(&component);
        self.show_subscribers(&before, None);
        self.show_logs();
    }

    /// The app and version running, as `ledger 0.1.0`.
    fn running(&self) -> String {
        let app = self.app.app();
        format!("{} {}", app.name, app.version)
    }

    fn show_app(&self, component: &Path) {
        let shown = component.display().to_string();
        println!("loaded {}: app {}", escape_controls(&shown), self.running());
        for s in &self.app.app().subscriptions {
            println!("  subscriber `{}` on stream `{}`", s.name, s.stream);
        }
    }

    /// How many calls each subscriber has had.
    fn calls(&self) -> HashMap<String, usize> {
        (self.app.app().subscriptions.iter())
            .filter_map(|s| Some((s.name.clone(), self.app.subscriber(&s.name).ok()?.calls())))
            .collect()
    }

    /// One line per subscriber that reads `stream` or was called since `before`: the
    /// outcomes since, the checkpoint and the held record. Every subscriber without `stream`.
    fn show_subscribers(&self, before: &HashMap<String, usize>, stream: Option<&str>) {
        for s in &self.app.app().subscriptions {
            let Ok(view) = self.app.subscriber(&s.name) else {
                continue;
            };
            let seen = before.get(&s.name).copied().unwrap_or(0);
            let outcomes: Vec<String> = view
                .outcomes()
                .iter()
                .skip(seen)
                .map(|o| o.to_string())
                .collect();
            if outcomes.is_empty() && stream.is_some_and(|stream| stream != s.stream) {
                continue;
            }
            let outcomes = if outcomes.is_empty() {
                "-".to_owned()
            } else {
                outcomes.join(", ")
            };
            println!(
                "  {}: {outcomes} | checkpoint {} | held at {}",
                s.name,
                view.checkpoint().unwrap_or("(none)"),
                view.held_at().unwrap_or("-"),
            );
        }
    }

    /// Prints the log lines not shown yet.
    fn show_logs(&mut self) {
        let logs = self.app.logs();
        for line in logs.iter().skip(self.logs_shown) {
            println!("  {}", short_line(line));
        }
        self.logs_shown = logs.len();
    }
}

/// Waits for the next debounced change, or forever without a watch.
async fn next_change(watch: &mut Option<FileWatch>) -> Vec<PathBuf> {
    match watch {
        Some(watch) => watch.changed().await,
        None => std::future::pending().await,
    }
}

/// A log line without the tags `dev` shows already (tenant, component, stream, record).
pub(crate) fn short_line(line: &LogLine) -> String {
    let who = match line.origin {
        Origin::Guest => "guest",
        Origin::Runtime => "host",
    };
    let level = format!("{:?}", line.level).to_lowercase();
    let mut text = format!("{who} {level}: {}", line.message);
    for (name, value) in &line.fields {
        text.push_str(&format!(" {name}={value}"));
    }
    escape_controls(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_is_the_wasm_artifact_of_the_crate_itself() {
        let messages = br#"{"reason":"compiler-artifact","manifest_path":"/dep/Cargo.toml","filenames":["/t/libdep.rlib"]}
{"reason":"compiler-artifact","manifest_path":"/crate/Cargo.toml","filenames":["/t/wasm32-wasip2/release/ledger_book.wasm"]}
not json
{"reason":"build-finished","success":true}
"#;
        assert_eq!(
            built_component(messages, Path::new("/crate/Cargo.toml")),
            Some(PathBuf::from("/t/wasm32-wasip2/release/ledger_book.wasm"))
        );
        assert_eq!(
            built_component(messages, Path::new("/other/Cargo.toml")),
            None
        );
    }

    #[test]
    fn a_directory_without_a_manifest_is_refused_by_name() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let error = Source::at(&dir)
            .err()
            .context("a directory without Cargo.toml")?;
        assert!(
            format!("{error:#}").contains("without Cargo.toml"),
            "{error:#}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
