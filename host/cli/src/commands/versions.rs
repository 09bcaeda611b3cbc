//! `ruststream versions`: the versions a running host keeps of a tenant's app.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream versions`.
#[derive(Debug, clap::Args)]
pub(crate) struct VersionsArgs {
    pub tenant: String,
    pub app: String,
    /// Print the host's JSON as is.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Prints the kept versions, or the host's JSON as is with `json`.
pub(crate) async fn versions(args: &VersionsArgs) -> anyhow::Result<()> {
    let list = super::client(&args.admin)?
        .versions(&args.tenant, &args.app)
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print!("{}", status_view::render_versions(&list, super::now_ms()));
    }
    Ok(())
}
