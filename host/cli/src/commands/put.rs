//! `ruststream put`: JSON records written to a stream (`ruststream_tools::put`).

use std::path::PathBuf;

use ruststream_tools::put::PutOptions;

use crate::args::AwsArgs;

/// `ruststream put`.
#[derive(Debug, clap::Args)]
pub(crate) struct PutArgs {
    /// The stream.
    pub stream: String,
    /// Records, each a JSON text.
    #[arg(conflicts_with = "file")]
    pub records: Vec<String>,
    /// A file of records, one JSON text per line.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The partition key of every record (default: each record's position).
    #[arg(long)]
    pub key: Option<String>,
    /// A header of every record, `NAME=VALUE` (repeatable; not `x-ruststream-*`).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// Writes the records the flags give: where each went on stdout, how many on stderr.
pub(crate) async fn put(args: PutArgs) -> anyhow::Result<()> {
    let stream = args.stream.clone();
    let written = ruststream_tools::put::put(options(args), &mut std::io::stdout()).await?;
    eprintln!("wrote {written} records to `{stream}`");
    Ok(())
}

/// The flags as the library takes them.
fn options(args: PutArgs) -> PutOptions {
    PutOptions {
        stream: args.stream,
        records: args.records,
        file: args.file,
        key: args.key,
        headers: args.headers,
        aws: args.aws.options(),
    }
}
