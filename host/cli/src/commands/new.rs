//! `ruststream new`: a tenant crate written from the templates (`ruststream_tools::new`).

use std::path::PathBuf;

use ruststream_tools::new;

#[derive(Debug, clap::Args)]
pub(crate) struct NewArgs {
    /// The crate's name (also its component's file name, `-` becoming `_`).
    pub name: String,
    /// Where to write it [default: ./NAME].
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// A RustStream checkout to take the SDK from (and the runtime, for in-process tests)
    /// [default: the checkout this binary was built from].
    #[arg(long, conflicts_with = "git")]
    pub ruststream: Option<PathBuf>,
    /// A git repository of RustStream to take them from instead.
    #[arg(long)]
    pub git: Option<String>,
}

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
