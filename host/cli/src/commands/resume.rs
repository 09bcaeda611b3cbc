//! `ruststream resume`: a paused or quarantined tenant goes on.

use crate::args::AdminTarget;
use crate::status_view;

/// Resumes `tenant` and prints its state.
pub(crate) async fn resume(target: &AdminTarget, tenant: &str) -> anyhow::Result<()> {
    let state = super::client(target)?.resume(tenant).await?;
    println!("{}", status_view::render_pause(&state));
    Ok(())
}
