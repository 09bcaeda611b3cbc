//! The host's own batch adapter for `handle`: the records of a batch reach a component's
//! `handle` one call each, with one call from the host for the whole batch.
//!
//! `handle(info, record) -> handler-outcome` is the contract every component implements, and
//! the only one a Python or JavaScript component has. Called from the host, each record is a
//! crossing into wasm, and so is each of the six allocations (`cabi_realloc`) the canonical
//! ABI makes to lower the call's strings and lists (decision 54).
//!
//! So before compiling a component that exports `handler@1.0.0` and no `batch` interface
//! ([`wanted`]), the host adds a loop of its own to it, exported as
//! `ruststream-handle-records`: it takes a batch as `handle-batch` does (three byte lists),
//! lends the host an outcome board through the host function `ruststream-share-board`, as the
//! SDK's `handle-batch` does, and calls `handle` once per record, in order, writing each
//! outcome on the board before the next call. The host reads the board at every deadline
//! check and host call, so each record gets a fresh deadline and its log lines, output and
//! publishes are its own. The loop goes on one of two routes ([`AdapterRoute`]):
//!
//! - **inline** (`inline.rs`, decision 55), where the component lifts `handle` at its top
//!   level, as wit-component lays out every component it builds: a core module appended to
//!   that top level, in the component's own memory, calls the core function `handle` is
//!   lifted from, doing what the canonical ABI's caller does and no more;
//! - **beside** (`records.rs`), for any other layout: the wrapper declares the component's
//!   imports (a copy of its leading type, import and alias sections), nests the component
//!   unchanged, instantiated with them, and beside it a small component of the host's that
//!   calls its `handler` export across a component boundary (a sibling, not a child: the
//!   component model traps a call from a component instance into one of its ancestors).
//!
//! On either route nothing of the component's own sections changes. A component neither fits
//! ([`NotAdapted`]) is called from the host, one `handle` call per record.

mod inline;
mod layout;
mod records;

use sha2::{Digest as _, Sha256};
use wasm_encoder::{
    Alias, ComponentAliasSection, ComponentExportKind, ComponentExportSection,
    ComponentImportSection, ComponentInstanceSection, ComponentSection, ComponentSectionId,
    ComponentTypeRef, ComponentTypeSection, ComponentValType, PrimitiveValType, RawSection,
};
use wasmparser::{ComponentAlias, ComponentExternalKind, Parser, Payload};

use crate::limits::HandleAdapter;

/// The export the adapter adds: `handle-records(subscription, stream, shard-id, arena,
/// records, headers)`, the batch laid out as for `handle-batch`.
pub(crate) const ADAPTED_EXPORT: &str = "ruststream-handle-records";

/// The host function the adapter lends its outcome board to, once per call:
/// `(board: list<u64>)`, laid out as `progress.share-outcomes` describes.
pub(crate) const SHARE_IMPORT: &str = "ruststream-share-board";

/// Where the host's `handle` adapter goes in a component it wraps; which one is read from
/// the component's own layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterRoute {
    /// Into the component's top level, in its own memory: the adapter calls the core function
    /// `handle` is lifted from, as the canonical ABI's caller would. Where the component lifts
    /// `handle` at its top level, as wit-component lays out every component it builds.
    Inline,
    /// A component of the host's beside the component, calling its `handle` export across a
    /// component boundary (a copy of each string through the host): any other layout whose
    /// imports the wrapper can copy.
    Beside,
}

impl AdapterRoute {
    /// Memories the adapter adds to an instance: none inline (it uses the component's), its
    /// own beside it, which holds the batch.
    pub(crate) fn memories(self) -> usize {
        match self {
            Self::Inline => 0,
            Self::Beside => 1,
        }
    }

    /// Core instances the adapter adds to an instance: its loop module inline; beside it, its
    /// two modules and the module of the adapters wasmtime compiles for calls between the two
    /// components.
    pub(crate) fn core_instances(self) -> usize {
        match self {
            Self::Inline => 1,
            Self::Beside => 3,
        }
    }
}

/// The revision of the wrapper's layout: raise it when `adapt` changes what it writes around
/// a component (the adapter's own bytes are in [`revision`] already).
const WRAPPER_REVISION: &str = "2";

/// What a wrapped artifact is cached under beside the component's hash: the adapter's
/// revision, from its own bytes and the wrapper's layout, so an artifact wrapped by another
/// revision is never loaded.
pub(crate) fn revision() -> &'static str {
    static REVISION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REVISION.get_or_init(|| {
        let mut adapter = adapter_component().to_vec();
        for post_return in [false, true] {
            adapter.extend(inline::loop_module(post_return));
        }
        adapter.extend_from_slice(WRAPPER_REVISION.as_bytes());
        let digest = Sha256::digest(&adapter);
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("handle{hex}")
    })
}

/// The adapter component's bytes, made once.
fn adapter_component() -> &'static [u8] {
    static ADAPTER: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ADAPTER.get_or_init(records::component)
}

/// The adapter component's own export.
const RECORDS_EXPORT: &str = "handle-records";

/// The batch fast path's export, of any version.
const BATCH_EXPORT_PREFIX: &str = "ruststream:handler/batch@";

/// The contract export the adapter calls: the adapter is written against this version's types.
const HANDLER_EXPORT: &str = "ruststream:handler/handler@1.0.0";

/// Why a component is called from the host rather than through the adapter.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum NotAdapted {
    /// It exports no `handler@1.0.0` instance.
    #[error("it exports no {HANDLER_EXPORT} instance")]
    NoHandler,
    /// It imports or exports one of the adapter's names itself.
    #[error("it already uses the name {0}")]
    NameTaken(&'static str),
    /// Its top level is laid out in a way the wrapper does not copy (wit-component's is).
    #[error("its top level has {0}")]
    Unsupported(&'static str),
    /// Its sections could not be read (compiling it reports why).
    #[error("its sections cannot be read: {0}")]
    Unreadable(String),
}

/// Whether and how the host wraps `component` under `setting`: with
/// [`HandleAdapter::HandleOnly`], when it exports no `batch` interface (the host calls it
/// through `handle`); inline where its top level lifts `handle`, else beside it.
///
/// # Errors
/// When it would be wrapped but cannot be ([`NotAdapted`]); it is then called from the host.
pub(crate) fn wanted(
    component: &[u8],
    setting: HandleAdapter,
) -> Result<Option<AdapterRoute>, NotAdapted> {
    if setting == HandleAdapter::Off {
        return Ok(None);
    }
    let top = TopLevel::read(component)?;
    let batch = top
        .exports
        .iter()
        .any(|(name, ..)| name.starts_with(BATCH_EXPORT_PREFIX));
    if setting == HandleAdapter::HandleOnly && batch {
        return Ok(None);
    }
    top.route().map(Some)
}

/// `component` with the adapter on `route` (what [`wanted`] said), exporting what it exports
/// and [`ADAPTED_EXPORT`], importing what it imports and [`SHARE_IMPORT`].
///
/// # Errors
/// When the adapter cannot be added ([`NotAdapted`]); the component is then called from the
/// host.
pub(crate) fn adapt(component: &[u8], route: AdapterRoute) -> Result<Vec<u8>, NotAdapted> {
    let top = TopLevel::read(component)?;
    match route {
        AdapterRoute::Inline => {
            let lift = top.handle_lift().ok_or(NotAdapted::Unsupported(
                "no lift of handle at its top level",
            ))?;
            Ok(inline::append_to(component, lift, top.totals))
        }
        AdapterRoute::Beside => beside(component, top),
    }
}

/// `component` nested in a wrapper, with the adapter beside it.
///
/// The wrapper declares the component's imports by copying the sections that declare them
/// (its leading type, import and alias sections), so the component is instantiated with
/// exactly the imports it had. The adapter is a sibling, not a child, of the component: the
/// component model traps a call from a component instance into one of its ancestors.
///
/// # Errors
/// When the component's top level does not allow it ([`NotAdapted`]).
fn beside(component: &[u8], top: TopLevel) -> Result<Vec<u8>, NotAdapted> {
    let Nested {
        bytes: mut out,
        mut next,
        handler,
    } = nested(component, &top)?;
    let handler = handler.ok_or(NotAdapted::NoHandler)?;

    let mut types = ComponentTypeSection::new();
    types.defined_type().list(PrimitiveValType::U64);
    let slots = next.take(Space::Type);
    types
        .function()
        .params([("board", ComponentValType::Type(slots))])
        .result(None);
    let share_ty = next.take(Space::Type);
    append(&mut out, &types);
    let mut imports = ComponentImportSection::new();
    imports.import(SHARE_IMPORT, ComponentTypeRef::Func(share_ty));
    append(&mut out, &imports);
    let share = next.take(Space::Func);

    append(&mut out, &RawComponent(adapter_component()));
    let adapter_component = next.take(Space::Component);
    let mut instances = ComponentInstanceSection::new();
    instances.instantiate(
        adapter_component,
        [
            ("handler", ComponentExportKind::Instance, handler),
            ("share", ComponentExportKind::Func, share),
        ],
    );
    append(&mut out, &instances);
    let adapter = next.take(Space::Instance);

    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::InstanceExport {
        instance: adapter,
        kind: ComponentExportKind::Func,
        name: RECORDS_EXPORT,
    });
    append(&mut out, &aliases);
    let records = next.take(Space::Func);
    let mut exports = ComponentExportSection::new();
    exports.export(ADAPTED_EXPORT, ComponentExportKind::Func, records, None);
    append(&mut out, &exports);
    Ok(out)
}

/// `component` nested, byte for byte, in a component that declares its imports and
/// re-exports its exports: the layout a composition tool gives, where `handle` is lifted in a
/// child. The host's adapter then goes [beside](AdapterRoute::Beside) it.
///
/// # Errors
/// When its top level cannot be copied ([`NotAdapted`]).
#[cfg(feature = "testing")]
pub(crate) fn nest(component: &[u8]) -> Result<Vec<u8>, NotAdapted> {
    let top = TopLevel::read(component)?;
    nested(component, &top).map(|nested| nested.bytes)
}

/// A component nested in a wrapper of its own.
struct Nested {
    bytes: Vec<u8>,
    /// The wrapper's index spaces so far.
    next: Counts,
    /// The wrapper's `handler` instance, if the component exports it.
    handler: Option<u32>,
}

/// `component` nested in a wrapper that declares its imports (a copy of its leading type,
/// import and alias sections) and re-exports its exports.
fn nested(component: &[u8], top: &TopLevel) -> Result<Nested, NotAdapted> {
    if let Some(why) = top.not_beside {
        return Err(NotAdapted::Unsupported(why));
    }
    let header =
        (component.get(..8)).ok_or_else(|| NotAdapted::Unreadable("no component header".into()))?;
    let mut out = header.to_vec();
    for &(id, ref range) in &top.declarations {
        append(
            &mut out,
            &RawSection {
                id,
                data: &component[range.clone()],
            },
        );
    }
    let mut next = top.declared;

    append(&mut out, &RawComponent(component));
    let tenant_component = next.take(Space::Component);
    let mut instances = ComponentInstanceSection::new();
    instances.instantiate(
        tenant_component,
        top.imports
            .iter()
            .map(|(name, kind, index)| (name.as_str(), *kind, *index)),
    );
    append(&mut out, &instances);
    let tenant = next.take(Space::Instance);

    // Its exports, as its own.
    let mut aliases = ComponentAliasSection::new();
    let mut exports = ComponentExportSection::new();
    let mut handler = None;
    for (name, kind, _) in &top.exports {
        aliases.alias(Alias::InstanceExport {
            instance: tenant,
            kind: *kind,
            name,
        });
        let index = next.take(Space::of(*kind));
        if name == HANDLER_EXPORT {
            handler = Some(index);
        }
        exports.export(name, *kind, index, None);
    }
    append(&mut out, &aliases);
    append(&mut out, &exports);
    for (_, kind, _) in &top.exports {
        next.take(Space::of(*kind));
    }
    Ok(Nested {
        bytes: out,
        next,
        handler,
    })
}

/// The index spaces of a component the wrapper adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Type,
    Func,
    Instance,
    Component,
    /// Core modules and values, which the wrapper never refers to.
    Other,
}

impl Space {
    fn of(kind: ComponentExportKind) -> Self {
        match kind {
            ComponentExportKind::Type => Self::Type,
            ComponentExportKind::Func => Self::Func,
            ComponentExportKind::Instance => Self::Instance,
            ComponentExportKind::Component => Self::Component,
            ComponentExportKind::Module | ComponentExportKind::Value => Self::Other,
        }
    }
}

fn export_kind(kind: ComponentExternalKind) -> ComponentExportKind {
    match kind {
        ComponentExternalKind::Module => ComponentExportKind::Module,
        ComponentExternalKind::Func => ComponentExportKind::Func,
        ComponentExternalKind::Value => ComponentExportKind::Value,
        ComponentExternalKind::Type => ComponentExportKind::Type,
        ComponentExternalKind::Instance => ComponentExportKind::Instance,
        ComponentExternalKind::Component => ComponentExportKind::Component,
    }
}

/// How many items each index space holds so far.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    types: u32,
    funcs: u32,
    instances: u32,
    components: u32,
}

impl Counts {
    /// The index the next item of `space` gets, which it then takes.
    fn take(&mut self, space: Space) -> u32 {
        let count = match space {
            Space::Type => &mut self.types,
            Space::Func => &mut self.funcs,
            Space::Instance => &mut self.instances,
            Space::Component => &mut self.components,
            Space::Other => return 0,
        };
        *count += 1;
        *count - 1
    }
}

/// What the wrapper needs of a component's top level.
#[derive(Debug, Default)]
struct TopLevel {
    /// The leading sections that declare its imports (types, imports, aliases of imports'
    /// exports): their ids and contents.
    declarations: Vec<(u8, std::ops::Range<usize>)>,
    /// What those declare.
    declared: Counts,
    /// Its imports: name, kind, index in the declarations' index spaces.
    imports: Vec<(String, ComponentExportKind, u32)>,
    /// Its exports: name, kind, index.
    exports: Vec<(String, ComponentExportKind, u32)>,
    /// Why the wrapper of the beside route cannot copy its declarations, if it cannot.
    not_beside: Option<&'static str>,
    /// Every item of its index spaces, which the inline route appends to.
    totals: inline::Totals,
    /// Its functions made by `canon lift`: function index, core function, options.
    lifts: Vec<(u32, u32, Box<[wasmparser::CanonicalOption]>)>,
    /// Its component instances: index, and each named item it is instantiated with or made
    /// of (name, function index), functions only.
    instances: Vec<(u32, Vec<(String, u32)>)>,
}

impl TopLevel {
    fn read(component: &[u8]) -> Result<Self, NotAdapted> {
        let unreadable =
            |error: wasmparser::BinaryReaderError| NotAdapted::Unreadable(error.to_string());
        let mut top = Self::default();
        let mut depth = 0usize;
        // Whether the leading declarations are still being read.
        let mut declaring = true;
        for payload in Parser::new(0).parse_all(component) {
            let payload = payload.map_err(unreadable)?;
            match payload {
                Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => {
                    if depth == 0 {
                        declaring = false;
                        match payload {
                            Payload::ModuleSection { .. } => top.totals.core_modules += 1,
                            _ => {
                                top.take(Space::Component);
                            }
                        }
                    }
                    depth += 1;
                    continue;
                }
                Payload::End(_) => {
                    depth = depth.saturating_sub(1);
                    continue;
                }
                _ if depth > 0 => continue,
                Payload::Version { .. } | Payload::CustomSection(_) => continue,
                _ => {}
            }
            match payload {
                Payload::ComponentTypeSection(reader) => {
                    top.totals.types += reader.count();
                    if declaring {
                        top.declared.types += reader.count();
                        top.declare(ComponentSectionId::Type, reader.range());
                    }
                }
                Payload::CoreTypeSection(reader) if declaring => {
                    top.declare(ComponentSectionId::CoreType, reader.range());
                }
                Payload::ComponentImportSection(reader) => {
                    if !declaring {
                        top.not_beside("an import after its definitions");
                    }
                    top.declare(ComponentSectionId::Import, reader.range());
                    for import in reader {
                        let import = import.map_err(unreadable)?;
                        if import.name.name == SHARE_IMPORT {
                            return Err(NotAdapted::NameTaken(SHARE_IMPORT));
                        }
                        let kind = match import.ty {
                            wasmparser::ComponentTypeRef::Func(_) => ComponentExportKind::Func,
                            wasmparser::ComponentTypeRef::Type(_) => ComponentExportKind::Type,
                            wasmparser::ComponentTypeRef::Instance(_) => {
                                ComponentExportKind::Instance
                            }
                            wasmparser::ComponentTypeRef::Component(_) => {
                                ComponentExportKind::Component
                            }
                            wasmparser::ComponentTypeRef::Module(_) => {
                                top.totals.core_modules += 1;
                                top.not_beside("a module or value import");
                                continue;
                            }
                            wasmparser::ComponentTypeRef::Value(_) => {
                                top.not_beside("a module or value import");
                                continue;
                            }
                        };
                        top.take(Space::of(kind));
                        let declared = top.declared.take(Space::of(kind));
                        top.imports
                            .push((import.name.name.to_owned(), kind, declared));
                    }
                }
                Payload::ComponentAliasSection(reader) => {
                    if declaring {
                        top.declare(ComponentSectionId::Alias, reader.range());
                    }
                    for alias in reader {
                        match alias.map_err(unreadable)? {
                            ComponentAlias::InstanceExport { kind, .. } => {
                                if kind == ComponentExternalKind::Module {
                                    top.totals.core_modules += 1;
                                }
                                let space = Space::of(export_kind(kind));
                                top.take(space);
                                if declaring {
                                    top.declared.take(space);
                                }
                            }
                            ComponentAlias::CoreInstanceExport { kind, .. } => {
                                if declaring {
                                    top.not_beside("an alias in its declarations");
                                }
                                match kind {
                                    wasmparser::ExternalKind::Func
                                    | wasmparser::ExternalKind::FuncExact => {
                                        top.totals.core_funcs += 1;
                                    }
                                    _ => {}
                                }
                            }
                            ComponentAlias::Outer { kind, .. } => {
                                if declaring {
                                    top.not_beside("an alias in its declarations");
                                }
                                match kind {
                                    wasmparser::ComponentOuterAliasKind::CoreModule => {
                                        top.totals.core_modules += 1;
                                    }
                                    wasmparser::ComponentOuterAliasKind::Type => {
                                        top.take(Space::Type);
                                    }
                                    wasmparser::ComponentOuterAliasKind::Component => {
                                        top.take(Space::Component);
                                    }
                                    wasmparser::ComponentOuterAliasKind::CoreType => {}
                                }
                            }
                        }
                    }
                }
                Payload::ComponentExportSection(reader) => {
                    declaring = false;
                    for export in reader {
                        let export = export.map_err(unreadable)?;
                        if export.name.name == ADAPTED_EXPORT {
                            return Err(NotAdapted::NameTaken(ADAPTED_EXPORT));
                        }
                        match export.kind {
                            ComponentExternalKind::Module => {
                                top.totals.core_modules += 1;
                                top.not_beside("a module or value export");
                            }
                            ComponentExternalKind::Value => {
                                top.not_beside("a module or value export");
                            }
                            kind => {
                                let kind = export_kind(kind);
                                top.exports
                                    .push((export.name.name.to_owned(), kind, export.index));
                                top.take(Space::of(kind));
                            }
                        }
                    }
                }
                Payload::ComponentCanonicalSection(reader) => {
                    declaring = false;
                    for function in reader {
                        match function.map_err(unreadable)? {
                            wasmparser::CanonicalFunction::Lift {
                                core_func_index,
                                options,
                                ..
                            } => {
                                let index = top.take(Space::Func);
                                top.lifts.push((index, core_func_index, options));
                            }
                            // Every other canonical function is a core function.
                            _ => top.totals.core_funcs += 1,
                        }
                    }
                }
                Payload::InstanceSection(reader) => {
                    declaring = false;
                    top.totals.core_instances += reader.count();
                }
                Payload::ComponentInstanceSection(reader) => {
                    declaring = false;
                    for instance in reader {
                        let funcs = match instance.map_err(unreadable)? {
                            wasmparser::ComponentInstance::Instantiate { args, .. } => args
                                .iter()
                                .filter(|arg| arg.kind == ComponentExternalKind::Func)
                                .map(|arg| (arg.name.to_owned(), arg.index))
                                .collect(),
                            wasmparser::ComponentInstance::FromExports(exports) => exports
                                .iter()
                                .filter(|export| export.kind == ComponentExternalKind::Func)
                                .map(|export| (export.name.name.to_owned(), export.index))
                                .collect(),
                        };
                        let index = top.take(Space::Instance);
                        top.instances.push((index, funcs));
                    }
                }
                _ => declaring = false,
            }
        }
        Ok(top)
    }

    /// Takes the next index of `space` in the whole top level.
    fn take(&mut self, space: Space) -> u32 {
        let count = match space {
            Space::Type => &mut self.totals.types,
            Space::Func => &mut self.totals.funcs,
            Space::Instance => &mut self.totals.instances,
            Space::Component => &mut self.totals.components,
            Space::Other => return 0,
        };
        *count += 1;
        *count - 1
    }

    fn declare(&mut self, id: ComponentSectionId, range: std::ops::Range<usize>) {
        self.declarations.push((id as u8, range));
    }

    fn not_beside(&mut self, why: &'static str) {
        self.not_beside.get_or_insert(why);
    }

    /// Where the adapter can go: inline if the top level lifts `handle`, else beside.
    fn route(&self) -> Result<AdapterRoute, NotAdapted> {
        if !self
            .exports
            .iter()
            .any(|(name, kind, _)| name == HANDLER_EXPORT && *kind == ComponentExportKind::Instance)
        {
            return Err(NotAdapted::NoHandler);
        }
        if self.handle_lift().is_some() {
            return Ok(AdapterRoute::Inline);
        }
        match self.not_beside {
            Some(why) => Err(NotAdapted::Unsupported(why)),
            None => Ok(AdapterRoute::Beside),
        }
    }

    /// The lift of the function the `handler` export names `handle`, if the top level makes
    /// it: the instance exported is made of it (`handle`) or instantiates wit-component's
    /// type-exporting shim with it (`import-func-handle`), and the function is lifted with a
    /// memory, a `realloc` and UTF-8 strings (and no more than a post-return).
    fn handle_lift(&self) -> Option<inline::HandleLift> {
        let (.., handler) = self.exports.iter().find(|(name, kind, _)| {
            name == HANDLER_EXPORT && *kind == ComponentExportKind::Instance
        })?;
        let (_, funcs) = self.instances.iter().find(|(index, _)| index == handler)?;
        let (_, handle) = funcs
            .iter()
            .find(|(name, _)| name == "handle" || name == "import-func-handle")?;
        let (_, core_func, options) = self.lifts.iter().find(|(index, ..)| index == handle)?;
        let mut lift = inline::HandleLift {
            core_func: *core_func,
            memory: u32::MAX,
            realloc: u32::MAX,
            post_return: None,
        };
        for option in options.iter() {
            match *option {
                wasmparser::CanonicalOption::UTF8 => {}
                wasmparser::CanonicalOption::Memory(memory) => lift.memory = memory,
                wasmparser::CanonicalOption::Realloc(realloc) => lift.realloc = realloc,
                wasmparser::CanonicalOption::PostReturn(post) => lift.post_return = Some(post),
                _ => return None,
            }
        }
        (lift.memory != u32::MAX && lift.realloc != u32::MAX).then_some(lift)
    }
}

fn append(out: &mut Vec<u8>, section: &impl ComponentSection) {
    out.push(section.id());
    section.encode(out);
}

/// A component's bytes as a nested component section.
struct RawComponent<'a>(&'a [u8]);

impl wasm_encoder::Encode for RawComponent<'_> {
    fn encode(&self, sink: &mut Vec<u8>) {
        self.0.encode(sink);
    }
}

impl ComponentSection for RawComponent<'_> {
    fn id(&self) -> u8 {
        ComponentSectionId::Component as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{Component, ComponentBuilder, InstanceType};

    /// A component importing an instance named `import` and exporting one named `export`,
    /// each of an empty instance type.
    fn component(import: &str, export: &str) -> Vec<u8> {
        let mut b = ComponentBuilder::default();
        let empty = b.type_instance(None, &InstanceType::new());
        let instance = b.import(import, ComponentTypeRef::Instance(empty));
        b.export(export, ComponentExportKind::Instance, instance, None);
        b.finish()
    }

    #[test]
    fn a_component_without_the_handler_export_is_left_alone() {
        assert_eq!(
            wanted(&Component::new().finish(), HandleAdapter::All),
            Err(NotAdapted::NoHandler)
        );
        let other = component("wasi:io/poll@0.2.6", "ruststream:handler/handler@2.0.0");
        assert_eq!(
            wanted(&other, HandleAdapter::All),
            Err(NotAdapted::NoHandler)
        );
    }

    #[test]
    fn a_component_using_the_adapters_names_is_left_alone() {
        let import = component(SHARE_IMPORT, HANDLER_EXPORT);
        assert_eq!(
            wanted(&import, HandleAdapter::All),
            Err(NotAdapted::NameTaken(SHARE_IMPORT))
        );
        let mut b = ComponentBuilder::default();
        let empty = b.type_instance(None, &InstanceType::new());
        let instance = b.import("wasi:io/poll@0.2.6", ComponentTypeRef::Instance(empty));
        let (ty, mut func) = b.type_function(None);
        func.params(Vec::<(&str, ComponentValType)>::new())
            .result(None);
        let f = b.import("f", ComponentTypeRef::Func(ty));
        b.export(
            HANDLER_EXPORT,
            ComponentExportKind::Instance,
            instance,
            None,
        );
        b.export(ADAPTED_EXPORT, ComponentExportKind::Func, f, None);
        assert_eq!(
            wanted(&b.finish(), HandleAdapter::All),
            Err(NotAdapted::NameTaken(ADAPTED_EXPORT))
        );
    }

    #[test]
    fn imports_after_definitions_are_not_copied() {
        let mut b = ComponentBuilder::default();
        let empty = b.type_instance(None, &InstanceType::new());
        let first = b.import("wasi:io/poll@0.2.6", ComponentTypeRef::Instance(empty));
        b.export(HANDLER_EXPORT, ComponentExportKind::Instance, first, None);
        b.import("wasi:io/error@0.2.6", ComponentTypeRef::Instance(empty));
        assert_eq!(
            wanted(&b.finish(), HandleAdapter::All),
            Err(NotAdapted::Unsupported("an import after its definitions"))
        );
    }

    #[test]
    fn the_adapter_component_is_valid() {
        let mut features = wasmparser::WasmFeatures::default();
        features.insert(wasmparser::WasmFeatures::COMPONENT_MODEL);
        wasmparser::Validator::new_with_features(features)
            .validate_all(&records::component())
            .expect("the adapter validates");
    }
}
