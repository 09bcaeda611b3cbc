//! `ruststream deploy`: a component uploaded to a running host for a tenant.

use std::path::Path;
use std::path::PathBuf;

use anyhow::Context as _;

use crate::args::AdminTarget;
use crate::status_view;

#[derive(Debug, clap::Args)]
pub(crate) struct DeployArgs {
    pub tenant: String,
    /// The component (`.wasm`).
    #[arg(required_unless_present = "abort_shadow")]
    pub file: Option<PathBuf>,
    /// The component's name in the host [default: the file's stem].
    #[arg(long)]
    pub name: Option<String>,
    /// Run the component beside the live version of its app as a shadow: same records, no
    /// effects, each record's outcome and publishes compared (`ruststream status`).
    #[arg(long)]
    pub shadow: bool,
    /// The percentage of records the shadow is given (1 to 100).
    #[arg(long, value_name = "PERCENT", default_value_t = 100, requires = "shadow",
        value_parser = clap::value_parser!(u32).range(1..=100))]
    pub sample: u32,
    /// Drop the shadow of this app instead of deploying anything.
    #[arg(long, value_name = "APP", conflicts_with_all = ["file", "shadow", "name"])]
    pub abort_shadow: Option<String>,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Uploads the file as component `--name`, or as its file stem, and prints what went live;
/// with `--shadow`, runs it beside the live version as its shadow; with `--abort-shadow APP`,
/// drops that app's shadow.
pub(crate) async fn deploy(args: &DeployArgs) -> anyhow::Result<()> {
    let client = super::client(&args.admin)?;
    if let Some(app) = &args.abort_shadow {
        let dropped = client.abort_shadow(&args.tenant, app).await?;
        println!("{}", status_view::render_shadow_dropped(&dropped));
        return Ok(());
    }
    let file = args
        .file
        .as_deref()
        .context("give the component file to deploy")?;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => file_stem(file)?,
    };
    let wasm = read_component(file)?;
    if args.shadow {
        let shadow = client
            .deploy_shadow(&args.tenant, &name, wasm, args.sample)
            .await?;
        println!("{}", status_view::render_shadow_deployed(&shadow));
        return Ok(());
    }
    let deployed = client.deploy(&args.tenant, &name, wasm).await?;
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

/// The file's bytes. Their size is the host's to bound (`compile_max_bytes`): it refuses a
/// larger upload by its length, before reading it.
fn read_component(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}
