//! `ruststream deploy`: a component uploaded to a running host for a tenant.

use std::path::Path;

use anyhow::Context as _;

use crate::args::DeployArgs;
use crate::status_view;

/// Uploads the file as component `--name`, or as its file stem, and prints what went live.
pub(crate) async fn deploy(args: &DeployArgs) -> anyhow::Result<()> {
    let name = match &args.name {
        Some(name) => name.clone(),
        None => file_stem(&args.file)?,
    };
    let wasm = read_component(&args.file)?;
    let deployed = super::client(&args.admin)?
        .deploy(&args.tenant, &name, wasm)
        .await?;
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
