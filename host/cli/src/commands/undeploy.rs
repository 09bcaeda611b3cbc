//! `ruststream undeploy`: an uploaded component stopped for good.

use crate::args::AdminTarget;
use crate::status_view;

/// Stops `tenant`'s component `name` and prints what went.
pub(crate) async fn undeploy(target: &AdminTarget, tenant: &str, name: &str) -> anyhow::Result<()> {
    let gone = super::client(target)?.undeploy(tenant, name).await?;
    println!("{}", status_view::render_undeployed(&gone));
    Ok(())
}
