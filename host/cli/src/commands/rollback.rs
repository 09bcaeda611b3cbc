//! `ruststream rollback`: a tenant's app swapped back to a kept version.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream rollback`.
#[derive(Debug, clap::Args)]
pub(crate) struct RollbackArgs {
    pub tenant: String,
    pub app: String,
    /// The kept version to return to: its content hash, or a unique prefix of it (see
    /// `ruststream versions`).
    #[arg(long, value_name = "HASH")]
    pub to: Option<String>,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Rolls back to the previous version, or to the kept version `to`, and prints it.
pub(crate) async fn rollback(args: &RollbackArgs) -> anyhow::Result<()> {
    let deployed = super::client(&args.admin)?
        .rollback(&args.tenant, &args.app, args.to.as_deref())
        .await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::commands::versions::VersionsArgs;
    use crate::commands::{Command, parse};

    #[test]
    fn rollback_and_versions_flags() {
        let cli = parse(&[
            "rollback",
            "acme",
            "ledger",
            "--to",
            "3f2a",
            "--state-dir",
            "/s",
        ]);
        let Ok(Command::Rollback(RollbackArgs { to, admin, .. })) = cli.map(|cli| cli.command)
        else {
            panic!("not a rollback")
        };
        assert_eq!(to.as_deref(), Some("3f2a"));
        assert_eq!(admin.state_dir, Some(PathBuf::from("/s")));
        let cli = parse(&["versions", "acme", "ledger", "--json"]).expect("versions");
        assert!(matches!(
            cli.command,
            Command::Versions(VersionsArgs { json: true, .. })
        ));
    }
}
