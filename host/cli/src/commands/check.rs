//! `ruststream check`: components, or with `--config` a whole tenants file, checked offline
//! (`ruststream_fleet::check`).

use std::path::PathBuf;

use ruststream_fleet::check;

use crate::args::CompileArgs;

/// Checks `config` when given (and no component), else each of `components`.
pub(crate) async fn check(
    components: &[PathBuf],
    config: Option<&PathBuf>,
    compile: &CompileArgs,
) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    match config {
        Some(config) if components.is_empty() => {
            check::check_config(config, &compile.options(), out).await?;
        }
        _ => check::check(components, &compile.options(), out).await?,
    }
    Ok(())
}
