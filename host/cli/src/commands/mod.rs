//! One module per verb: each turns its arguments into what the library takes, calls it, and
//! prints the answer. What the admin verbs share is here: the client of the host named by
//! `--admin`, with the token it reads, and the clock ages are shown against.

pub(crate) mod audit;
pub(crate) mod check;
pub(crate) mod deploy;
pub(crate) mod dev;
pub(crate) mod errors;
pub(crate) mod new;
pub(crate) mod pause;
pub(crate) mod promote;
pub(crate) mod put;
pub(crate) mod redrive;
pub(crate) mod reload;
pub(crate) mod resume;
pub(crate) mod rollback;
pub(crate) mod run;
pub(crate) mod seek;
pub(crate) mod status;
pub(crate) mod tail;
pub(crate) mod test;
pub(crate) mod token;
pub(crate) mod undeploy;
pub(crate) mod versions;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use ruststream_fleet::admin::token::{AdminToken, TOKEN_ENV};
use ruststream_fleet::client::{AdminClient, Credentials};
use ruststream_fleet::state;

use crate::args::AdminTarget;

/// Where the verbs read the token: `--admin-token-file`, else `admin-token` in `--state-dir`,
/// else in the default state directory.
fn token_path(target: &AdminTarget) -> anyhow::Result<PathBuf> {
    if let Some(file) = &target.admin_token_file {
        return Ok(file.clone());
    }
    let dir = target
        .state_dir
        .clone()
        .or_else(state::default_dir)
        .context(
            "no admin token file: HOME and XDG_DATA_HOME are unset; give --admin-token-file \
             or --state-dir",
        )?;
    Ok(dir.join(state::TOKEN_FILE))
}

/// The client of the host `target` names, carrying the token [`TOKEN_ENV`] gives, else the
/// one it reads from the token file.
fn client(target: &AdminTarget) -> anyhow::Result<AdminClient> {
    let (token, token_from) = match AdminToken::from_env()? {
        Some(_) if target.admin_token_file.is_some() => anyhow::bail!(
            "the admin token is given twice, by ${TOKEN_ENV} and by --admin-token-file: give one"
        ),
        Some(token) => (token, format!("${TOKEN_ENV}")),
        None => {
            let token_path = token_path(target)?;
            (
                AdminToken::read(&token_path)?,
                token_path.display().to_string(),
            )
        }
    };
    let credentials = Credentials {
        token,
        token_from,
        ca: target.admin_ca.clone(),
    };
    Ok(AdminClient::new(&target.url, credentials)?)
}

/// Now, in milliseconds since the Unix epoch: what the host's timestamps are shown against.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
