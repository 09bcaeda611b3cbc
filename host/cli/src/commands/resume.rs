//! `ruststream resume`: a paused or quarantined tenant goes on.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    pub tenant: String,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Resumes `tenant` and prints its state.
pub(crate) async fn resume(args: &ResumeArgs) -> anyhow::Result<()> {
    let state = super::client(&args.admin)?.resume(&args.tenant).await?;
    println!("{}", status_view::render_pause(&state));
    Ok(())
}
