//! `ruststream undeploy`: an uploaded component stopped for good.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream undeploy`.
#[derive(Debug, clap::Args)]
pub(crate) struct UndeployArgs {
    pub tenant: String,
    /// The component's name, as it was deployed.
    pub name: String,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Stops `tenant`'s component `name` and prints what went.
pub(crate) async fn undeploy(args: &UndeployArgs) -> anyhow::Result<()> {
    let gone = super::client(&args.admin)?
        .undeploy(&args.tenant, &args.name)
        .await?;
    println!("{}", status_view::render_undeployed(&gone));
    Ok(())
}
