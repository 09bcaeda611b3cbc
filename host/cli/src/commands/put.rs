//! `ruststream put`: JSON records written to a stream (`ruststream_fleet::put`).

use ruststream_fleet::put::PutOptions;

use crate::args::PutArgs;

/// Writes the records the flags give: where each went on stdout, how many on stderr.
pub(crate) async fn put(args: PutArgs) -> anyhow::Result<()> {
    let stream = args.stream.clone();
    let written = ruststream_fleet::put::put(options(args), &mut std::io::stdout()).await?;
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
