//! `ruststream tail`: a stream's records with their envelopes decoded
//! (`ruststream_fleet::tail`).

use ruststream_fleet::tail::{self, TailOptions};

use crate::args::{TailArgs, TailFrom};

/// Prints the stream's records as the flags say, each line as it is read.
pub(crate) async fn tail(args: TailArgs) -> anyhow::Result<()> {
    Ok(tail::tail(options(args), &mut std::io::stdout()).await?)
}

/// The flags as the library takes them.
fn options(args: TailArgs) -> TailOptions {
    TailOptions {
        stream: args.stream,
        from: match args.from {
            TailFrom::Horizon => tail::TailFrom::Horizon,
            TailFrom::Latest => tail::TailFrom::Latest,
        },
        follow: args.follow,
        aws: args.aws.options(),
    }
}
