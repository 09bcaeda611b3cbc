//! Loading a component file: checking it is a RustStream component and learning its app.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Component;

use super::Runtime;
use super::bindings::SubscriberAppPre;
use super::instance::{HandlerInstance, InstanceEnv, describe};
use super::state::HostState;
use crate::app::{AppSpec, SpecError};
use crate::log::LogSink;
use crate::publish::{BoxFuture, PublishError, Publisher};
use crate::record::{OutgoingRecord, Published};
use crate::tenant::Tenant;

/// The WIT package this host implements.
pub const CONTRACT: &str = "ruststream:handler@0.1.0";
const CONTRACT_VERSION: &str = "0.1.0";
const HANDLER_EXPORT: &str = "ruststream:handler/handler@0.1.0";
const CONTRACT_PREFIX: &str = "ruststream:handler/";

/// Why a component was refused. Every variant names the component.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("component `{component}`: cannot read {path}: {source}")]
    Read {
        component: String,
        path: String,
        source: std::io::Error,
    },
    #[error("component `{component}`: not a WebAssembly file (no `\\0asm` header)")]
    NotWasm { component: String },
    #[error(
        "component `{component}`: this is a core WebAssembly module, not a component; \
         build it with `--target wasm32-wasip2`"
    )]
    CoreModule { component: String },
    #[error("component `{component}`: unsupported WebAssembly encoding version {version:02x?}")]
    UnknownEncoding { component: String, version: Vec<u8> },
    #[error("component `{component}`: does not compile: {reason}")]
    Compile { component: String, reason: String },
    #[error(
        "component `{component}`: does not export `{HANDLER_EXPORT}` (it exports: {found}); \
         is it built with the RustStream guest SDK?"
    )]
    MissingExport { component: String, found: String },
    #[error(
        "component `{component}`: built against `{found}`, but this host implements {CONTRACT}"
    )]
    ContractVersion { component: String, found: String },
    #[error("component `{component}`: imports `{import}`, which this host does not grant")]
    ForbiddenImport { component: String, import: String },
    #[error("component `{component}`: cannot be linked: {reason}")]
    Link { component: String, reason: String },
    #[error("component `{component}`: `describe` failed: {reason}")]
    Describe { component: String, reason: String },
    #[error("component `{component}`: {source}")]
    Spec {
        component: String,
        source: SpecError,
    },
}

/// A compiled component that passed every check, with the app it declares.
#[derive(Clone)]
pub struct LoadedComponent {
    name: Arc<str>,
    runtime: Runtime,
    pre: SubscriberAppPre<HostState>,
    app: AppSpec,
}

impl LoadedComponent {
    /// Loads the component file at `path`, named after the file's stem.
    ///
    /// # Errors
    /// See [`LoadError`]: unreadable file, not a component, wrong or missing contract,
    /// unlinkable imports, or an invalid declaration.
    pub async fn from_file(runtime: &Runtime, path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|source| LoadError::Read {
                component: name.clone(),
                path: path.display().to_string(),
                source,
            })?;
        Self::from_bytes(runtime, &name, bytes).await
    }

    /// Loads a component from its bytes, under the name `name`.
    ///
    /// # Errors
    /// As [`from_file`](Self::from_file).
    pub async fn from_bytes(
        runtime: &Runtime,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<Self, LoadError> {
        let component = name.to_owned();
        check_header(&component, &bytes)?;
        let engine = runtime.engine().clone();
        let compiled = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|join| LoadError::Compile {
                component: component.clone(),
                reason: join.to_string(),
            })?
            .map_err(|error| LoadError::Compile {
                component: component.clone(),
                reason: format!("{error:#}"),
            })?;
        check_exports(runtime, &component, &compiled)?;
        check_imports(runtime, &component, &compiled)?;
        let pre = runtime
            .linker()
            .instantiate_pre(&compiled)
            .and_then(SubscriberAppPre::new)
            .map_err(|error| LoadError::Link {
                component: component.clone(),
                reason: format!("{error:#}"),
            })?;
        let app = describe(runtime, &pre, describe_env(name))
            .await
            .map_err(|failure| LoadError::Describe {
                component: component.clone(),
                reason: failure.to_string(),
            })?;
        let app = AppSpec::from_wit(app).map_err(|source| LoadError::Spec {
            component: component.clone(),
            source,
        })?;
        Ok(Self {
            name: name.into(),
            runtime: runtime.clone(),
            pre,
            app,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The app and subscriptions the component declared.
    pub fn app(&self) -> &AppSpec {
        &self.app
    }

    /// A new instance (instantiated lazily, on its first call) acting on `env`.
    pub fn instance(&self, env: InstanceEnv) -> HandlerInstance {
        HandlerInstance::new(self.runtime.clone(), self.pre.clone(), env)
    }

    /// An [`InstanceEnv`] for this component run by `tenant`.
    pub fn env(
        &self,
        tenant: Arc<Tenant>,
        publisher: Arc<dyn Publisher>,
        log: LogSink,
    ) -> InstanceEnv {
        InstanceEnv {
            component: self.name.clone(),
            tenant,
            publisher,
            log,
        }
    }
}

fn check_header(component: &str, bytes: &[u8]) -> Result<(), LoadError> {
    let Some(rest) = bytes.strip_prefix(b"\0asm") else {
        return Err(LoadError::NotWasm {
            component: component.to_owned(),
        });
    };
    match rest.get(..4) {
        Some([1, 0, 0, 0]) => Err(LoadError::CoreModule {
            component: component.to_owned(),
        }),
        Some([_, _, 1, 0]) => Ok(()),
        other => Err(LoadError::UnknownEncoding {
            component: component.to_owned(),
            version: other.unwrap_or(rest).to_vec(),
        }),
    }
}

fn check_exports(
    runtime: &Runtime,
    component: &str,
    compiled: &Component,
) -> Result<(), LoadError> {
    let ty = compiled.component_type();
    let names: Vec<&str> = ty.exports(runtime.engine()).map(|(name, _)| name).collect();
    if names.contains(&HANDLER_EXPORT) {
        return Ok(());
    }
    if let Some(other) = names.iter().find(|n| n.starts_with(CONTRACT_PREFIX)) {
        return Err(LoadError::ContractVersion {
            component: component.to_owned(),
            found: (*other).to_owned(),
        });
    }
    Err(LoadError::MissingExport {
        component: component.to_owned(),
        found: if names.is_empty() {
            "nothing".to_owned()
        } else {
            names.join(", ")
        },
    })
}

fn check_imports(
    runtime: &Runtime,
    component: &str,
    compiled: &Component,
) -> Result<(), LoadError> {
    let ty = compiled.component_type();
    for (name, _) in ty.imports(runtime.engine()) {
        let (interface, version) = name.rsplit_once('@').unwrap_or((name, ""));
        if interface.starts_with(CONTRACT_PREFIX) && version != CONTRACT_VERSION {
            return Err(LoadError::ContractVersion {
                component: component.to_owned(),
                found: name.to_owned(),
            });
        }
        if !import_allowed(interface, version) {
            return Err(LoadError::ForbiddenImport {
                component: component.to_owned(),
                import: name.to_owned(),
            });
        }
    }
    Ok(())
}

/// The interfaces a component may import: the host's own, and the WASI 0.2 interfaces that
/// Rust's standard library needs, served by a context with no preopened directories, no
/// environment, no arguments and no network. Sockets, HTTP and anything else are refused.
const ALLOWED_IMPORTS: &[&str] = &[
    "ruststream:handler/host",
    "ruststream:handler/types",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
];

fn import_allowed(interface: &str, version: &str) -> bool {
    let wasi_p2 = !interface.starts_with("wasi:") || version.starts_with("0.2.");
    wasi_p2 && ALLOWED_IMPORTS.contains(&interface)
}

/// The environment of the instance that answers `describe`: it may log, never publish.
fn describe_env(component: &str) -> InstanceEnv {
    InstanceEnv {
        component: component.into(),
        tenant: Arc::new(Tenant::new("(loading)")),
        publisher: Arc::new(RefusingPublisher),
        log: LogSink::new(),
    }
}

/// A publisher for contexts where publishing is never allowed.
struct RefusingPublisher;

impl Publisher for RefusingPublisher {
    fn publish<'a>(
        &'a self,
        stream: &'a str,
        _record: OutgoingRecord,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move { Err(PublishError::NotPermitted(stream.to_owned())) })
    }
}
