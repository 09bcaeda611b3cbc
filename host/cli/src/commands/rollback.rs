//! `ruststream rollback`: a tenant's app swapped back to a kept version.

use crate::args::AdminTarget;
use crate::status_view;

/// Rolls back to the previous version, or to the kept version `to`, and prints it.
pub(crate) async fn rollback(
    target: &AdminTarget,
    tenant: &str,
    app: &str,
    to: Option<&str>,
) -> anyhow::Result<()> {
    let deployed = super::client(target)?.rollback(tenant, app, to).await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}
