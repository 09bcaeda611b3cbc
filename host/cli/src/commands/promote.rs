//! `ruststream promote`: a tenant's app swapped over to its shadow version.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream promote`.
#[derive(Debug, clap::Args)]
pub(crate) struct PromoteArgs {
    pub tenant: String,
    pub app: String,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Swaps the app's shadow in (through the normal swap, judged by the rollout) and prints it.
pub(crate) async fn promote(args: &PromoteArgs) -> anyhow::Result<()> {
    let deployed = super::client(&args.admin)?
        .promote(&args.tenant, &args.app)
        .await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}
