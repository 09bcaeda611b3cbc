//! `ruststream dev`: a tenant developer's loop (`ruststream_fleet::dev`).

use ruststream_fleet::dev::DevOptions;
use ruststream_fleet::streams::StreamsFlagError;

use crate::args::DevArgs;

/// Builds, runs and feeds the component as the flags say, printing what happens as it
/// happens.
pub(crate) async fn dev(args: DevArgs) -> anyhow::Result<()> {
    Ok(ruststream_fleet::dev::dev(options(args)?, &mut std::io::stdout()).await?)
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
