//! Hostile components no Rust source can produce, generated as raw WebAssembly: compile bombs,
//! oversized modules, extra linear memories and tables, a start function that spins, the names
//! of the host's `handle` adapter claimed.
//!
//! The ones that need a valid handler (so the host gets as far as instantiating them) are a
//! real component, `settlement`, with core modules and instances appended: sections of a
//! component may come in any order, and instantiating the component instantiates every core
//! instance it defines, so what the appended module allocates or runs happens at load time.
//!
//! ```
//! let bomb = ruststream_tests::hostile::compile_bomb_cpu();
//! assert!(bomb.len() < 16 * 1024, "a few KB that take Cranelift minutes");
//! ```

use wasm_encoder::{
    Alias, BlockType, CodeSection, Component, ComponentAliasSection, ComponentExportKind,
    ComponentExportSection, ComponentImportSection, ComponentSection, ComponentTypeRef,
    ComponentTypeSection, ComponentValType, ExportKind, ExportSection, Function, FunctionSection,
    InstanceSection, Instruction, MemorySection, MemoryType, Module, StartSection, TableSection,
    TableType, TypeSection, ValType,
};
use wasmparser::{ComponentAlias, ComponentExternalKind, Parser, Payload};

/// A few KB that keep Cranelift busy for minutes: `loops` nested loops, each local of
/// `locals` incremented in the innermost one and a `br_table` back to every loop, so every
/// local needs a value at every loop header (locals × loops block parameters).
pub fn compile_bomb_cpu() -> Vec<u8> {
    component_of(&nested_loops(600, 600))
}

/// ~190 KB that make Cranelift allocate gigabytes: the same shape, wide (20 000 locals)
/// rather than deep.
pub fn compile_bomb_memory() -> Vec<u8> {
    component_of(&nested_loops(100, 20_000))
}

/// A component with one core module of `functions` empty functions.
pub fn many_functions(functions: u32) -> Vec<u8> {
    let empty = (0..functions).map(|_| {
        let mut body = Function::new([]);
        body.instruction(&Instruction::End);
        body
    });
    component_of(&module_of(empty, None))
}

/// A component with one function of `bytes` bytes of `nop`.
pub fn huge_function(bytes: usize) -> Vec<u8> {
    let mut body = Function::new([]);
    for _ in 0..bytes {
        body.instruction(&Instruction::Nop);
    }
    body.instruction(&Instruction::End);
    component_of(&module_of([body], None))
}

/// `base` with `count` more core instances, each with a linear memory of `pages` 64 KiB pages
/// allocated when the component is instantiated.
pub fn with_extra_memories(base: &[u8], count: u32, pages: u64) -> Vec<u8> {
    let mut module = Module::new();
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);
    append_instances(base, &module.finish(), count)
}

/// `base` with one more core instance holding a table of `elements` elements.
pub fn with_extra_table(base: &[u8], elements: u64) -> Vec<u8> {
    let mut module = Module::new();
    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: wasm_encoder::RefType::FUNCREF,
        minimum: elements,
        maximum: None,
        table64: false,
        shared: false,
    });
    module.section(&tables);
    append_instances(base, &module.finish(), 1)
}

/// `base` with one more core instance whose start function spins forever: guest code that
/// runs while the component is instantiated, before any export is called.
pub fn with_spinning_start(base: &[u8]) -> Vec<u8> {
    let mut body = Function::new([]);
    body.instruction(&Instruction::Loop(BlockType::Empty));
    body.instruction(&Instruction::Br(0));
    body.instruction(&Instruction::End);
    body.instruction(&Instruction::End);
    append_instances(base, &module_of([body], Some(0)), 1)
}

/// A core module of `functions`, all of type `() -> ()`, the one at `start` its start function.
fn module_of(functions: impl IntoIterator<Item = Function>, start: Option<u32>) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    module.section(&types);
    let mut declared = FunctionSection::new();
    let mut code = CodeSection::new();
    for body in functions {
        declared.function(0);
        code.function(&body);
    }
    module.section(&declared);
    if let Some(function_index) = start {
        module.section(&StartSection { function_index });
    }
    module.section(&code);
    module.finish()
}

fn nested_loops(loops: u32, locals: u32) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    module.section(&types);
    let mut declared = FunctionSection::new();
    declared.function(0);
    module.section(&declared);
    let mut exports = ExportSection::new();
    exports.export("bomb", ExportKind::Func, 0);
    module.section(&exports);
    let mut body = Function::new([(locals, ValType::I32)]);
    for _ in 0..loops {
        body.instruction(&Instruction::Loop(BlockType::Empty));
    }
    for local in 1..=locals {
        body.instruction(&Instruction::LocalGet(local));
        body.instruction(&Instruction::I32Const(1));
        body.instruction(&Instruction::I32Add);
        body.instruction(&Instruction::LocalSet(local));
    }
    body.instruction(&Instruction::LocalGet(0));
    body.instruction(&Instruction::BrTable((0..loops).collect(), 0));
    for _ in 0..loops {
        body.instruction(&Instruction::End);
    }
    body.instruction(&Instruction::LocalGet(0));
    body.instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&body);
    module.section(&code);
    module.finish()
}

/// A component holding `module` and nothing else: enough for the host to compile it.
fn component_of(module: &[u8]) -> Vec<u8> {
    let mut out = Component::new().finish();
    append_section(&mut out, &RawModule(module));
    out
}

/// `base` with `module` appended, instantiated `count` times (with no imports).
fn append_instances(base: &[u8], module: &[u8], count: u32) -> Vec<u8> {
    let index = top_level_modules(base);
    let mut out = base.to_vec();
    append_section(&mut out, &RawModule(module));
    let mut instances = InstanceSection::new();
    for _ in 0..count {
        instances.instantiate(index, Vec::<(&str, wasm_encoder::ModuleArg)>::new());
    }
    append_section(&mut out, &instances);
    out
}

fn append_section(out: &mut Vec<u8>, section: &impl ComponentSection) {
    out.push(section.id());
    section.encode(out);
}

/// A core module's bytes as a component's module section.
struct RawModule<'a>(&'a [u8]);

impl wasm_encoder::Encode for RawModule<'_> {
    fn encode(&self, sink: &mut Vec<u8>) {
        self.0.encode(sink);
    }
}

impl ComponentSection for RawModule<'_> {
    fn id(&self) -> u8 {
        wasm_encoder::ComponentSectionId::CoreModule as u8
    }
}

/// How many core modules `component` defines at its top level: the index the next one gets.
fn top_level_modules(component: &[u8]) -> u32 {
    let mut depth = 0usize;
    let mut modules = 0;
    for payload in Parser::new(0).parse_all(component).flatten() {
        match payload {
            Payload::ModuleSection { .. } => {
                if depth == 0 {
                    modules += 1;
                }
                depth += 1;
            }
            Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    modules
}

/// `base` also exporting, under `name`, the function `func` of its instance exported as
/// `instance`: a component claiming a name the host's adapter uses (`base` exports `instance`).
pub fn with_reexported_func(base: &[u8], instance: &str, func: &str, name: &str) -> Vec<u8> {
    let top = top_level(base);
    let exported = top
        .instance_exports
        .iter()
        .find(|(export, _)| export == instance)
        .map(|(_, index)| *index)
        .expect("base exports the instance");
    let mut out = base.to_vec();
    let mut aliases = ComponentAliasSection::new();
    aliases.alias(Alias::InstanceExport {
        instance: exported,
        kind: ComponentExportKind::Func,
        name: func,
    });
    append_section(&mut out, &aliases);
    let mut exports = ComponentExportSection::new();
    exports.export(name, ComponentExportKind::Func, top.funcs, None);
    append_section(&mut out, &exports);
    out
}

/// `base` also importing a function `name` of no parameters and no result, declared after its
/// definitions (as the binary format allows).
pub fn with_func_import(base: &[u8], name: &str) -> Vec<u8> {
    let top = top_level(base);
    let mut out = base.to_vec();
    let mut types = ComponentTypeSection::new();
    types
        .function()
        .params(Vec::<(&str, ComponentValType)>::new())
        .result(None);
    append_section(&mut out, &types);
    let mut imports = ComponentImportSection::new();
    imports.import(name, ComponentTypeRef::Func(top.types));
    append_section(&mut out, &imports);
    out
}

/// What the appenders above need of a component's top level: the sizes of its type, function
/// and instance index spaces, and the instances it exports (name, index).
#[derive(Default)]
struct TopLevel {
    types: u32,
    funcs: u32,
    instances: u32,
    instance_exports: Vec<(String, u32)>,
}

impl TopLevel {
    fn add(&mut self, kind: ComponentExternalKind) {
        match kind {
            ComponentExternalKind::Type => self.types += 1,
            ComponentExternalKind::Func => self.funcs += 1,
            ComponentExternalKind::Instance => self.instances += 1,
            _ => {}
        }
    }
}

fn top_level(component: &[u8]) -> TopLevel {
    let mut top = TopLevel::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component).flatten() {
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            Payload::ComponentTypeSection(reader) => top.types += reader.count(),
            Payload::ComponentInstanceSection(reader) => top.instances += reader.count(),
            Payload::ComponentImportSection(reader) => {
                for import in reader.into_iter().flatten() {
                    match import.ty {
                        wasmparser::ComponentTypeRef::Type(_) => top.types += 1,
                        wasmparser::ComponentTypeRef::Func(_) => top.funcs += 1,
                        wasmparser::ComponentTypeRef::Instance(_) => top.instances += 1,
                        _ => {}
                    }
                }
            }
            Payload::ComponentAliasSection(reader) => {
                for alias in reader.into_iter().flatten() {
                    match alias {
                        ComponentAlias::InstanceExport { kind, .. } => top.add(kind),
                        ComponentAlias::Outer {
                            kind: wasmparser::ComponentOuterAliasKind::Type,
                            ..
                        } => top.types += 1,
                        _ => {}
                    }
                }
            }
            Payload::ComponentCanonicalSection(reader) => {
                for function in reader.into_iter().flatten() {
                    if let wasmparser::CanonicalFunction::Lift { .. } = function {
                        top.funcs += 1;
                    }
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader.into_iter().flatten() {
                    if export.kind == ComponentExternalKind::Instance {
                        top.instance_exports
                            .push((export.name.name.to_owned(), top.instances));
                    }
                    top.add(export.kind);
                }
            }
            _ => {}
        }
    }
    top
}
