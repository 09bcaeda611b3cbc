//! The runtime a command runs components on: compiled by this program's compile worker (or,
//! when an embedder opts in, in this process), cached where told.

use std::path::PathBuf;

use ruststream_runtime::RuntimeConfig;
use ruststream_runtime::component::RuntimeError;
use ruststream_runtime::component::compile::{CompileConfig, CompileLimits, Compiler};

/// The compile worker a program embedding the host must serve: run with [`WORKER_COMMAND`] as
/// its first argument, it calls [`compile_worker`] with the arguments after it and exits with
/// its status. Every runtime made here compiles components in such a child process.
pub use ruststream_runtime::component::compile::{WORKER_COMMAND, compile_worker};

/// Why the runtime a command runs components on cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// This program's own path cannot be found, so its compile worker cannot be run.
    #[error("cannot find this program to run its compile worker: {0}")]
    NoProgram(std::io::Error),
    /// The engine refused its configuration.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// Where components are compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompileIn {
    /// A child process of this program ([`WORKER_COMMAND`]) under memory and CPU limits and a
    /// timeout: a component that is a compile bomb costs the worker, not the host. The program
    /// must serve the worker. What every verb and `ruststream run` use.
    #[default]
    Worker,
    /// This process, bounded only by the size checks: for an embedder whose components are all
    /// trusted (its own), and for tests (a test binary cannot serve the worker). A hostile
    /// component can exhaust this process's memory or stall a compile thread.
    ThisProcess,
}

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
    pub fn cache_dir(&self, configured: Option<&PathBuf>) -> Option<PathBuf> {
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
pub fn runtime_config(
    limits: CompileLimits,
    cache: Option<PathBuf>,
    fuel: bool,
) -> Result<RuntimeConfig, EngineError> {
    runtime_config_in(CompileIn::Worker, limits, cache, fuel)
}

/// [`runtime_config`], compiling where `compile_in` says.
pub(crate) fn runtime_config_in(
    compile_in: CompileIn,
    limits: CompileLimits,
    cache: Option<PathBuf>,
    fuel: bool,
) -> Result<RuntimeConfig, EngineError> {
    let compiler = match compile_in {
        CompileIn::Worker => Compiler::Worker {
            program: std::env::current_exe().map_err(EngineError::NoProgram)?,
        },
        CompileIn::ThisProcess => Compiler::InProcess,
    };
    Ok(RuntimeConfig {
        compile: CompileConfig {
            compiler,
            limits,
            cache,
        },
        fuel,
        ..RuntimeConfig::default()
    })
}
