//! `ruststream reload`: a running host re-reads its config and component files.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream reload`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReloadArgs {
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Reloads and prints each version that went live, or that nothing changed.
pub(crate) async fn reload(args: &ReloadArgs) -> anyhow::Result<()> {
    let deployed = super::client(&args.admin)?.reload().await?;
    if deployed.is_empty() {
        println!("nothing changed");
    }
    for one in &deployed {
        println!("{}", status_view::render_deployed(one));
    }
    Ok(())
}
