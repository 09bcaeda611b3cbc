//! The adapter component: `handle-records`, which takes a batch laid out as `handle-batch`
//! takes it and calls the tenant's `handle` once per record, inside the component.
//!
//! Made of two core modules: one that only owns the adapter's memory (the canonical lowering
//! of `handle` needs the memory before the module that calls it is instantiated), and the
//! loop itself. The loop lends the host a board (as the SDK's `handle-batch` does, through
//! `ruststream-share-board`), reads each record's entry, hands `handle` the record's spans as
//! pointers into the batch, and writes the outcome on the board before it calls `handle` for
//! the next record.

use wasm_encoder::{
    BlockType, CanonicalOption, CodeSection, ComponentBuilder, ComponentExportKind,
    ComponentTypeRef, ComponentValType, ConstExpr, EntityType, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, ImportSection, InstanceType, MemorySection,
    MemoryType, Module, ModuleArg, PrimitiveValType, TypeBounds, TypeSection, ValType,
};

use super::RECORDS_EXPORT;
use super::layout::{HEADER_ENTRY, RECORD_ENTRY, mem, push_slot};

/// Where `handle`'s result (the outcome variant) is written: 16 bytes, 8-aligned.
const RESULT_AREA: i32 = 16;
/// Where the adapter's allocations start; everything before is its own.
const HEAP_BASE: i32 = 64;

/// The loop module's functions: its imports, then its own.
const FN_HANDLE: u32 = 0;
const FN_SHARE: u32 = 1;
const FN_REALLOC: u32 = 2;

/// The adapter component's bytes. It imports the tenant's `handler` instance as `handler`
/// and the host's board function as `share`, and exports `handle-records`.
pub(super) fn component() -> Vec<u8> {
    let mut b = ComponentBuilder::default();
    let handler_ty = b.type_instance(None, &handler_type());
    let handler = b.import("handler", ComponentTypeRef::Instance(handler_ty));
    let (slots, ty) = b.type_defined(None);
    ty.list(PrimitiveValType::U64);
    let (share_ty, mut ty) = b.type_function(None);
    ty.params([("board", ComponentValType::Type(slots))])
        .result(None);
    let share = b.import("share", ComponentTypeRef::Func(share_ty));
    let handle = b.alias_export(handler, "handle", ComponentExportKind::Func);

    let mut memory_module = Module::new();
    let mut memories = MemorySection::new();
    memories.memory(memory_type());
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    memory_module.section(&memories).section(&exports);
    let memory_module = b.core_module(None, &memory_module);
    let memory_instance = b.core_instantiate(None, memory_module, Vec::<(&str, ModuleArg)>::new());
    let memory = b.core_alias_export(None, memory_instance, "memory", ExportKind::Memory);

    let handle_core = b.lower_func(
        None,
        handle,
        [CanonicalOption::Memory(memory), CanonicalOption::UTF8],
    );
    let share_core = b.lower_func(None, share, [CanonicalOption::Memory(memory)]);
    let env = b.core_instantiate_exports(
        None,
        [
            ("memory", ExportKind::Memory, memory),
            ("handle", ExportKind::Func, handle_core),
            ("share", ExportKind::Func, share_core),
        ],
    );
    let main = b.core_module_raw(None, &loop_module());
    let main = b.core_instantiate(None, main, [("env", ModuleArg::Instance(env))]);
    let realloc = b.core_alias_export(None, main, "realloc", ExportKind::Func);
    let run = b.core_alias_export(None, main, "run", ExportKind::Func);

    let (bytes, ty) = b.type_defined(None);
    ty.list(PrimitiveValType::U8);
    let string = ComponentValType::Primitive(PrimitiveValType::String);
    let (run_ty, mut ty) = b.type_function(None);
    ty.params([
        (
            "subscription",
            ComponentValType::Primitive(PrimitiveValType::U32),
        ),
        ("stream", string),
        ("shard-id", string),
        ("arena", ComponentValType::Type(bytes)),
        ("records", ComponentValType::Type(bytes)),
        ("headers", ComponentValType::Type(bytes)),
    ])
    .result(None);
    let records = b.lift_func(
        None,
        run,
        run_ty,
        [
            CanonicalOption::Memory(memory),
            CanonicalOption::Realloc(realloc),
            CanonicalOption::UTF8,
        ],
    );
    b.export(RECORDS_EXPORT, ComponentExportKind::Func, records, None);
    b.finish()
}

/// The part of the contract's `handler` instance the adapter uses: `handle` and the types it
/// names, as `ruststream:handler/handler@1.0.0` declares them.
fn handler_type() -> InstanceType {
    let mut it = InstanceType::new();
    let string = ComponentValType::Primitive(PrimitiveValType::String);
    let bytes = it.type_count();
    it.ty().defined_type().list(PrimitiveValType::U8);
    let header = exported(&mut it, "header", |ty| {
        ty.record([("name", string), ("value", ComponentValType::Type(bytes))]);
    });
    let call_info = exported(&mut it, "call-info", |ty| {
        ty.record([
            (
                "subscription",
                ComponentValType::Primitive(PrimitiveValType::U32),
            ),
            ("stream", string),
            ("shard-id", string),
        ]);
    });
    let headers = it.type_count();
    it.ty().defined_type().list(ComponentValType::Type(header));
    let record = exported(&mut it, "record", |ty| {
        ty.record([
            ("data", ComponentValType::Type(bytes)),
            ("partition-key", string),
            ("sequence-number", string),
            ("headers", ComponentValType::Type(headers)),
            (
                "arrival-ms",
                ComponentValType::Primitive(PrimitiveValType::U64),
            ),
            (
                "attempt",
                ComponentValType::Primitive(PrimitiveValType::U32),
            ),
        ]);
    });
    let outcome = exported(&mut it, "handler-outcome", |ty| {
        ty.variant([
            ("ack", None),
            ("drop", None),
            ("retry", None),
            (
                "retry-after",
                Some(ComponentValType::Primitive(PrimitiveValType::U64)),
            ),
        ]);
    });
    let handle = it.type_count();
    it.ty()
        .function()
        .params([
            ("info", ComponentValType::Type(call_info)),
            ("record", ComponentValType::Type(record)),
        ])
        .result(Some(ComponentValType::Type(outcome)));
    it.export("handle", ComponentTypeRef::Func(handle));
    it
}

/// Defines a type in `it` with `define`, exports it as `name` and returns the exported type's
/// index: a function of an instance type may only name exported types.
fn exported(
    it: &mut InstanceType,
    name: &str,
    define: impl FnOnce(wasm_encoder::ComponentDefinedTypeEncoder<'_>),
) -> u32 {
    let defined = it.type_count();
    define(it.ty().defined_type());
    let exported = it.type_count();
    it.export(name, ComponentTypeRef::Type(TypeBounds::Eq(defined)));
    exported
}

/// The adapter's memory: empty until the first call's batch arrives, so a component that
/// is loaded but never called holds none of it.
fn memory_type() -> MemoryType {
    MemoryType {
        minimum: 0,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    }
}

/// The core module of the loop: imports `env.memory`, `env.handle` (the lowered `handle`) and
/// `env.share`; exports `realloc` (a bump allocator reset when `run` returns) and `run`.
fn loop_module() -> Vec<u8> {
    use ValType::{I32, I64};
    let mut types = TypeSection::new();
    // 0: the lowered `handle`: the call info (5), the record (10), the result's address.
    let mut handle_params = vec![I32; 13];
    handle_params.extend([I64, I32, I32]);
    types.ty().function(handle_params, []);
    // 1: share: the board's address and its slots.
    types.ty().function([I32, I32], []);
    // 2: realloc.
    types.ty().function([I32; 4], [I32]);
    // 3: run: the subscription, two strings and three lists.
    types.ty().function([I32; 11], []);

    let mut imports = ImportSection::new();
    imports.import("env", "memory", EntityType::Memory(memory_type()));
    imports.import("env", "handle", EntityType::Function(0));
    imports.import("env", "share", EntityType::Function(1));

    let mut functions = FunctionSection::new();
    functions.function(2);
    functions.function(3);

    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(HEAP_BASE),
    );

    let mut exports = ExportSection::new();
    exports.export("realloc", ExportKind::Func, 2);
    exports.export("run", ExportKind::Func, 3);

    let mut code = CodeSection::new();
    code.function(&realloc());
    code.function(&run());

    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&globals)
        .section(&exports)
        .section(&code);
    module.finish()
}

/// `realloc(old, old_len, align, len)`: bumps the heap, growing the memory as needed (a trap
/// when it cannot grow). The host only ever asks for fresh blocks; a reallocation copies.
fn realloc() -> Function {
    const OLD: u32 = 0;
    const OLD_LEN: u32 = 1;
    const ALIGN: u32 = 2;
    const LEN: u32 = 3;
    const PTR: u32 = 4;
    const END: u32 = 5;
    let mut f = Function::new([(2, ValType::I32)]);
    let mut i = f.instructions();
    // Every block is 8-aligned, whatever was asked: the `headers` buffer arrives as a
    // `list<u8>` and is handed on as a `list<header>`, whose pointer must be 4-aligned.
    i.local_get(ALIGN)
        .i32_const(8)
        .local_get(ALIGN)
        .i32_const(8)
        .i32_gt_u()
        .select()
        .local_set(ALIGN);
    // ptr = (heap + align - 1) & -align
    i.global_get(0)
        .local_get(ALIGN)
        .i32_add()
        .i32_const(1)
        .i32_sub()
        .i32_const(0)
        .local_get(ALIGN)
        .i32_sub()
        .i32_and()
        .local_tee(PTR)
        .local_get(LEN)
        .i32_add()
        .local_tee(END);
    // A block that wraps the address space is never granted.
    i.local_get(PTR)
        .i32_lt_u()
        .if_(BlockType::Empty)
        .unreachable()
        .end();
    // Grow by the pages missing past the end of memory.
    i.local_get(END)
        .memory_size(0)
        .i32_const(16)
        .i32_shl()
        .i32_gt_u()
        .if_(BlockType::Empty)
        .local_get(END)
        .i32_const(0xffff)
        .i32_add()
        .i32_const(16)
        .i32_shr_u()
        .memory_size(0)
        .i32_sub()
        .memory_grow(0)
        .i32_const(-1)
        .i32_eq()
        .if_(BlockType::Empty)
        .unreachable()
        .end()
        .end();
    i.local_get(OLD)
        .if_(BlockType::Empty)
        .local_get(PTR)
        .local_get(OLD)
        .local_get(OLD_LEN)
        .local_get(LEN)
        .local_get(OLD_LEN)
        .local_get(LEN)
        .i32_lt_u()
        .select()
        .memory_copy(0, 0)
        .end();
    i.local_get(END).global_set(0).local_get(PTR).end();
    f
}

/// `run(subscription, stream, shard-id, arena, records, headers)`: one `handle` call per
/// record, each outcome on the board before the next call.
fn run() -> Function {
    const SUBSCRIPTION: u32 = 0;
    const STREAM: u32 = 1;
    const STREAM_LEN: u32 = 2;
    const SHARD: u32 = 3;
    const SHARD_LEN: u32 = 4;
    const ARENA: u32 = 5;
    const RECORDS: u32 = 7;
    const RECORDS_LEN: u32 = 8;
    const HEADERS: u32 = 9;
    const HEADERS_LEN: u32 = 10;
    const INDEX: u32 = 11;
    const COUNT: u32 = 12;
    const ENTRY: u32 = 13;
    const AT: u32 = 14;
    const BOARD: u32 = 15;
    let mut f = Function::new([(5, ValType::I32)]);
    let mut i = f.instructions();
    // The headers' spans are offsets into the arena: make them addresses, in place.
    i.local_get(HEADERS).local_set(AT);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(AT)
        .local_get(HEADERS)
        .local_get(HEADERS_LEN)
        .i32_add()
        .i32_ge_u()
        .br_if(1);
    for field in [0u64, 8] {
        i.local_get(AT)
            .local_get(AT)
            .i32_load(mem(field, 0))
            .local_get(ARENA)
            .i32_add()
            .i32_store(mem(field, 0));
    }
    i.local_get(AT)
        .i32_const(HEADER_ENTRY)
        .i32_add()
        .local_set(AT)
        .br(0)
        .end()
        .end();

    i.local_get(RECORDS_LEN)
        .i32_const(RECORD_ENTRY)
        .i32_div_u()
        .local_set(COUNT);
    // The board: a count, then a slot per record. Lent before the first record runs, so the
    // host sees every record the call gets through, trap or not.
    i.i32_const(0)
        .i32_const(0)
        .i32_const(8)
        .local_get(COUNT)
        .i32_const(1)
        .i32_add()
        .i32_const(8)
        .i32_mul()
        .call(FN_REALLOC)
        .local_tee(BOARD)
        .i64_const(0)
        .i64_store(mem(0, 3));
    i.local_get(BOARD)
        .local_get(COUNT)
        .i32_const(1)
        .i32_add()
        .call(FN_SHARE);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(INDEX).local_get(COUNT).i32_ge_u().br_if(1);
    i.local_get(RECORDS)
        .local_get(INDEX)
        .i32_const(RECORD_ENTRY)
        .i32_mul()
        .i32_add()
        .local_set(ENTRY);
    // The call info.
    for local in [SUBSCRIPTION, STREAM, STREAM_LEN, SHARD, SHARD_LEN] {
        i.local_get(local);
    }
    // Data, partition key and sequence number: spans of the arena.
    for offset in [0u64, 8, 16] {
        i.local_get(ENTRY)
            .i32_load(mem(offset, 0))
            .local_get(ARENA)
            .i32_add()
            .local_get(ENTRY)
            .i32_load(mem(offset + 4, 0));
    }
    // Headers: a span of entries of `headers`.
    i.local_get(ENTRY)
        .i32_load(mem(24, 0))
        .i32_const(HEADER_ENTRY)
        .i32_mul()
        .local_get(HEADERS)
        .i32_add()
        .local_get(ENTRY)
        .i32_load(mem(28, 0));
    i.local_get(ENTRY)
        .i64_load(mem(32, 0))
        .local_get(ENTRY)
        .i32_load(mem(40, 0))
        .i32_const(RESULT_AREA)
        .call(FN_HANDLE);
    // The outcome in the record's slot, 1 ack, 2 drop, 3 retry, 4 + ms retry-after
    // (saturated); then the count that covers it.
    i.local_get(BOARD)
        .local_get(INDEX)
        .i32_const(8)
        .i32_mul()
        .i32_add();
    push_slot(&mut i, |i| {
        i.i32_const(RESULT_AREA);
    });
    i.i64_store(mem(8, 3));
    i.local_get(INDEX).i32_const(1).i32_add().local_set(INDEX);
    i.local_get(BOARD)
        .local_get(INDEX)
        .i64_extend_i32_u()
        .i64_store(mem(0, 3))
        .br(0)
        .end()
        .end();
    // The next call may reuse everything: the host reads the board before it makes one.
    i.i32_const(HEAP_BASE).global_set(0).end();
    f
}
