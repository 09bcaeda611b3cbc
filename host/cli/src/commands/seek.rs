//! `ruststream seek`: a subscription of a running host moved to another position.

use crate::args::SeekArgs;
use crate::status_view;

/// Moves the subscription and prints where it now stands.
pub(crate) async fn seek(args: &SeekArgs) -> anyhow::Result<()> {
    let moved = super::client(&args.admin)?
        .seek(&args.tenant, &args.app, &args.subscriber, &args.position)
        .await?;
    println!("{}", status_view::render_moved(&moved));
    Ok(())
}
