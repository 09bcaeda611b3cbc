//! `ruststream test COMPONENT --records RECORDS.jsonl --expect EXPECT.toml`: runs a component,
//! built by any toolchain, on `TestApp`'s in-process streams in paused time, feeds it the
//! records of a JSON-lines file, and checks what came of them against an expectations file:
//! each record's outcome for each subscription, what the component published and was refused,
//! where each checkpoint ends. The streams that exist are those of [`crate::streams`]: by
//! default every stream, as in an account holding every stream the component names.
//!
//! It goes through the runtime's public testing API only (`TestApp`), so it runs whatever
//! form of the contract the runtime accepts. Exit status: 0 when every expectation holds, 1
//! when one does not, 2 when the input is bad (a file that cannot be read or parsed, a
//! component refused), with one line naming the file and line.
//!
//! Modules: `records` (the records file), `expect` (the expectations file), `run` (the
//! component fed the records: what happened), `verdict` (what happened against what was
//! expected), `report` (the printed report).

mod expect;
mod records;
mod report;
mod run;
mod verdict;

use std::io::Write;
use std::path::{Path, PathBuf};

use ruststream_common::escape::escape_controls;

use ruststream_runtime::{
    component::compile::CompileLimits,
    testing::{ExistingStreams, MissingStream, TestAppError},
};

use ruststream_fleet::engine::{CompileCache, EngineError, runtime_config};

/// Exit status of a run whose expectations do not all hold.
pub const FAILED: u8 = 1;
/// Exit status of a run that could not be made: bad files, a component refused.
pub const BAD_INPUT: u8 = 2;

/// Why a test could not be run, or stopped: the file (and line or entry) at fault. Shown as
/// one line with its causes (`one_line`), each message is the file's name and what is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestRunError {
    /// A file could not be read.
    #[error("cannot read {}", shown(.file))]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of the records file is not a record (line 0: the file as a whole).
    #[error("{}{}: {message}", shown(.file), line_suffix(*.line))]
    Records {
        /// The records file.
        file: PathBuf,
        /// The line (1-based), or 0 for the whole file.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The expectations file is malformed or does not fit the records and the component.
    #[error("{}: {message}", shown(.file))]
    Expect {
        /// The expectations file.
        file: PathBuf,
        /// What is wrong, with the line or the entry.
        message: String,
    },
    /// The runtime could not start or the component was refused.
    #[error("{}", shown(.file))]
    Component {
        /// The component file.
        file: PathBuf,
        /// Why (boxed: the error is large, and every result of the verb carries this type).
        #[source]
        source: Box<TestAppError>,
    },
    /// With listed streams, streams the component reads or dead-letters into are not among
    /// them.
    #[error("{}: {}", shown(.file), crate::streams::missing(.missing))]
    MissingStreams {
        /// The component file.
        file: PathBuf,
        /// Each stream missing, and what for.
        missing: Vec<MissingStream>,
    },
    /// Running the records failed (the app never settles, a record cannot be published).
    #[error("running {}", shown(.file))]
    Run {
        /// The component file.
        file: PathBuf,
        /// Why.
        #[source]
        source: Box<TestAppError>,
    },
    /// The runtime the component runs on cannot be made.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The report cannot be written to the output.
    #[error("cannot write the report")]
    Output(#[source] std::io::Error),
}

impl TestRunError {
    /// The exit status it stands for: a run that went wrong is a failed test ([`FAILED`]),
    /// anything else is bad input ([`BAD_INPUT`]).
    pub fn exit_status(&self) -> u8 {
        match self {
            Self::Run { .. } => FAILED,
            _ => BAD_INPUT,
        }
    }
}

fn shown(file: &Path) -> String {
    escape_controls(&file.display().to_string()).into_owned()
}

fn line_suffix(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(", line {line}")
    }
}

/// A file's text.
///
/// # Errors
/// [`TestRunError::Read`].
fn read_text(file: &Path) -> Result<String, TestRunError> {
    std::fs::read_to_string(file).map_err(|source| TestRunError::Read {
        file: file.to_owned(),
        source,
    })
}

/// What `ruststream test` runs and checks.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// The component file (`.wasm`).
    pub component: PathBuf,
    /// The records, one JSON object a line.
    pub records: PathBuf,
    /// The expectations: TOML, or JSON for a `.json` file.
    pub expect: PathBuf,
    /// Which streams exist.
    pub streams: ExistingStreams,
    /// Where compiled components are cached.
    pub compile: CompileCache,
}

/// Runs `ruststream test`: reads both files, runs the component, writes the report to `out`,
/// and returns whether every expectation held (the verb exits 0, else [`FAILED`]).
///
/// # Errors
/// A file that cannot be read or parsed, a component refused, a run that cannot finish, or
/// `out`; [`TestRunError::exit_status`] is the verb's exit status for each.
pub async fn test(args: &TestOptions, out: &mut dyn Write) -> Result<bool, TestRunError> {
    let records = records::read(&args.records)?;
    let expected = expect::read(&args.expect)?;
    let config = runtime_config(
        CompileLimits::default(),
        args.compile.cache_dir(None),
        false,
    )?;
    let observed = run::run(
        &args.component,
        config,
        &args.streams,
        (&args.records, &records),
        &expected,
    )
    .await?;
    let checks =
        verdict::judge(&records, &expected, &observed).map_err(|message| TestRunError::Expect {
            file: args.expect.clone(),
            message,
        })?;
    let passed = checks.iter().all(|check| check.passed);
    let report = report::render(&args.component, &observed, &checks);
    out.write_all(report.as_bytes())
        .map_err(TestRunError::Output)?;
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path) -> TestOptions {
        TestOptions {
            component: dir.join("app.wasm"),
            records: dir.join("records.jsonl"),
            expect: dir.join("expect.toml"),
            streams: ExistingStreams::Any,
            compile: CompileCache::default(),
        }
    }

    /// `test` on the files in `dir`, which fails before any component is loaded: the error,
    /// and that no report was written.
    async fn refused(dir: &Path) -> Option<TestRunError> {
        let mut out = Vec::new();
        let error = test(&options(dir), &mut out).await.err();
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
        error
    }

    #[tokio::test]
    async fn a_missing_file_and_a_bad_line_are_named() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-testrun-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let missing = refused(&dir).await;
        assert!(
            matches!(&missing, Some(TestRunError::Read { file, .. }) if *file == dir.join("records.jsonl")),
            "{missing:?}"
        );
        assert_eq!(missing.map(|e| e.exit_status()), Some(BAD_INPUT));
        std::fs::write(dir.join("records.jsonl"), "{\"json\": 1}\n{nope\n")?;
        let bad = refused(&dir).await;
        assert!(
            matches!(&bad, Some(TestRunError::Records { line: 2, .. })),
            "{bad:?}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
