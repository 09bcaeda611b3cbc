//! The admin verbs (`status`, `seek`, `pause`, `resume`, `deploy`, `undeploy`, `reload`,
//! `rollback`, `versions`): each reads the host's admin token, sends one request to a running host's admin
//! API and prints its answer. An error from the server comes back as the verb's error, printed
//! by `main` as one line.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

use ruststream_fleet::admin::token::AdminToken;
use ruststream_fleet::client::{AdminClient, Credentials};
use ruststream_fleet::state;

use crate::args::{AdminTarget, DeployArgs, SeekArgs};
use crate::status_view;

/// Where the verbs read the token: `--admin-token-file`, else `admin-token` in `--state-dir`,
/// else in the default state directory.
pub(crate) fn token_path(target: &AdminTarget) -> anyhow::Result<PathBuf> {
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

fn client(target: &AdminTarget) -> anyhow::Result<AdminClient> {
    let token_path = token_path(target)?;
    let token = AdminToken::read(&token_path)?;
    let credentials = Credentials {
        token,
        token_path,
        ca: target.admin_ca.clone(),
    };
    Ok(AdminClient::new(&target.url, credentials)?)
}

/// `ruststream status`: the tree, or the host's JSON as is with `json`.
pub(crate) async fn status(target: &AdminTarget, json: bool) -> anyhow::Result<()> {
    let status = client(target)?.status().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status_view::render_status(&status, now_ms()));
    }
    Ok(())
}

/// `ruststream seek`.
pub(crate) async fn seek(args: &SeekArgs) -> anyhow::Result<()> {
    let moved = client(&args.admin)?
        .seek(&args.tenant, &args.app, &args.subscriber, &args.position)
        .await?;
    println!("{}", status_view::render_moved(&moved));
    Ok(())
}

/// `ruststream pause` (`pause` true) and `ruststream resume`.
pub(crate) async fn pause(target: &AdminTarget, tenant: &str, pause: bool) -> anyhow::Result<()> {
    let client = client(target)?;
    let state = if pause {
        client.pause(tenant).await?
    } else {
        client.resume(tenant).await?
    };
    println!("{}", status_view::render_pause(&state));
    Ok(())
}

/// `ruststream deploy`: uploads the file as component `--name`, or as its file stem.
pub(crate) async fn deploy(args: &DeployArgs) -> anyhow::Result<()> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => file_stem(&args.file)?,
    };
    let wasm = read_component(&args.file)?;
    let deployed = client(&args.admin)?
        .deploy(&args.tenant, &name, wasm)
        .await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}

/// `ruststream undeploy`.
pub(crate) async fn undeploy(target: &AdminTarget, tenant: &str, name: &str) -> anyhow::Result<()> {
    let gone = client(target)?.undeploy(tenant, name).await?;
    println!("{}", status_view::render_undeployed(&gone));
    Ok(())
}

/// `ruststream reload`.
pub(crate) async fn reload(target: &AdminTarget) -> anyhow::Result<()> {
    let deployed = client(target)?.reload().await?;
    if deployed.is_empty() {
        println!("nothing changed");
    }
    for one in &deployed {
        println!("{}", status_view::render_deployed(one));
    }
    Ok(())
}

/// `ruststream rollback`, to the previous version or to the kept version `to`.
pub(crate) async fn rollback(
    target: &AdminTarget,
    tenant: &str,
    app: &str,
    to: Option<&str>,
) -> anyhow::Result<()> {
    let deployed = client(target)?.rollback(tenant, app, to).await?;
    println!("{}", status_view::render_deployed(&deployed));
    Ok(())
}

/// `ruststream versions`: the kept versions, or the host's JSON as is with `json`.
pub(crate) async fn versions(
    target: &AdminTarget,
    tenant: &str,
    app: &str,
    json: bool,
) -> anyhow::Result<()> {
    let list = client(target)?.versions(tenant, app).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print!("{}", status_view::render_versions(&list, now_ms()));
    }
    Ok(())
}

fn file_stem(file: &Path) -> anyhow::Result<String> {
    file.file_stem()
        .and_then(|stem| stem.to_str())
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "cannot name the component after {}: give --name",
                file.display()
            )
        })
}

/// The file's bytes. Their size is the host's to bound (`compile_max_bytes`): it refuses a
/// larger upload by its length, before reading it.
fn read_component(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
