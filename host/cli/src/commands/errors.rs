//! `ruststream errors`: the warnings and errors a host logged lately.

use crate::args::{AdminTarget, TrailQuery};
use crate::status_view;

/// `ruststream errors`.
#[derive(Debug, clap::Args)]
pub(crate) struct ErrorsArgs {
    #[command(flatten)]
    pub query: TrailQuery,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Prints the recent errors `args` asks for, newest first.
pub(crate) async fn errors(args: &ErrorsArgs) -> anyhow::Result<()> {
    let client = super::client(&args.admin)?;
    let query = &args.query;
    let list = client
        .errors(
            query.tenant.as_deref(),
            query.since.unwrap_or(0),
            query.limit,
        )
        .await?;
    if query.json {
        println!("{}", serde_json::to_string_pretty(&list.errors)?);
    } else {
        print!("{}", status_view::render_errors(&list.errors));
    }
    Ok(())
}
