//! `ruststream test COMPONENT --records RECORDS.jsonl --expect EXPECT.toml`: runs a component,
//! built by any toolchain, on `TestApp`'s in-process streams in paused time, feeds it the
//! records of a JSON-lines file, and checks what came of them against an expectations file:
//! each record's outcome, what the component published, where each checkpoint ends.
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

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ruststream_runtime::{
    component::compile::CompileLimits,
    escape::{escape_controls, one_line},
    testing::TestAppError,
};

use crate::engine::{CompileCache, runtime_config};

/// Exit status of a run whose expectations do not all hold.
const FAILED: u8 = 1;
/// Exit status of a run that could not be made: bad files, a component refused.
const BAD_INPUT: u8 = 2;

/// Why a test could not be run, or stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TestRunError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", shown(.file))]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
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
    #[error("{}: {}", shown(.file), one_line(.source))]
    Component {
        /// The component file.
        file: PathBuf,
        /// Why (boxed: the error is large, and every result of the verb carries this type).
        source: Box<TestAppError>,
    },
    /// Running the records failed (the app never settles, a record cannot be published).
    #[error("running {}: {}", shown(.file), one_line(.source))]
    Run {
        /// The component file.
        file: PathBuf,
        /// Why.
        source: Box<TestAppError>,
    },
    /// The command line cannot be acted on.
    #[error("{0}")]
    Setup(String),
}

impl TestRunError {
    /// The exit status it stands for: a run that went wrong is a failed test, anything else
    /// is bad input.
    fn exit_status(&self) -> u8 {
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
    /// Where compiled components are cached.
    pub compile: CompileCache,
}

/// Runs `ruststream test` and prints its report; the exit status says how it went (0 all
/// expectations held, 1 one did not, 2 bad input).
pub async fn test(args: TestOptions) -> ExitCode {
    match run_and_report(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(FAILED),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(error.exit_status())
        }
    }
}

/// Reads both files, runs the component and prints the report; whether every expectation
/// held.
async fn run_and_report(args: &TestOptions) -> Result<bool, TestRunError> {
    let records = records::read(&args.records)?;
    let expected = expect::read(&args.expect)?;
    let config = runtime_config(
        CompileLimits::default(),
        args.compile.cache_dir(None),
        false,
    )
    .map_err(|error| TestRunError::Setup(format!("{error:#}")))?;
    let observed = run::run(
        &args.component,
        config,
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
    print!("{}", report::render(&args.component, &observed, &checks));
    Ok(passed)
}
