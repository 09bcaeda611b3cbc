//! `ruststream promote`: a tenant's app swapped over to its shadow version.

use crate::args::AdminTarget;
use crate::status_view;

/// Swaps the app's shadow in (through the normal swap, judged by the rollout) and prints it.
pub(crate) async fn promote(target: &AdminTarget, tenant: &str, app: &str) -> anyhow::Result<()> {
    let deployed = super::client(target)?.promote(tenant, app).await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}
