//! `ruststream token`: tenant tokens, made, listed and revoked through a host's admin API.

use crate::args::AdminTarget;
use crate::status_view;

/// `ruststream token`.
#[derive(Debug, clap::Args)]
pub(crate) struct TokenArgs {
    #[command(subcommand)]
    pub action: TokenAction,
}

/// `ruststream token`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenAction {
    /// Makes a token that reaches TENANT's apps only: deploy, shadow, promote, rollback, seek,
    /// pause and resume, its status, versions and audit trail, its dead letters' redrive. It
    /// is printed this once; the host keeps its hash.
    Create {
        /// The tenant it reaches.
        #[arg(long)]
        tenant: String,
        /// What to call it (`ci`, a person's name).
        #[arg(long, default_value = "")]
        name: String,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Lists the tenant tokens (ids, tenants, names; never the tokens).
    List {
        /// Print the host's JSON as is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Revokes a tenant token: refused from the next request on, on every host that reads the
    /// same token store.
    Revoke {
        /// The token's id (see `token list`).
        id: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
}

/// Carries out `action` against the host it names.
pub(crate) async fn token(action: &TokenAction) -> anyhow::Result<()> {
    match action {
        TokenAction::Create {
            tenant,
            name,
            json,
            admin,
        } => {
            let made = client(admin)?.create_token(tenant, name).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&made)?);
            } else {
                print!("{}", status_view::render_token_made(&made));
            }
        }
        TokenAction::List { json, admin } => {
            let list = client(admin)?.tokens().await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                print!("{}", status_view::render_tokens(&list, super::now_ms()));
            }
        }
        TokenAction::Revoke { id, admin } => {
            let revoked = client(admin)?.revoke_token(id).await?;
            println!("token {} revoked", status_view::text(&revoked.id));
        }
    }
    Ok(())
}

fn client(target: &AdminTarget) -> anyhow::Result<ruststream_tools::client::AdminClient> {
    super::client(target)
}
