//! Compiling components: bounded before (size), bounded while (a worker process under
//! `setrlimit` and a timeout), and cached after (by content hash and engine configuration).
//!
//! Who compiles is the [`Compiler`] of the runtime's [`CompileConfig`]: by default the bounded
//! worker run as this program, which the program's `main` serves through [`WORKER_COMMAND`]
//! and [`compile_worker`] (the crate docs, "The compile worker", show how);
//! [`Compiler::InProcess`] is the explicit opt-in for trusted code.

mod bounds;
mod cache;
mod worker;

pub use cache::content_hash;
pub use worker::{WORKER_COMMAND, compile_worker};

pub use crate::limits::{CompileBudget, CompileConfig, CompileLimits, Compiler};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::Runtime;
use super::adapter;
use cache::ArtifactCache;
use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;

/// Why a component did not compile. Each bound names the configuration key that sets it.
///
/// What the compiler said about an invalid component, and what a failed worker said, come
/// from another process (the bounded worker) as one escaped line of text; failures of this
/// process keep their cause as their [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// Refused before compiling: past a size bound.
    #[error("{what} is {actual}{unit}, over the limit of {limit}{unit} (`{key}`)")]
    Bound {
        /// What is too large.
        what: &'static str,
        /// The unit of the sizes, with its leading space (or empty for a count).
        unit: &'static str,
        /// Its size.
        actual: usize,
        /// The bound.
        limit: usize,
        /// The configuration key that sets the bound.
        key: &'static str,
    },
    /// Not valid WebAssembly, or not a component wasmtime can compile; the compiler's reason.
    #[error("not a valid component: {0}")]
    Invalid(String),
    /// The worker ran out of wall time: the budget of the component's size.
    #[error(
        "compiling took longer than {0:?}, the budget for its size (`compile_timeout`, \
         `compile_timeout_per_mib`, `compile_timeout_max`)"
    )]
    Timeout(Duration),
    /// The worker ran out of CPU time: the budget of the component's size.
    #[error(
        "compiling used more than {0:?} of CPU time, the budget for its size \
         (`compile_cpu`, `compile_cpu_per_mib`, `compile_cpu_max`)"
    )]
    CpuTime(Duration),
    /// The worker ran out of memory (its limit, in MiB).
    #[error("compiling needed more than {0} MiB of memory (`compile_memory_mib`)")]
    Memory(u64),
    /// The worker failed otherwise; what it said.
    #[error("the compile worker failed: {0}")]
    Worker(String),
    /// The worker could not be run, or talked to.
    #[error("the compile worker failed {doing}")]
    WorkerIo {
        /// What the host was doing with it.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The compiled artifact was refused by the engine.
    #[error("the compiled artifact cannot be loaded")]
    Artifact(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Worker processes compiling at once. A tenant's loads run one after another, so a tenant
/// sending compile bombs holds one of these at a time, and the others go on.
const WORKER_SLOTS: usize = 4;

/// What a runtime compiles with: its cache, and slots for worker processes.
pub(crate) struct Compilation {
    cache: Option<ArtifactCache>,
    slots: Semaphore,
    /// Components in memory, by content hash, while any load of them lives.
    live: Mutex<HashMap<String, Weak<LiveSlot>>>,
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
            live: Mutex::default(),
        })
    }

    /// The slot of the component whose content hash is `hash`: shared with every load of the
    /// same bytes while any of them lives.
    fn slot(&self, hash: &str) -> Arc<LiveSlot> {
        let mut live = lock(&self.live);
        if let Some(slot) = live.get(hash).and_then(Weak::upgrade) {
            return slot;
        }
        live.retain(|_, slot| slot.strong_count() > 0);
        let slot = Arc::new(LiveSlot::default());
        live.insert(hash.to_owned(), Arc::downgrade(&slot));
        slot
    }
}

/// One component in memory, compiled (or loaded from the cache) by the first load of its bytes.
pub(crate) type LiveSlot = OnceCell<Code>;

/// A component's code, and whether it is mapped from its cached artifact.
#[derive(Clone)]
pub(crate) struct Code {
    component: Component,
    /// The image is the cache file mapped privately, made read-only once published, with no
    /// relocations to apply (wasmtime refuses them in images, DWARF aside, which this engine
    /// does not emit): no page of it differs from the file.
    mapped: bool,
    /// Wrapped with the host's `handle` adapter (`adapter/`), on this route.
    adapted: Option<adapter::AdapterRoute>,
}

/// A compiled component and its content hash (hex SHA-256 of its bytes).
pub(crate) struct Compiled {
    pub component: Component,
    pub content_hash: String,
    mapped: bool,
    /// The component is wrapped with the host's `handle` adapter, on this route.
    pub adapted: Option<adapter::AdapterRoute>,
    /// Keeps the component shared with later loads of the same bytes.
    pub slot: Arc<LiveSlot>,
}

impl Compiled {
    /// Lets go of the pages of the component's image this process has touched so far, when
    /// the image is mapped from the cache: loading touches most of it (wasmtime reads its
    /// metadata, `describe` runs code all over it), and a tenant waiting for records needs
    /// none of it. The pages stay in the page cache, shared and reclaimable; a later call
    /// maps back what it touches. An image in this process's own memory is left alone.
    pub(crate) fn release_touched_pages(&self) {
        if !self.mapped {
            return;
        }
        let image = self.component.image_range();
        let start = image.start as usize;
        let length = (image.end as usize).saturating_sub(start);
        // SAFETY: the range is the component's image, mapped from its cache file by wasmtime
        // (`mapped`), which the component keeps alive here. Every page of it is a clean copy
        // of the file (see `Code::mapped`; cache files are replaced by renames, never written
        // in place), so dropping this process's mappings of them loses nothing: the next
        // access reads the same bytes back from the page cache. `madvise` takes a page-aligned
        // start, which a mapping's start is, and rounds the length up itself.
        let released =
            unsafe { libc::madvise(start as *mut libc::c_void, length, libc::MADV_DONTNEED) };
        if released != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "the pages a component's load touched cannot be released"
            );
        }
    }
}

impl Runtime {
    /// Compiles `bytes` wrapped with the host's `handle` adapter when it can be, or loads the
    /// artifact compiled from the same bytes earlier. The content hash is of `bytes`.
    pub(crate) async fn compile(&self, bytes: Vec<u8>) -> Result<Compiled, CompileError> {
        bounds::check(&bytes, &self.config().compile.limits)?;
        let content_hash = cache::content_hash(&bytes);
        // Loads of the same bytes wait for the first and share its code: a thousand tenants
        // running one component compile it once and hold it in memory once.
        let slot = self.compilation().slot(&content_hash);
        let Code {
            component,
            mapped,
            adapted,
        } = slot
            .get_or_try_init(|| self.load_adapted(&content_hash, bytes))
            .await?
            .clone();
        Ok(Compiled {
            component,
            content_hash,
            mapped,
            adapted,
            slot,
        })
    }

    /// The component wrapped with the host's `handle` adapter, or as it is when the adapter
    /// does not fit it, or when the component compiles only without it (which would be a
    /// bug of the adapter's: it is logged). A wrapped artifact is cached under the component's
    /// hash and the adapter's revision, so a warm load neither wraps nor hashes again.
    async fn load_adapted(&self, content_hash: &str, bytes: Vec<u8>) -> Result<Code, CompileError> {
        let route = match adapter::wanted(&bytes, self.config().handle_adapter) {
            Ok(Some(route)) => route,
            Ok(None) => return self.load_artifact(content_hash, bytes).await,
            Err(reason) => {
                tracing::debug!(component = content_hash, %reason, "called from the host");
                return self.load_artifact(content_hash, bytes).await;
            }
        };
        // The route is read from the bytes, so one key holds either.
        let key = format!("{content_hash}-{}", adapter::revision());
        let wrapped = match self.cached(&key) {
            Some(code) => Ok(code?),
            None => match adapter::adapt(&bytes, route) {
                Ok(adapted) => self.load_artifact(&key, adapted).await,
                Err(reason) => {
                    tracing::debug!(component = content_hash, %reason, "called from the host");
                    return self.load_artifact(content_hash, bytes).await;
                }
            },
        };
        match wrapped {
            Ok(code) => Ok(Code {
                adapted: Some(route),
                ..code
            }),
            Err(CompileError::Invalid(error)) => {
                tracing::warn!(
                    component = content_hash,
                    %error,
                    "the host's handle adapter does not fit this component; it is called from the host"
                );
                self.load_artifact(content_hash, bytes).await
            }
            Err(other) => Err(other),
        }
    }

    /// The artifact cached under `key`, mapped, if the cache holds it.
    fn cached(&self, key: &str) -> Option<Result<Code, CompileError>> {
        let file = self.compilation().cache.as_ref()?.get(key)?;
        // SAFETY: the file holds an artifact this host's own compiler produced, for this
        // engine's configuration (the cache key says so and its digest was checked); wasmtime
        // checks the compatibility header on top. Cache files are replaced by renames, never
        // written in place, so the mapping never changes under wasmtime.
        let component = unsafe { Component::deserialize_file(self.engine(), &file) };
        Some(
            component
                .map(|component| Code {
                    component,
                    mapped: true,
                    adapted: None,
                })
                .map_err(|error| CompileError::Artifact(error.into())),
        )
    }

    /// The component from the artifact cache under `key`, or compiled from `bytes` (and then
    /// cached).
    async fn load_artifact(&self, key: &str, bytes: Vec<u8>) -> Result<Code, CompileError> {
        if let Some(code) = self.cached(key) {
            return code;
        }
        let compiled = self.compile_artifact(bytes).await;
        let result = if compiled.is_ok() { "ok" } else { "refused" };
        metrics::counter!(crate::metrics::COMPILES, "result" => result).increment(1);
        let artifact = compiled?;
        let cache = self.compilation().cache.as_ref();
        match cache.map(|c| c.put(key, &artifact)) {
            Some(Ok(_)) => {
                if let Some(code) = self.cached(key) {
                    return code;
                }
            }
            Some(Err(error)) => tracing::warn!(%error, "a compiled artifact could not be cached"),
            None => {}
        }
        // SAFETY: `artifact` was produced by this host's own compiler, in process or in its
        // compile worker, for this engine's configuration; wasmtime checks the compatibility
        // header on top.
        unsafe { Component::deserialize(self.engine(), &artifact) }
            .map(|component| Code {
                component,
                mapped: false,
                adapted: None,
            })
            .map_err(|error| CompileError::Artifact(error.into()))
    }

    async fn compile_artifact(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CompileError> {
        match &self.config().compile.compiler {
            Compiler::InProcess => {
                let engine = self.engine().clone();
                tokio::task::spawn_blocking(move || engine.precompile_component(&bytes))
                    .await
                    .map_err(|join| CompileError::WorkerIo {
                        doing: "compiling in process",
                        source: join.into(),
                    })?
                    .map_err(|error| CompileError::Invalid(one_line(&*error)))
            }
            Compiler::Worker { program } => {
                let _slot = self
                    .compilation()
                    .slots
                    .acquire()
                    .await
                    .map_err(|_closed| CompileError::WorkerIo {
                        doing: "waiting for a slot",
                        source: std::io::ErrorKind::BrokenPipe.into(),
                    })?;
                worker::compile(program, self.config(), &bytes).await
            }
        }
    }
}
