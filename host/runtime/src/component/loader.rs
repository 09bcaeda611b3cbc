//! Loading a component file: checking it is a RustStream component and learning its app.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Component;

use super::Runtime;
use super::adapter::SHARE_IMPORT;
use super::bindings::contract_version;
use super::compile::{CompileError, LiveSlot};
use super::declaration::app_spec;
use super::exports::{CallForm, ExportRefusal, HandlerPre, call_form};
use super::imports::{ImportAccess, import_access};
use super::instance::{CallFailure, HandlerInstance, describe};
use super::phase::LoadPhase;
use super::version::{self, CONTRACT_PREFIX, VersionRefusal};
use crate::app::{AppSpec, DeclarationBounds, SpecError};
use crate::clock::{Clock, SystemClock};
use crate::cpu::CpuAccount;
use crate::env::Env;
use crate::log::LogSink;
use crate::policy::SandboxPolicy;
use crate::publish::{BoxFuture, PublishError, PublishNotes, Publisher};
use crate::record::{OutgoingRecord, Published};
use ruststream_common::escape::quote;

const HANDLER_EXPORT: &str = concat!("ruststream:handler/handler@", contract_version!());

/// Why a component was refused: whose component, in which phase of loading, and why.
///
/// Displayed alone it names tenant, component and phase; the reason is its
/// [`source`](std::error::Error::source), so render it with its causes
/// ([`one_line`](ruststream_common::escape::one_line), or `{:#}` through `anyhow`).
#[derive(Debug, thiserror::Error)]
#[error("tenant `{tenant}`, component `{component}`: {phase} refused")]
pub struct LoadError {
    /// The tenant the component was loaded for.
    pub tenant: String,
    /// The component's name (its file's stem, or the name it was loaded under), quoted.
    pub component: String,
    /// How far loading got.
    pub phase: LoadPhase,
    /// Why it was refused.
    #[source]
    pub refusal: Refusal,
}

/// The reason a component was refused. Anything the component named (imports, exports) is
/// quoted escaped and cut short.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The file cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The bytes do not start with the WebAssembly magic number.
    #[error("not a WebAssembly file (no `\\0asm` header)")]
    NotWasm,
    /// A core module rather than a component: built for the wrong target.
    #[error(
        "this is a core WebAssembly module, not a component; build it with `--target wasm32-wasip2`"
    )]
    CoreModule,
    /// A WebAssembly encoding this host does not know; holds the version and layer bytes
    /// found (at most four).
    #[error("unsupported WebAssembly encoding version {0:02x?}")]
    UnknownEncoding(Vec<u8>),
    /// Past a compile bound, not a valid component, or the compile worker failed.
    #[error(transparent)]
    Compile(CompileError),
    /// The component does not export the handler interface of any contract version.
    #[error(
        "does not export `{HANDLER_EXPORT}` (it exports: {found}); is it built with the \
         RustStream guest SDK, or bindings of wit/ruststream.wit?"
    )]
    MissingExport {
        /// What it exports instead, quoted, or `nothing`.
        found: String,
    },
    /// The component exports or imports a version of the contract this host does not run
    /// (the rule: [`ContractVersion::runs`](super::ContractVersion::runs)).
    #[error(transparent)]
    ContractVersion(VersionRefusal),
    /// The component imports an interface outside the host's contract and the WASI 0.2
    /// interfaces the host serves or denies (see [`import_access`](super::import_access)).
    #[error(
        "imports `{import}`, which is neither WASI 0.2 nor the RustStream contract: this host \
         cannot link it"
    )]
    ForbiddenImport {
        /// The import, quoted.
        import: String,
    },
    /// Wasmtime cannot link the component's imports to the host's.
    #[error("cannot be linked")]
    Link(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Instantiating it or calling `describe` trapped or ran past its deadline.
    #[error(transparent)]
    Trap(CallFailure),
    /// What `describe` declared is not valid.
    #[error(transparent)]
    Spec(SpecError),
}

/// A compiled component that passed every check, with the app it declares.
#[derive(Clone)]
pub struct LoadedComponent {
    name: Arc<str>,
    content_hash: Arc<str>,
    runtime: Runtime,
    pre: HandlerPre,
    app: AppSpec,
    /// The imports linked to implementations that refuse every call, quoted.
    denied: Arc<[String]>,
    /// Shares the compiled code with other loads of the same bytes while this one lives.
    _code: Arc<LiveSlot>,
}

impl LoadedComponent {
    /// Loads the component file at `path` under a tenant's `policy`, named after the file's
    /// stem.
    ///
    /// Instantiation and `describe` run under the tenant's limits (deadline, memory, fuel);
    /// what the component logs meanwhile goes to `log`, within the tenant's log budget.
    ///
    /// # Errors
    /// See [`LoadError`]: unreadable file, not a component, past a compile bound, wrong or
    /// missing contract, ungranted imports, a trap or deadline while instantiating or
    /// describing, or an invalid declaration.
    pub async fn from_file(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        policy: &Arc<SandboxPolicy>,
        log: &LogSink,
    ) -> Result<Self, LoadError> {
        Self::from_file_noting(runtime, path, policy, log, None).await
    }

    /// As [`from_file`](Self::from_file), noting in `notes` the publishes refused while
    /// loading (every one: a component publishes nothing while it is instantiated and
    /// described).
    pub(crate) async fn from_file_noting(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        policy: &Arc<SandboxPolicy>,
        log: &LogSink,
        notes: Option<&PublishNotes>,
    ) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        let bytes = read_bounded(path, runtime.config().compile.limits.max_bytes)
            .await
            .map_err(|refusal| refused(policy, &name, LoadPhase::Read, refusal))?;
        Self::from_bytes_noting(runtime, &name, bytes, policy, log, notes).await
    }

    /// Loads a component from its bytes, under the name `name`, under a tenant's `policy`.
    ///
    /// # Errors
    /// As [`from_file`](Self::from_file).
    pub async fn from_bytes(
        runtime: &Runtime,
        name: &str,
        bytes: Vec<u8>,
        policy: &Arc<SandboxPolicy>,
        log: &LogSink,
    ) -> Result<Self, LoadError> {
        Self::from_bytes_noting(runtime, name, bytes, policy, log, None).await
    }

    /// As [`from_bytes`](Self::from_bytes), noting in `notes` the publishes refused while
    /// loading.
    pub(crate) async fn from_bytes_noting(
        runtime: &Runtime,
        name: &str,
        bytes: Vec<u8>,
        policy: &Arc<SandboxPolicy>,
        log: &LogSink,
        notes: Option<&PublishNotes>,
    ) -> Result<Self, LoadError> {
        let fail = |phase, refusal| refused(policy, name, phase, refusal);
        check_header(&bytes).map_err(|r| fail(LoadPhase::Check, r))?;
        let compiled = runtime
            .compile(bytes)
            .await
            .map_err(|error| fail(LoadPhase::Compile, Refusal::Compile(error)))?;
        let component = &compiled.component;
        let form = check_exports(runtime, component).map_err(|r| fail(LoadPhase::Check, r))?;
        let denied = check_imports(runtime, component, compiled.adapted.is_some())
            .map_err(|r| fail(LoadPhase::Check, r))?;
        let pre = runtime
            .linker()
            .instantiate_pre(component)
            .and_then(|pre| HandlerPre::new(pre, form, compiled.adapted))
            .map_err(|error| fail(LoadPhase::Link, Refusal::Link(error.into())))?;
        let env = describe_env(name, policy, log);
        let notes = notes.map(PublishNotes::while_loading);
        let described = describe(runtime, &pre, env, notes).await;
        compiled.release_touched_pages();
        runtime.heap_trim().after_load();
        policy.host_lines().summarise(log);
        let app = described.map_err(|(phase, failure)| fail(phase, Refusal::Trap(failure)))?;
        let bounds = DeclarationBounds {
            max_subscriptions: policy.limits().max_subscriptions,
            now_ms: SystemClock.now_ms(),
        };
        let app = app_spec(app, &bounds)
            .map_err(|error| fail(LoadPhase::Declaration, Refusal::Spec(error)))?;
        Ok(Self {
            name: name.into(),
            content_hash: compiled.content_hash.into(),
            runtime: runtime.clone(),
            pre,
            app,
            denied: denied.into(),
            _code: compiled.slot,
        })
    }

    /// The component's name: its file's stem, or the name it was loaded under; tags its log
    /// lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hex SHA-256 of the component's bytes: which build this is.
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    /// The app and subscriptions the component declared.
    pub fn app(&self) -> &AppSpec {
        &self.app
    }

    /// The WASI interfaces it imports that the tenant is not granted (sockets, HTTP), quoted:
    /// linked to implementations that refuse every call with the interface's access error.
    pub fn denied_imports(&self) -> &[String] {
        &self.denied
    }

    /// How the host calls it: in batches through `handle-batch`, or through `handle` one
    /// record per call.
    pub fn form(&self) -> CallForm {
        self.pre.form()
    }

    /// Whether the host's adapter calls `handle` inside the component, once per record of a
    /// batch, with one host call per batch (`adapter/`); otherwise the host calls `handle`
    /// once per record. What a component in the [`CallForm::Handle`] form gets
    /// whenever the adapter fits it (every component wit-component builds); one with the
    /// batch fast path only under [`HandleAdapter::All`](crate::component::HandleAdapter::All).
    pub fn handle_adapted(&self) -> bool {
        self.pre.adapted()
    }

    /// Where the host's adapter went, when [`handle_adapted`](Self::handle_adapted):
    /// [`AdapterRoute::Inline`](crate::component::AdapterRoute::Inline) for every component
    /// wit-component builds.
    pub fn handle_adapter_route(&self) -> Option<crate::component::AdapterRoute> {
        self.pre.adapter()
    }

    /// The same component called through `handle`, one record per call (by the host's
    /// adapter when it fits), even if it exports the batch fast path: for benchmarks and tests
    /// comparing the two forms on one build.
    pub fn through_handle(mut self) -> Self {
        self.pre = self.pre.without_batch();
        self
    }

    /// The account `policy`'s calls of this component are charged to on its runtime's compute
    /// pool (shared by every component of the tenant), if it has one.
    pub fn cpu_account(&self, policy: &SandboxPolicy) -> Option<Arc<CpuAccount>> {
        let pool = self.runtime.compute()?;
        Some(pool.account(policy.tenant(), policy.limits().cpu_weight))
    }

    /// A new instance (instantiated lazily, on its first call) acting on `env`.
    pub fn instance(&self, env: Env) -> HandlerInstance {
        HandlerInstance::new(self.runtime.clone(), self.pre.clone(), env)
    }

    /// An [`Env`] for this component run under `policy`.
    pub fn env(
        &self,
        policy: Arc<SandboxPolicy>,
        publisher: Arc<dyn Publisher>,
        clock: Arc<dyn Clock>,
        log: LogSink,
    ) -> Env {
        Env {
            component: self.name.clone(),
            policy,
            publisher,
            clock,
            log,
        }
    }
}

fn refused(
    policy: &SandboxPolicy,
    component: &str,
    phase: LoadPhase,
    refusal: Refusal,
) -> LoadError {
    LoadError {
        tenant: policy.tenant().to_owned(),
        component: quote(component),
        phase,
        refusal,
    }
}

/// Reads `path`, refusing a file over `max` bytes before reading it.
async fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, Refusal> {
    let read = |source| Refusal::Read {
        path: path.display().to_string(),
        source,
    };
    let size = tokio::fs::metadata(path).await.map_err(read)?.len();
    if size > max as u64 {
        return Err(Refusal::Compile(CompileError::Bound {
            what: "the component",
            unit: " bytes",
            actual: usize::try_from(size).unwrap_or(usize::MAX),
            limit: max,
            key: "compile_max_bytes",
        }));
    }
    tokio::fs::read(path).await.map_err(read)
}

fn check_header(bytes: &[u8]) -> Result<(), Refusal> {
    let Some(rest) = bytes.strip_prefix(b"\0asm") else {
        return Err(Refusal::NotWasm);
    };
    match rest.get(..4) {
        Some([1, 0, 0, 0]) => Err(Refusal::CoreModule),
        Some([_, _, 1, 0]) => Ok(()),
        other => Err(Refusal::UnknownEncoding(other.unwrap_or(rest).to_vec())),
    }
}

fn check_exports(runtime: &Runtime, compiled: &Component) -> Result<CallForm, Refusal> {
    call_form(runtime.engine(), compiled).map_err(|refusal| match refusal {
        ExportRefusal::Missing(found) => Refusal::MissingExport { found },
        ExportRefusal::Version(version) => Refusal::ContractVersion(version),
    })
}

/// Checks the component's imports: the contract's at this host's version, and none that
/// [`import_access`] refuses. Returns the denied ones (linked to implementations refusing every call).
/// The host adapter's own import is granted only where the host wrapped the component with the adapter
/// (`adapted`).
fn check_imports(
    runtime: &Runtime,
    compiled: &Component,
    adapted: bool,
) -> Result<Vec<String>, Refusal> {
    let ty = compiled.component_type();
    let mut denied = Vec::new();
    for (name, _) in ty.imports(runtime.engine()) {
        if adapted && name == SHARE_IMPORT {
            continue;
        }
        let interface = name
            .rsplit_once('@')
            .map_or(name, |(interface, _)| interface);
        if interface.starts_with(CONTRACT_PREFIX) {
            version::check(name).map_err(Refusal::ContractVersion)?;
        }
        match import_access(name) {
            ImportAccess::Granted => {}
            ImportAccess::Denied => denied.push(quote(name)),
            ImportAccess::Refused => {
                return Err(Refusal::ForbiddenImport {
                    import: quote(name),
                });
            }
        }
    }
    Ok(denied)
}

/// The environment of the instance that answers `describe`: the tenant's limits and log
/// budget; it may log, never publish.
fn describe_env(component: &str, policy: &Arc<SandboxPolicy>, log: &LogSink) -> Env {
    Env {
        component: component.into(),
        policy: policy.clone(),
        publisher: Arc::new(RefusingPublisher),
        clock: Arc::new(SystemClock),
        log: log.clone(),
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
