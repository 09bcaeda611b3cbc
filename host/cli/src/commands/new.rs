//! `ruststream new`: a tenant crate written from the templates (`ruststream_fleet::new`).

use std::path::PathBuf;

use ruststream_fleet::new;

use crate::args::NewArgs;

/// Writes the crate and says how to go on.
pub(crate) fn new(args: &NewArgs) -> anyhow::Result<()> {
    let source = match (&args.ruststream, &args.git) {
        (Some(checkout), _) => new::Source::Checkout(
            checkout
                .canonicalize()
                .map_err(|error| anyhow::anyhow!("--ruststream {}: {error}", checkout.display()))?,
        ),
        (None, Some(url)) => new::Source::Git(url.clone()),
        (None, None) => new::Source::built_from().ok_or_else(|| {
            anyhow::anyhow!(
                "the RustStream checkout this binary was built from is gone: give one with \
                 --ruststream DIR, or a repository with --git URL"
            )
        })?,
    };
    let dir = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    new::write_tenant_crate(&args.name, &dir, &source)?;
    println!(
        "created {}: `cargo build-component` builds the component, `cargo test` tests it \
         with `ruststream test` (this binary on the PATH, or RUSTSTREAM_BIN={})",
        dir.display(),
        std::env::current_exe().map_or_else(|_| "...".into(), |exe| exe.display().to_string())
    );
    Ok(())
}
