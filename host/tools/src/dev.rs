//! `ruststream dev`: a tenant developer's loop. Builds a tenant crate into its component (or
//! takes a component file), runs it on `TestApp`'s in-process streams, feeds it records as
//! JSON lines from stdin or a file, and prints what each record came to for every subscriber:
//! outcomes, where the checkpoint stands, the record held in front of it, every publish the
//! component was refused, and the log lines the record caused. The streams that exist are
//! those of [`crate::streams`]: by default every stream, as in an account holding every
//! stream the component names. With `--watch` it rebuilds on every save and hot-swaps the
//! running app to the new version, keeping the streams, checkpoints and held records; a build
//! or load that fails is one line, and the running version goes on.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use ruststream_common::escape::{escape_controls, one_line};

use ruststream_runtime::{
    TestApp,
    component::compile::CompileLimits,
    log::{LogLine, Origin},
    publish::RefusedPublish,
    record::Published,
    testing::{ExistingStreams, MissingStream, TestAppError},
};
use tokio::sync::mpsc;

use ruststream_fleet::engine::{CompileCache, EngineError, runtime_config};
use ruststream_fleet::watch::{FileWatch, WatchError};

/// The target tenant components are built for.
const TARGET: &str = "wasm32-wasip2";

/// Lines read ahead of the app from the records' input.
const READ_AHEAD: usize = 64;

/// Why `dev` could not start, or stopped: the path, file or command it failed on. Once it
/// runs, a record that is not JSON and a rebuild that fails are lines of its output, not
/// errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevError {
    /// The path is a directory without a manifest.
    #[error(
        "{} is a directory without Cargo.toml: give a tenant crate or a .wasm file",
        path.display()
    )]
    NoManifest {
        /// The directory.
        path: PathBuf,
    },
    /// The path names nothing.
    #[error("{} does not exist", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// The records file cannot be opened.
    #[error("cannot open the records file {}", file.display())]
    OpenRecords {
        /// The records file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading the records (the file, or stdin) failed part way.
    #[error("cannot read the records from {from}")]
    ReadRecords {
        /// The records file, or `stdin`.
        from: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The crate's directory cannot be resolved.
    #[error("cannot find the crate {}", dir.display())]
    FindCrate {
        /// The crate's directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Cargo cannot be run.
    #[error("cannot run cargo to build {}", dir.display())]
    RunCargo {
        /// The crate's directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The build failed (cargo's errors went to stderr).
    #[error("cargo build in {} failed ({status}): see its errors above", dir.display())]
    BuildFailed {
        /// The crate's directory.
        dir: PathBuf,
        /// How cargo exited.
        status: ExitStatus,
    },
    /// The build made no component.
    #[error(
        "cargo built {} but no .wasm: is its [lib] crate-type = [\"cdylib\"]?",
        dir.display()
    )]
    NoComponent {
        /// The crate's directory.
        dir: PathBuf,
    },
    /// The task the build ran on panicked or was cancelled.
    #[error("the build task failed")]
    BuildTask(#[source] tokio::task::JoinError),
    /// The runtime the component runs on cannot be made.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The component cannot be loaded and started.
    #[error("starting {}", component.display())]
    Start {
        /// The component file.
        component: PathBuf,
        /// Why (boxed: the error is large).
        #[source]
        source: Box<TestAppError>,
    },
    /// With listed streams, streams the component reads or dead-letters into are not among
    /// them.
    #[error("starting {}: {}", component.display(), crate::streams::missing(.missing))]
    MissingStreams {
        /// The component file.
        component: PathBuf,
        /// Each stream missing, and what for.
        missing: Vec<MissingStream>,
    },
    /// With listed streams, the stream the records go to is not among them.
    #[error(
        "the records go to stream `{}`, which does not exist: with --streams listed, name it \
         with --with-stream",
        escape_controls(.0)
    )]
    RecordsStreamMissing(String),
    /// `--watch` cannot watch the crate or the component file.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// No `--stream`, and the component subscribes to none.
    #[error("the component subscribes to no stream: name one for the records with --stream")]
    NoStream,
    /// What `dev` shows cannot be written to the output.
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
}

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
    /// Which streams exist.
    pub streams: ExistingStreams,
    /// Where compiled components are cached.
    pub compile: CompileCache,
}

/// Runs `ruststream dev` until the records end, or with `--watch` until Ctrl-C, writing what
/// each record and each rebuild came to to `out` as it happens.
///
/// # Errors
/// When the first build or load fails, the records file cannot be opened or read, no stream
/// is named and the component subscribes to none, streams are listed and one the component
/// or the records need is not among them, or `out` cannot be written; see [`DevError`].
pub async fn dev(args: DevOptions, out: &mut dyn Write) -> Result<(), DevError> {
    let source = Source::at(&args.path)?;
    let input = open_records(args.records.as_deref())?;
    let component = source.build().await?;
    let config = runtime_config(
        CompileLimits::default(),
        args.compile.cache_dir(None),
        false,
    )?;
    let app = TestApp::builder(&component)
        .runtime(config)
        .streams(args.streams.clone())
        .start()
        .await
        .map_err(|source| match source {
            TestAppError::MissingStreams(missing) => DevError::MissingStreams {
                component: component.clone(),
                missing,
            },
            source => DevError::Start {
                component: component.clone(),
                source: Box::new(source),
            },
        })?;
    let from = args.records.as_ref().map_or_else(
        || "stdin".to_owned(),
        |path| escape_controls(&path.display().to_string()).into_owned(),
    );
    let mut session = Session::new(app, args.stream, source, out);
    session.show_app(&component)?;
    writeln!(session.out, "  {}", crate::streams::describe(&args.streams))?;
    // What it tried to publish while it was loaded.
    session.show_refusals()?;
    let stream = session.stream()?;
    if args.streams != ExistingStreams::Any && !session.app.stream_names().contains(&stream) {
        return Err(DevError::RecordsStreamMissing(stream));
    }
    // Watching before saying so: a change made once this line is out is seen.
    let watch = if args.watch {
        Some(FileWatch::new(&session.source.watched())?)
    } else {
        None
    };
    writeln!(
        session.out,
        "records: JSON lines from {from}, to stream `{stream}`\n"
    )?;
    session.serve(read_lines(input), watch, &from).await
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
    fn at(path: &Path) -> Result<Self, DevError> {
        let path = path.to_owned();
        if path.is_dir() {
            if !path.join("Cargo.toml").is_file() {
                return Err(DevError::NoManifest { path });
            }
            return Ok(Self::Crate(path));
        }
        if !path.is_file() {
            return Err(DevError::Missing { path });
        }
        Ok(Self::Component(path))
    }

    /// What `--watch` watches: the crate's sources and manifest, or the component file.
    fn watched(&self) -> Vec<PathBuf> {
        match self {
            Self::Crate(dir) => vec![dir.join("src"), dir.join("Cargo.toml")],
            Self::Component(file) => vec![file.clone()],
        }
    }

    /// The component file to load: built first for a crate.
    async fn build(&self) -> Result<PathBuf, DevError> {
        match self {
            Self::Component(file) => Ok(file.clone()),
            Self::Crate(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || build_crate(&dir))
                    .await
                    .map_err(DevError::BuildTask)?
            }
        }
    }
}

/// Builds the tenant crate in `dir` as `cargo build-component` does, into the crate's own
/// `target/` (never a target directory set in the environment, which another build may hold
/// locked), and returns the `.wasm` it produced. Cargo's progress and diagnostics go to
/// stderr as they come.
fn build_crate(dir: &Path) -> Result<PathBuf, DevError> {
    // Absolute, so that messages and cargo's paths name the crate wherever `dev` was started.
    let dir = &dir.canonicalize().map_err(|source| DevError::FindCrate {
        dir: dir.to_owned(),
        source,
    })?;
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
        .map_err(|source| DevError::RunCargo {
            dir: dir.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(DevError::BuildFailed {
            dir: dir.clone(),
            status: output.status,
        });
    }
    built_component(&output.stdout, &dir.join("Cargo.toml"))
        .ok_or_else(|| DevError::NoComponent { dir: dir.clone() })
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
fn open_records(path: Option<&Path>) -> Result<Box<dyn BufRead + Send>, DevError> {
    match path {
        None => Ok(Box::new(std::io::BufReader::new(std::io::stdin()))),
        Some(path) => {
            let file = std::fs::File::open(path).map_err(|source| DevError::OpenRecords {
                file: path.to_owned(),
                source,
            })?;
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
struct Session<'a> {
    app: TestApp,
    /// `--stream`; else the first subscription's stream of the running version.
    stream: Option<String>,
    source: Source,
    /// Where everything `dev` shows is written.
    out: &'a mut dyn Write,
    /// Records fed so far.
    records: usize,
    /// Log lines already shown.
    logs_shown: usize,
    /// The number of each record fed, by its sequence number.
    fed: HashMap<String, usize>,
    /// How many of each refused publish noted (by its place in the app's list) were shown.
    refusals_shown: Vec<u64>,
    /// How many refused publishes past those noted were shown, by subscriber and record.
    unlisted_shown: HashMap<(Option<String>, Option<String>), u64>,
}

impl<'a> Session<'a> {
    fn new(app: TestApp, stream: Option<String>, source: Source, out: &'a mut dyn Write) -> Self {
        let logs_shown = app.logs().len();
        Self {
            app,
            stream,
            source,
            out,
            records: 0,
            logs_shown,
            fed: HashMap::new(),
            refusals_shown: Vec::new(),
            unlisted_shown: HashMap::new(),
        }
    }

    /// Feeds each line as a record and, with `watch`, swaps in each rebuilt version, until
    /// the input ends (without `watch`) or Ctrl-C. `from` names the input in an error.
    async fn serve(
        &mut self,
        mut lines: mpsc::Receiver<std::io::Result<Vec<u8>>>,
        mut watch: Option<FileWatch>,
        from: &str,
    ) -> Result<(), DevError> {
        let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
        let mut reading = true;
        loop {
            tokio::select! {
                line = lines.recv(), if reading => match line {
                    Some(Ok(line)) => self.feed(&line).await?,
                    Some(Err(source)) => {
                        return Err(DevError::ReadRecords { from: from.to_owned(), source });
                    }
                    None if watch.is_none() => return Ok(()),
                    None => {
                        reading = false;
                        writeln!(self.out, "end of records; watching for changes (Ctrl-C stops)")?;
                    }
                },
                changed = next_change(&mut watch) => self.reload(&changed).await?,
                _ = &mut interrupt => return Ok(()),
            }
        }
    }

    /// The stream records go to.
    fn stream(&self) -> Result<String, DevError> {
        let first = || {
            self.app
                .app()
                .subscriptions
                .first()
                .map(|s| s.stream.clone())
        };
        self.stream.clone().or_else(first).ok_or(DevError::NoStream)
    }

    /// Publishes one line as a record and shows what it came to.
    async fn feed(&mut self, line: &[u8]) -> Result<(), DevError> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        self.records += 1;
        let number = self.records;
        let value = match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(value) => value,
            Err(error) => {
                writeln!(self.out, "record {number}: not JSON ({error}); skipped")?;
                return Ok(());
            }
        };
        let stream = match self.stream() {
            Ok(stream) => stream,
            Err(error) => {
                writeln!(self.out, "record {number}: {error}; skipped")?;
                return Ok(());
            }
        };
        let before = self.calls();
        match self.app.publish(&stream, &value).await {
            Ok(Published {
                sequence_number, ..
            }) => {
                writeln!(
                    self.out,
                    "record {number} -> {stream} {sequence_number}: {value}"
                )?;
                self.fed.insert(sequence_number, number);
            }
            Err(error) => writeln!(
                self.out,
                "record {number} -> {stream}: {}",
                one_line(&error)
            )?,
        }
        self.show_subscribers(&before, Some(&stream))?;
        self.show_refusals()?;
        self.show_logs()
    }

    /// Rebuilds after `changed` and swaps the new version in; a failure is one line and the
    /// running version goes on.
    async fn reload(&mut self, changed: &[PathBuf]) -> Result<(), DevError> {
        let shown: Vec<_> = changed.iter().map(|p| p.display().to_string()).collect();
        writeln!(self.out, "changed: {}", escape_controls(&shown.join(", ")))?;
        let running = self.running();
        let component = match self.source.build().await {
            Ok(component) => component,
            Err(error) => {
                let error = one_line(&error);
                writeln!(self.out, "build failed: {error}; still running {running}")?;
                return Ok(());
            }
        };
        let before = self.calls();
        if let Err(error) = self.app.swap(&component).await {
            self.show_logs()?;
            let error = one_line(&error);
            writeln!(self.out, "load failed: {error}; still running {running}")?;
            return Ok(());
        }
        writeln!(self.out, "swapped {running} for {}", self.running())?;
        self.show_app(&component)?;
        self.show_subscribers(&before, None)?;
        self.show_refusals()?;
        self.show_logs()
    }

    /// The app and version running, as `ledger 0.1.0`.
    fn running(&self) -> String {
        let app = self.app.app();
        format!("{} {}", app.name, app.version)
    }

    fn show_app(&mut self, component: &Path) -> Result<(), DevError> {
        let shown = component.display().to_string();
        let running = self.running();
        writeln!(
            self.out,
            "loaded {}: app {running}",
            escape_controls(&shown)
        )?;
        for s in &self.app.app().subscriptions {
            writeln!(
                self.out,
                "  subscriber `{}` on stream `{}`",
                s.name, s.stream
            )?;
        }
        Ok(())
    }

    /// How many calls each subscriber has had.
    fn calls(&self) -> HashMap<String, usize> {
        (self.app.app().subscriptions.iter())
            .filter_map(|s| Some((s.name.clone(), self.app.subscriber(&s.name).ok()?.calls())))
            .collect()
    }

    /// One line per subscriber that reads `stream` or was called since `before`: the
    /// outcomes since, the checkpoint and the held record. Every subscriber without `stream`.
    fn show_subscribers(
        &mut self,
        before: &HashMap<String, usize>,
        stream: Option<&str>,
    ) -> Result<(), DevError> {
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
            writeln!(
                self.out,
                "  {}: {outcomes} | checkpoint {} | held at {}",
                s.name,
                view.checkpoint().unwrap_or("(none)"),
                view.held_at().unwrap_or("-"),
            )?;
        }
        Ok(())
    }

    /// One line per publish refused since the last shown (a refusal noted before and refused
    /// again shows again, with the count since), naming the subscriber and the record.
    fn show_refusals(&mut self) -> Result<(), DevError> {
        let log = self.app.publish_notes();
        let noted = log.refused();
        self.refusals_shown.resize(noted.len(), 0);
        for (refused, shown) in noted.iter().zip(&mut self.refusals_shown) {
            if refused.count == *shown {
                continue;
            }
            let since = RefusedPublish {
                count: refused.count - *shown,
                ..refused.clone()
            };
            *shown = refused.count;
            let origin = origin(&since.sequence_number, since.chain.as_deref(), &self.fed);
            writeln!(
                self.out,
                "  publish refused, from {origin} {}: {}",
                crate::streams::by_whom(since.subscriber.as_deref()),
                crate::streams::refusal(&since)
            )?;
        }
        for (subscriber, record, count) in log.unlisted() {
            let shown = self
                .unlisted_shown
                .entry((subscriber.clone(), record.clone()))
                .or_default();
            if count == *shown {
                continue;
            }
            let more = count - *shown;
            *shown = count;
            let origin = origin(&record, None, &self.fed);
            writeln!(
                self.out,
                "  {more} more publishes refused, from {origin} {} (to other streams or for \
                 other reasons than those shown)",
                crate::streams::by_whom(subscriber.as_deref())
            )?;
        }
        Ok(())
    }

    /// Shows the log lines not shown yet.
    fn show_logs(&mut self) -> Result<(), DevError> {
        let logs = self.app.logs();
        for line in logs.iter().skip(self.logs_shown) {
            writeln!(self.out, "  {}", short_line(line))?;
        }
        self.logs_shown = logs.len();
        Ok(())
    }
}

/// `record 2 (sequence ...)`, `record 2 (a copy, sequence ...)` for a copy of a record fed,
/// a sequence number that is no record fed, or no record at all.
fn origin(sequence: &Option<String>, chain: Option<&str>, fed: &HashMap<String, usize>) -> String {
    let Some(sequence) = sequence else {
        return "outside any record".to_owned();
    };
    if let Some(number) = fed.get(sequence) {
        return format!("record {number} (sequence {sequence})");
    }
    // A copy names the record its chain started from as `shard/sequence`.
    let started = chain.and_then(|c| c.rsplit_once('/')).map(|(_, s)| s);
    match started.and_then(|s| fed.get(s)) {
        Some(number) => format!("record {number} (a copy, sequence {sequence})"),
        None => format!("sequence {sequence}"),
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

    fn options(path: PathBuf) -> DevOptions {
        DevOptions {
            path,
            records: None,
            stream: None,
            watch: false,
            streams: ExistingStreams::Any,
            compile: CompileCache::default(),
        }
    }

    #[tokio::test]
    async fn a_directory_without_a_manifest_is_refused_by_name() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut out = Vec::new();
        let error = dev(options(dir.clone()), &mut out).await;
        assert!(
            matches!(&error, Err(DevError::NoManifest { path }) if *path == dir),
            "{error:?}"
        );
        let shown = error.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.contains("without Cargo.toml"), "{shown}");
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_records_file_is_named() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-dev-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let component = dir.join("app.wasm");
        std::fs::write(&component, "not loaded: the records are opened first")?;
        let records = dir.join("missing.jsonl");
        let mut out = Vec::new();
        let error = dev(
            DevOptions {
                records: Some(records.clone()),
                ..options(component)
            },
            &mut out,
        )
        .await;
        assert!(
            matches!(&error, Err(DevError::OpenRecords { file, .. }) if *file == records),
            "{error:?}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
