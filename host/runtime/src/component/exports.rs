//! What a component exports: the contract's `handler` interface always, the `batch` fast path
//! optionally. Which of the two forms it has decides how the host calls it.

use std::fmt;

use wasmtime::component::{
    Component, ComponentExportIndex, Func, Instance, InstancePre, TypedFunc,
};
use wasmtime::{AsContextMut, Engine};

use super::adapter::{ADAPTED_EXPORT, AdapterRoute};
use super::bindings::exports::ruststream::handler::{batch, handler};
use super::state::HostState;
use super::version::{self, CONTRACT_PREFIX, VersionRefusal};
use ruststream_common::escape::quote;

/// How the host calls a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallForm {
    /// It exports the `batch` interface: records are handed over in batches through
    /// `handle-batch`, outcomes reported on the way (the SDK's form).
    Batch,
    /// It exports `handler` only: one `handle` call per record, each with a fresh deadline.
    Handle,
}

impl fmt::Display for CallForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Batch => "handle-batch (batch fast path)",
            Self::Handle => "handle (one record per call)",
        })
    }
}

/// Why a component's exports are refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExportRefusal {
    /// No `handler` interface of any version.
    #[error("no handler export; it exports {0}")]
    Missing(String),
    /// A contract export of a version the host does not run.
    #[error(transparent)]
    Version(VersionRefusal),
}

/// The form `component` is called in, from its exports: `handler` of a version this host
/// runs, and `batch` beside it for the fast path.
///
/// # Errors
/// No `handler` export (with what it exports instead, quoted, or `nothing`), or a contract
/// export of a version this host does not run.
pub(crate) fn call_form(engine: &Engine, component: &Component) -> Result<CallForm, ExportRefusal> {
    let ty = component.component_type();
    let names: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
    let export = |interface: &str| {
        let prefix = format!("{CONTRACT_PREFIX}{interface}");
        names
            .iter()
            .copied()
            .find(|name| name.split('@').next() == Some(prefix.as_str()))
    };
    let Some(handler) = export("handler") else {
        return Err(ExportRefusal::Missing(if names.is_empty() {
            "nothing".to_owned()
        } else {
            quote(&names.join(", "))
        }));
    };
    version::check(handler).map_err(ExportRefusal::Version)?;
    match export("batch") {
        Some(batch) => {
            version::check(batch).map_err(ExportRefusal::Version)?;
            Ok(CallForm::Batch)
        }
        None => Ok(CallForm::Handle),
    }
}

/// A linked component ready to instantiate, with where its exports are.
#[derive(Clone)]
pub(crate) struct HandlerPre {
    pub(crate) pre: InstancePre<HostState>,
    handler: handler::GuestIndices,
    batch: Option<batch::GuestIndices>,
    /// The host adapter's `handle` loop, when the host wrapped the component with it
    /// (`adapter/`), and on which route.
    records: Option<(ComponentExportIndex, AdapterRoute)>,
}

/// The exports of one instance.
pub(crate) struct Exports {
    pub(crate) handler: handler::Guest,
    /// Present for a component of the [`CallForm::Batch`] form.
    pub(crate) batch: Option<batch::Guest>,
    /// The host adapter's `handle` loop, when the host wrapped the component with it.
    pub(crate) records: Option<Records>,
}

/// The host adapter's export: `handle` called once per record of a batch, inside the
/// component (`adapter/`).
#[derive(Clone, Copy)]
pub(crate) struct Records(Func);

/// What [`Records`] takes: the subscription, the stream, the shard id, and the batch's arena,
/// records and headers as `handle-batch` takes them.
type RecordsParams<'a> = (u32, &'a str, &'a str, &'a [u8], &'a [u8], &'a [u8]);

impl Records {
    /// The function, typed.
    pub(crate) fn typed<'a>(self) -> TypedFunc<RecordsParams<'a>, ()> {
        // SAFETY: `Exports` checked the function's type against these parameters when it
        // loaded it (`Records::load`), and a component's export never changes its type.
        unsafe { TypedFunc::new_unchecked(self.0) }
    }

    fn load(
        mut store: impl AsContextMut<Data = HostState>,
        instance: &Instance,
        index: ComponentExportIndex,
    ) -> wasmtime::Result<Self> {
        let func = instance
            .get_func(&mut store, index)
            .ok_or_else(|| wasmtime::Error::msg("the host adapter's export is missing"))?;
        func.typed::<RecordsParams<'_>, ()>(&store)?;
        Ok(Self(func))
    }
}

impl HandlerPre {
    /// Finds the exports of `form` in `pre`, and the host adapter's if `adapted` (the host
    /// wrapped the component with it: a component's own export of that name is never called).
    ///
    /// # Errors
    /// When an export is missing or has another type than the contract's.
    pub(crate) fn new(
        pre: InstancePre<HostState>,
        form: CallForm,
        adapted: Option<AdapterRoute>,
    ) -> wasmtime::Result<Self> {
        let handler = handler::GuestIndices::new(&pre)?;
        let batch = match form {
            CallForm::Batch => Some(batch::GuestIndices::new(&pre)?),
            CallForm::Handle => None,
        };
        let records = match adapted {
            Some(route) => Some((
                pre.component()
                    .get_export_index(None, ADAPTED_EXPORT)
                    .ok_or_else(|| wasmtime::Error::msg("the host adapter's export is missing"))?,
                route,
            )),
            None => None,
        };
        Ok(Self {
            pre,
            handler,
            batch,
            records,
        })
    }

    /// The same, called through `handle` whatever it exports.
    pub(crate) fn without_batch(self) -> Self {
        Self {
            batch: None,
            ..self
        }
    }

    /// Whether the host wrapped the component with its adapter: `handle` is then called from inside the
    /// component, once per record of a batch.
    pub(crate) fn adapted(&self) -> bool {
        self.records.is_some()
    }

    /// The route of the host's adapter, when the host wrapped the component with it.
    pub(crate) fn adapter(&self) -> Option<AdapterRoute> {
        self.records.map(|(_, route)| route)
    }

    /// The form it is called in.
    pub(crate) fn form(&self) -> CallForm {
        match self.batch {
            Some(_) => CallForm::Batch,
            None => CallForm::Handle,
        }
    }

    /// The exports of `instance`, an instance of this component in `store`.
    pub(crate) fn exports(
        &self,
        mut store: impl AsContextMut<Data = HostState>,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        let handler = self.handler.load(&mut store, instance)?;
        let batch = match &self.batch {
            Some(batch) => Some(batch.load(&mut store, instance)?),
            None => None,
        };
        let records = match self.records {
            Some((index, _)) => Some(Records::load(&mut store, instance, index)?),
            None => None,
        };
        Ok(Exports {
            handler,
            batch,
            records,
        })
    }
}
