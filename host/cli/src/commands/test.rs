//! `ruststream test`: a component fed a records file, checked against an expectations file
//! (`ruststream_tools::testrun`).

use std::path::PathBuf;
use std::process::ExitCode;

use ruststream_tools::streams::StreamsFlagError;
use ruststream_tools::testrun::{self, TestOptions};

use crate::args::{CompileArgs, StreamArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct TestArgs {
    /// The component file (`.wasm`).
    pub component: PathBuf,
    /// The records, one JSON object a line: `json`, `data` or `data_base64`, and optionally
    /// `stream`, `subscription`, `partition_key`, `headers`, `attempt`.
    #[arg(long, value_name = "RECORDS.jsonl")]
    pub records: PathBuf,
    /// The expectations: `[[record]]` outcomes (one per record in order, or by `number`;
    /// `subscription` to check one of several readers of its stream, else every one),
    /// `[[publish]]`es, `[[refused]]` publishes, `[[checkpoint]]`s; TOML, or JSON for a
    /// `.json` file. A refused publish no `[[refused]]` expects fails the test.
    #[arg(long, value_name = "EXPECT.toml")]
    pub expect: PathBuf,
    #[command(flatten)]
    pub streams: StreamArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
}

/// Runs the test and prints its report; the exit status says how it went: 0 every
/// expectation held, 1 one did not (or the run failed), 2 bad input (shown as one line).
pub(crate) async fn test(args: TestArgs) -> ExitCode {
    let options = match options(args) {
        Ok(options) => options,
        Err(error) => {
            crate::report(&error.into());
            return ExitCode::from(testrun::BAD_INPUT);
        }
    };
    match testrun::test(&options, &mut std::io::stdout()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(testrun::FAILED),
        Err(error) => {
            let status = error.exit_status();
            crate::report(&error.into());
            ExitCode::from(status)
        }
    }
}

/// The flags as the library takes them.
///
/// # Errors
/// When `--with-stream` is given without `--streams listed`.
fn options(args: TestArgs) -> Result<TestOptions, StreamsFlagError> {
    Ok(TestOptions {
        streams: args.streams.existing()?,
        component: args.component,
        records: args.records,
        expect: args.expect,
        compile: args.compile.options(),
    })
}
