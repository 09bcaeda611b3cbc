//! `ruststream audit`: the changes made through a host's admin API, from the host or a file.

use std::path::PathBuf;

use anyhow::Context as _;
use ruststream_fleet::state::audit::{self, AuditFilter};

use crate::args::{AdminTarget, TrailQuery};
use crate::status_view;

/// `ruststream audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub query: TrailQuery,
    /// Read the entries from FILE instead of a host: its audit file (`audit.jsonl` in the
    /// state directory) or a log it wrote with `--log-format json`.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Prints the audit entries `args` asks for, oldest first.
pub(crate) async fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let filter = AuditFilter {
        tenant: args.query.tenant.clone(),
        since_ms: args.query.since.unwrap_or(0),
        limit: args.query.limit,
    };
    let (entries, from) = match &args.file {
        Some(file) => {
            let entries = audit::read_entries(file)
                .with_context(|| format!("reading the audit entries of {}", file.display()))?;
            (filter.keep(entries), file.display().to_string())
        }
        None => {
            let client = super::client(&args.admin)?;
            let list = client
                .audit(filter.tenant.as_deref(), filter.since_ms, filter.limit)
                .await?;
            (list.entries, list.kept_in)
        }
    };
    if args.query.json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
    } else {
        print!("{}", status_view::render_audit(&entries, &from));
    }
    Ok(())
}
