//! `ruststream put`: JSON records written to a stream (`ruststream_fleet::put`).

use ruststream_fleet::put::PutOptions;

use crate::args::PutArgs;

/// Writes the records the flags give.
pub(crate) async fn put(args: PutArgs) -> anyhow::Result<()> {
    ruststream_fleet::put::put(options(args)).await
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
