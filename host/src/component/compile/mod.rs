//! Compiling components: bounded before (size), bounded while (a worker process under
//! `setrlimit` and a timeout), and cached after (by content hash and engine configuration).

mod bounds;
mod cache;
mod worker;

pub use worker::{WORKER_COMMAND, compile_worker};

use std::time::Duration;

use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{CompileConfig, Compiler, Runtime};
use crate::escape::one_line;
use cache::ArtifactCache;

/// Why a component did not compile. Each bound names the configuration key that sets it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// Refused before compiling: past a size bound.
    #[error("{what} is {actual}{unit}, over the limit of {limit}{unit} (`{key}`)")]
    Bound {
        what: &'static str,
        unit: &'static str,
        actual: usize,
        limit: usize,
        key: &'static str,
    },
    /// Not valid WebAssembly, or not a component wasmtime can compile.
    #[error("not a valid component: {0}")]
    Invalid(String),
    #[error("compiling took longer than {0:?} (`compile_timeout_ms`)")]
    Timeout(Duration),
    #[error("compiling used more than {0:?} of CPU time (`compile_cpu_seconds`)")]
    CpuTime(Duration),
    #[error("compiling needed more than {0} MiB of memory (`compile_memory_mib`)")]
    Memory(u64),
    #[error("the compile worker failed: {0}")]
    Worker(String),
    #[error("the compiled artifact cannot be loaded: {0}")]
    Artifact(String),
}

/// Worker processes compiling at once. A tenant's loads run one after another, so a tenant
/// sending compile bombs holds one of these at a time, and the others go on.
const WORKER_SLOTS: usize = 4;

/// What a runtime compiles with: its cache, and slots for worker processes.
pub(crate) struct Compilation {
    cache: Option<ArtifactCache>,
    slots: Semaphore,
}

impl Compilation {
    pub(crate) fn new(engine: &Engine, config: &CompileConfig) -> std::io::Result<Self> {
        let cache = config
            .cache
            .as_deref()
            .map(|dir| ArtifactCache::open(dir, cache::engine_key(engine)))
            .transpose()?;
        Ok(Self {
            cache,
            slots: Semaphore::new(WORKER_SLOTS),
        })
    }
}

/// A compiled component and its content hash (hex SHA-256 of its bytes).
pub(crate) struct Compiled {
    pub component: Component,
    pub content_hash: String,
}

impl Runtime {
    /// Compiles `bytes`, or loads the artifact compiled from the same bytes earlier.
    pub(crate) async fn compile(&self, bytes: Vec<u8>) -> Result<Compiled, CompileError> {
        let config = &self.config().compile;
        bounds::check(&bytes, &config.limits)?;
        let content_hash = cache::content_hash(&bytes);
        let compilation = self.compilation();
        let cached = compilation
            .cache
            .as_ref()
            .and_then(|c| c.get(&content_hash));
        let artifact = match cached {
            Some(artifact) => artifact,
            None => {
                let artifact = self.compile_artifact(bytes).await?;
                if let Some(Err(error)) = compilation
                    .cache
                    .as_ref()
                    .map(|c| c.put(&content_hash, &artifact))
                {
                    tracing::warn!(%error, "a compiled artifact could not be cached");
                }
                artifact
            }
        };
        // SAFETY: `artifact` was produced by this host's own compiler, in process or in its
        // compile worker, for this engine's configuration (the cache key says so and its
        // digest was checked); wasmtime checks the compatibility header on top.
        let component = unsafe { Component::deserialize(self.engine(), &artifact) }
            .map_err(|error| CompileError::Artifact(one_line(&*error)))?;
        Ok(Compiled {
            component,
            content_hash,
        })
    }

    async fn compile_artifact(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CompileError> {
        match &self.config().compile.compiler {
            Compiler::InProcess => {
                let engine = self.engine().clone();
                tokio::task::spawn_blocking(move || engine.precompile_component(&bytes))
                    .await
                    .map_err(|join| CompileError::Worker(join.to_string()))?
                    .map_err(|error| CompileError::Invalid(one_line(&*error)))
            }
            Compiler::Worker { program } => {
                let _slot = self
                    .compilation()
                    .slots
                    .acquire()
                    .await
                    .map_err(|closed| CompileError::Worker(closed.to_string()))?;
                worker::compile(program, self.config(), &bytes).await
            }
        }
    }
}
