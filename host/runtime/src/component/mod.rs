//! Components: loading and checking them, instantiating them in a sandbox, calling them.
//!
//! One [`Runtime`] holds the wasmtime engine and the linker with the host's imports. A
//! [`LoadedComponent`] is a compiled, checked component with its declared [`AppSpec`]; each shard
//! pipeline gets its own [`HandlerInstance`] of it, which replaces itself after a trap.
//!
//! A component is called in one of two forms ([`CallForm`]): through `handle`, one record per
//! call (the base contract), or through `handle-batch` when it exports the batch fast path.
//! `handle` is called inside the component by an adapter the host adds beside it at compile
//! time (`adapter/`), one host call per batch; from the host, one call per record, when the
//! adapter does not fit.

pub(crate) mod adapter;
mod batch;
mod bindings;
mod board;
pub mod compile;
mod declaration;
mod exports;
mod handle;
mod heap_trim;
mod imports;
mod instance;
mod loader;
mod output;
mod phase;
mod progress;
mod state;
mod trap;
mod version;

pub use exports::CallForm;
pub use imports::{ImportAccess, import_access};
pub use instance::{BatchCall, BatchFailure, CallFailure, HandlerInstance};
pub use loader::{LoadError, LoadedComponent, Refusal};
pub use phase::LoadPhase;
pub use trap::TrapKind;
pub use version::{CONTRACT, ContractVersion, VersionRefusal};

/// What a component instance and the pipelines driving it act on (its own module: the pipeline
/// shares it).
pub use crate::env::Env;
/// The engine-wide settings a [`Runtime`] is built with.
pub use crate::limits::{HandleAdapter, RuntimeConfig};
/// Where the host's `handle` adapter went in a component it wrapped.
pub use adapter::AdapterRoute;

use std::path::PathBuf;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine};

use crate::app::AppSpec;
use crate::cpu::{Compute, ComputePool, CpuUsage};
use compile::Compilation;
use heap_trim::HeapTrim;
use state::HostState;

/// The engine, linker and epoch ticker shared by every component of a host.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    linker: Linker<HostState>,
    config: RuntimeConfig,
    compilation: Compilation,
    heap_trim: HeapTrim,
    ticker: Option<Ticker>,
    compute: Option<ComputePool>,
}

impl Runtime {
    /// Builds the engine for `config`.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration, the artifact cache directory cannot be
    /// created, or the ticker thread cannot start; see [`RuntimeError`].
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let engine = Engine::new(&engine_config(&config)).map_err(RuntimeError::engine)?;
        let mut linker = Linker::new(&engine);
        state::add_to_linker(&mut linker).map_err(RuntimeError::engine)?;
        let compilation =
            Compilation::new(&engine, &config.compile).map_err(|source| RuntimeError::Cache {
                path: config.compile.cache.clone(),
                source,
            })?;
        let ticker = if config.deadlines {
            Some(Ticker::start(engine.clone(), config.epoch_tick).map_err(RuntimeError::Ticker)?)
        } else {
            None
        };
        let compute = match config.compute {
            Compute::Inline => None,
            Compute::Pool { threads } => {
                Some(ComputePool::start(threads).map_err(RuntimeError::Compute)?)
            }
        };
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                config,
                compilation,
                heap_trim: HeapTrim::default(),
                ticker,
                compute,
            }),
        })
    }

    /// What each tenant's calls used of the compute pool so far (empty with
    /// [`Compute::Inline`]).
    pub fn cpu_usage(&self) -> Vec<CpuUsage> {
        self.inner
            .compute
            .as_ref()
            .map_or_else(Vec::new, ComputePool::usage)
    }

    /// How many guest calls run at once at most (`None` with [`Compute::Inline`]).
    pub fn compute_slots(&self) -> Option<usize> {
        self.inner.compute.as_ref().map(ComputePool::slots)
    }

    pub(crate) fn compute(&self) -> Option<&ComputePool> {
        self.inner.compute.as_ref()
    }

    /// The wasmtime engine every component of this runtime is compiled for.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.inner.linker
    }

    pub(crate) fn compilation(&self) -> &Compilation {
        &self.inner.compilation
    }

    pub(crate) fn heap_trim(&self) -> &HeapTrim {
        &self.inner.heap_trim
    }
}

/// Why a [`Runtime`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Wasmtime refused the engine configuration, or the host's imports.
    #[error("the wasm engine cannot be configured")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The compiled-artifact cache directory cannot be opened or created.
    #[error("cannot open the compiled-artifact cache {path:?}")]
    Cache {
        /// The directory.
        path: Option<PathBuf>,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The thread advancing the engine's epoch (deadlines) cannot start.
    #[error("cannot start the epoch ticker thread")]
    Ticker(#[source] std::io::Error),
    /// The compute threads cannot start.
    #[error("cannot start the compute threads")]
    Compute(#[source] std::io::Error),
}

impl RuntimeError {
    fn engine(error: wasmtime::Error) -> Self {
        Self::Engine(error.into())
    }
}

/// The engine configuration of `config`: the same in the host and in its compile worker, so
/// the worker's artifacts load here.
pub(crate) fn engine_config(config: &RuntimeConfig) -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        // Concurrency support costs 1.6-2.3x per call and we never use it.
        .concurrency_support(false)
        .epoch_interruption(config.deadlines)
        .consume_fuel(config.fuel)
        .max_wasm_stack(config.max_wasm_stack);
    if config.perf_map {
        wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    wasm
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.stop();
        }
    }
}

/// Advances the engine's epoch at a fixed tick, which is what lets a running guest be
/// interrupted (deadline) and yield to the async executor.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ticker {
    fn start(engine: Engine, tick: std::time::Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ruststream-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })?;
        Ok(Self { stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Summary of what a runtime has loaded, for logs and status output: the app, its version and
/// its first few streams.
pub fn describe_app(app: &AppSpec) -> String {
    const SHOWN: usize = 4;
    let mut streams: Vec<&str> = app
        .subscriptions
        .iter()
        .map(|s| s.stream.as_str())
        .collect();
    streams.dedup();
    let more = streams.len().saturating_sub(SHOWN);
    streams.truncate(SHOWN);
    let more = if more > 0 {
        format!(", and {more} more")
    } else {
        String::new()
    };
    format!(
        "{} {} ({}{more})",
        app.name,
        app.version,
        streams.join(", ")
    )
}
