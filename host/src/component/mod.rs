//! Components: loading and checking them, instantiating them in a sandbox, calling them.
//!
//! One [`Runtime`] holds the wasmtime engine and the linker with the host's imports. A
//! [`LoadedComponent`] is a compiled, checked component with its declared [`AppSpec`]; each shard
//! pipeline gets its own [`HandlerInstance`] of it, which replaces itself after a trap.

pub mod bindings;
mod instance;
mod limits;
mod loader;
mod output;
mod state;
mod trap;

pub use instance::{BatchCall, CallFailure, HandlerInstance, InstanceEnv};
pub use limits::{Limits, LogLimits, RuntimeConfig};
pub use loader::{CONTRACT, LoadError, LoadedComponent};
pub use output::LogRate;
pub use trap::TrapKind;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine};

use crate::app::AppSpec;
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
    ticker: Option<Ticker>,
}

impl Runtime {
    /// Builds the engine for `config`.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration or the ticker thread cannot start.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            // Concurrency support costs 1.6-2.3x per call and we never use it.
            .concurrency_support(false)
            .epoch_interruption(config.deadlines)
            .consume_fuel(config.fuel)
            .max_wasm_stack(config.max_wasm_stack);
        let engine = Engine::new(&wasm)?;
        let mut linker = Linker::new(&engine);
        state::add_to_linker(&mut linker)?;
        let ticker = if config.deadlines {
            Some(Ticker::start(engine.clone(), config.epoch_tick)?)
        } else {
            None
        };
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                config,
                ticker,
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.inner.linker
    }
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

/// Summary of what a runtime has loaded, for logs and status output.
pub fn describe_app(app: &AppSpec) -> String {
    let streams: Vec<&str> = app
        .subscriptions
        .iter()
        .map(|s| s.stream.as_str())
        .collect();
    format!("{} {} ({})", app.name, app.version, streams.join(", "))
}
