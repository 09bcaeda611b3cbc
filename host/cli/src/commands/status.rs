//! `ruststream status`: what a running host runs.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// Print the host's JSON as is.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Prints the tree, or the host's JSON as is with `json`.
pub(crate) async fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let status = super::client(&args.admin)?.status().await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status_view::render_status(&status, super::now_ms()));
    }
    Ok(())
}
