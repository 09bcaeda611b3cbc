//! `ruststream dev`: a tenant developer's loop (`ruststream_tools::dev`).

use std::path::PathBuf;

use ruststream_tools::dev::DevOptions;
use ruststream_tools::streams::StreamsFlagError;

use crate::args::{CompileArgs, StreamArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// A tenant crate (a directory with Cargo.toml, built with `cargo build --release --target
    /// wasm32-wasip2` into its own target/), or a component file (`.wasm`).
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Read the records, one JSON value a line, from this file instead of stdin.
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// The stream the records are published to [default: the stream of the component's
    /// first subscription].
    #[arg(long)]
    pub stream: Option<String>,
    /// Rebuild (or reload the component file) whenever the crate's src/ or Cargo.toml
    /// changes, and swap the new version in: streams, checkpoints and held records stay.
    #[arg(long)]
    pub watch: bool,
    #[command(flatten)]
    pub streams: StreamArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
}

/// Builds, runs and feeds the component as the flags say, printing what happens as it
/// happens.
pub(crate) async fn dev(args: DevArgs) -> anyhow::Result<()> {
    Ok(ruststream_tools::dev::dev(options(args)?, &mut std::io::stdout()).await?)
}

/// The flags as the library takes them.
///
/// # Errors
/// When `--with-stream` is given without `--streams listed`.
fn options(args: DevArgs) -> Result<DevOptions, StreamsFlagError> {
    Ok(DevOptions {
        streams: args.streams.existing()?,
        path: args.path,
        records: args.records,
        stream: args.stream,
        watch: args.watch,
        compile: args.compile.options(),
    })
}

#[cfg(test)]
mod tests {
    use ruststream_tools::streams::ExistingStreams;

    use crate::commands::{Command, parse};

    #[test]
    fn dev_and_test_read_the_same_stream_flags() {
        let dev = parse(&[
            "dev",
            "x.wasm",
            "--streams",
            "listed",
            "--with-stream",
            "ledger",
            "--with-stream",
            "ledger.dead",
        ]);
        let Ok(Command::Dev(dev)) = dev.map(|cli| cli.command) else {
            panic!("not a dev")
        };
        let listed = ["ledger".to_owned(), "ledger.dead".to_owned()];
        assert_eq!(
            dev.streams.existing(),
            Ok(ExistingStreams::Listed(listed.into_iter().collect()))
        );
        let test = parse(&["test", "x.wasm", "--records", "r", "--expect", "e"]);
        let Ok(Command::Test(test)) = test.map(|cli| cli.command) else {
            panic!("not a test")
        };
        assert_eq!(test.streams.existing(), Ok(ExistingStreams::Any));
        let error = parse(&["dev", "x.wasm", "--streams", "some"]).expect_err("no such choice");
        assert!(
            error.to_string().contains("[possible values: any, listed]"),
            "{error}"
        );
    }
}
