//! `ruststream tail`: a stream's records with their envelopes decoded
//! (`ruststream_tools::tail`).

use ruststream_tools::tail::{self, TailFrom, TailOptions};

use crate::args::AwsArgs;

/// `ruststream tail`.
#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// The stream.
    pub stream: String,
    /// Where each shard is read from.
    #[arg(long, value_enum, default_value_t = TailFrom::Horizon)]
    pub from: TailFrom,
    /// Keep reading new records instead of stopping at the tip.
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// Prints the stream's records as the flags say, each line as it is read.
pub(crate) async fn tail(args: TailArgs) -> anyhow::Result<()> {
    Ok(tail::tail(options(args), &mut std::io::stdout()).await?)
}

/// The flags as the library takes them.
fn options(args: TailArgs) -> TailOptions {
    TailOptions {
        stream: args.stream,
        from: args.from,
        follow: args.follow,
        aws: args.aws.options(),
    }
}
