//! `ruststream check`: components, or with `--config` a whole tenants file, checked offline
//! (`ruststream_tools::check`).

use std::path::PathBuf;

use ruststream_tools::check;

use crate::args::CompileArgs;

/// `ruststream check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    #[arg(required_unless_present = "config", conflicts_with = "config")]
    pub components: Vec<PathBuf>,
    /// A tenants file to check as `run --config` would load it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub compile: CompileArgs,
}

/// Checks `--config` when given (and no component), else each component.
pub(crate) async fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    let compile = args.compile.options();
    match &args.config {
        Some(config) if args.components.is_empty() => {
            check::check_config(config, &compile, out).await?;
        }
        _ => check::check(&args.components, &compile, out).await?,
    }
    Ok(())
}
