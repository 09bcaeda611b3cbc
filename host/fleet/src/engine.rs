//! The runtime a command runs components on: compiled by this program's compile worker, cached
//! where told.

use std::path::PathBuf;

use ruststream_runtime::{
    RuntimeConfig,
    component::compile::{CompileConfig, CompileLimits, Compiler},
};

/// The compile worker a program embedding the host must serve: run with [`WORKER_COMMAND`] as
/// its first argument, it calls [`compile_worker`] with the arguments after it and exits with
/// its status. Every runtime made here compiles components in such a child process.
pub use ruststream_runtime::component::compile::{WORKER_COMMAND, compile_worker};

/// Where compiled components are cached.
#[derive(Debug, Clone, Default)]
pub struct CompileCache {
    /// Directory of compiled components, keyed by content hash and engine configuration
    /// [default: $XDG_CACHE_HOME/ruststream/compiled, or ~/.cache/ruststream/compiled].
    pub compile_cache: Option<PathBuf>,
    /// Compile every component at every load; keep no compiled artifacts.
    pub no_compile_cache: bool,
}

impl CompileCache {
    /// The cache directory: the flag, else `configured`, else the user's cache directory.
    pub(crate) fn cache_dir(&self, configured: Option<&PathBuf>) -> Option<PathBuf> {
        if self.no_compile_cache {
            return None;
        }
        self.compile_cache
            .clone()
            .or_else(|| configured.cloned())
            .or_else(default_cache_dir)
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("ruststream").join("compiled"))
}

/// The runtime of a command: components compiled by this program's worker within `limits`,
/// cached in `cache`; `fuel` turns fuel metering on (a tenant's `fuel` limit needs it).
///
/// The program must serve the compile worker ([`WORKER_COMMAND`]).
pub(crate) fn runtime_config(
    limits: CompileLimits,
    cache: Option<PathBuf>,
    fuel: bool,
) -> anyhow::Result<RuntimeConfig> {
    let program = std::env::current_exe().map_err(|error| {
        anyhow::anyhow!("cannot find this program to run its compile worker: {error}")
    })?;
    Ok(RuntimeConfig {
        compile: CompileConfig {
            compiler: Compiler::Worker { program },
            limits,
            cache,
        },
        fuel,
        ..RuntimeConfig::default()
    })
}
