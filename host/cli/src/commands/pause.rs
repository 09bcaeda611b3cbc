//! `ruststream pause`: a tenant's handlers handed no records until `resume`.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream pause`.
#[derive(Debug, clap::Args)]
pub(crate) struct PauseArgs {
    pub tenant: String,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Pauses `tenant` and prints its state.
pub(crate) async fn pause(args: &PauseArgs) -> anyhow::Result<()> {
    let state = super::client(&args.admin)?.pause(&args.tenant).await?;
    println!("{}", status_view::render_pause(&state));
    Ok(())
}
