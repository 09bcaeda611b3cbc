//! `ruststream token`: tenant tokens, made, listed and revoked through a host's admin API.

use crate::args::{AdminTarget, TokenAction};
use crate::status_view;

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

fn client(target: &AdminTarget) -> anyhow::Result<ruststream_fleet::client::AdminClient> {
    super::client(target)
}
