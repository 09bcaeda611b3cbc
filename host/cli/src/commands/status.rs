//! `ruststream status`: what a running host runs.

use crate::args::AdminTarget;
use crate::status_view;

/// Prints the tree, or the host's JSON as is with `json`.
pub(crate) async fn status(target: &AdminTarget, json: bool) -> anyhow::Result<()> {
    let status = super::client(target)?.status().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status_view::render_status(&status, super::now_ms()));
    }
    Ok(())
}
