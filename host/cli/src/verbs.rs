//! The admin verbs (`status`, `seek`, `pause`, `resume`, `deploy`, `reload`, `rollback`):
//! each sends one request to a running host's admin API and prints its answer. An error from
//! the server comes back as the verb's error, printed by `main` as one line.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

use crate::admin::MAX_COMPONENT_BYTES;
use crate::args::{AdminTarget, DeployArgs, SeekArgs};
use crate::client::AdminClient;
use crate::status_view;

fn client(target: &AdminTarget) -> anyhow::Result<AdminClient> {
    Ok(AdminClient::new(&target.url)?)
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

/// `ruststream rollback`.
pub(crate) async fn rollback(target: &AdminTarget, tenant: &str, app: &str) -> anyhow::Result<()> {
    let deployed = client(target)?.rollback(tenant, app).await?;
    println!("{}", status_view::render_deployed(&deployed));
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

/// The file's bytes, refused here rather than by the server when it is over the upload limit.
fn read_component(file: &Path) -> anyhow::Result<Vec<u8>> {
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?
        .len();
    anyhow::ensure!(
        size <= MAX_COMPONENT_BYTES as u64,
        "{} is {size} bytes; the admin API accepts components of at most {MAX_COMPONENT_BYTES}",
        file.display()
    );
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
