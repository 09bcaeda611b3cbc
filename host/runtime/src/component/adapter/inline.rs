//! The adapter inside the component: a core module the host appends to the component's own
//! top level, which calls the core function behind the component's `handle` directly, in the
//! component's own memory.
//!
//! Where the component lifts `handle` itself at its top level (wit-component's layout, which
//! every Rust, Python and JavaScript toolchain emits), the adapter needs no component
//! boundary of its own: its loop module is instantiated with the component's memory, its
//! `cabi_realloc`, the core function `handle` is lifted from and that lift's post-return, and
//! `ruststream-handle-records` is lifted from the loop. A record then costs what the
//! canonical ABI asks of a caller and no more: the component's `cabi_realloc` for each string
//! and list, a copy into it, the core call, the post-return. No string crosses a memory
//! boundary (which wasmtime makes a libcall into the host, validating it, per string).
//!
//! The batch itself (three byte lists and the call info) is lowered by the host into an arena
//! the loop keeps in the component's memory, reserved once through the component's
//! `cabi_realloc` and reused by every call. When a batch does not fit, an arena at least twice
//! as big is reserved; the old one is given up (a component exports no way to free a block, and
//! componentize-py's `realloc` takes no old block to grow), so what is given up stays under
//! the biggest arena, and counts against the tenant's memory as everything of its instance
//! does. The outcome board is kept and replaced the same way.
//!
//! The strings handed to `handle` are the host's, valid UTF-8, as the canonical ABI promises
//! a callee: the arena holds what the host lowered, and only the component itself can write
//! there between two records.

use wasm_encoder::{
    Alias, BlockType, CanonicalFunctionSection, CanonicalOption, CodeSection,
    ComponentAliasSection, ComponentExportKind, ComponentExportSection, ComponentImportSection,
    ComponentSectionId, ComponentTypeRef, ComponentTypeSection, ComponentValType, EntityType,
    ExportKind, ExportSection, Function, FunctionSection, GlobalSection, GlobalType, ImportSection,
    InstanceSection, InstructionSink, MemoryType, Module, ModuleArg, PrimitiveValType, RawSection,
    TypeSection, ValType,
};

use super::layout::{HEADER_ENTRY, RECORD_ENTRY, mem, push_slot};
use super::{ADAPTED_EXPORT, SHARE_IMPORT, append};

/// The smallest arena reserved, in bytes.
const MIN_ARENA: i32 = 64 << 10;
/// The longest copy made in the loop's own code rather than by `memory.copy`.
const SHORT_COPY: i32 = 64;

/// What the component's top level lifts `handle` from, and what the appended sections start
/// counting from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HandleLift {
    /// The core function lifted.
    pub core_func: u32,
    /// The lift's memory.
    pub memory: u32,
    /// The lift's `realloc`.
    pub realloc: u32,
    /// The lift's post-return, if it has one.
    pub post_return: Option<u32>,
}

/// How many items each index space of the top level holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    pub types: u32,
    pub funcs: u32,
    pub instances: u32,
    pub components: u32,
    pub core_funcs: u32,
    pub core_instances: u32,
    pub core_modules: u32,
}

/// `component` with the loop appended to its top level, exporting [`ADAPTED_EXPORT`] and
/// importing [`SHARE_IMPORT`].
pub(super) fn append_to(component: &[u8], lift: HandleLift, totals: Totals) -> Vec<u8> {
    let mut out = component.to_vec();

    let mut types = ComponentTypeSection::new();
    types.defined_type().list(PrimitiveValType::U64);
    let slots = totals.types;
    types
        .function()
        .params([("board", ComponentValType::Type(slots))])
        .result(None);
    let share_ty = slots + 1;
    types.defined_type().list(PrimitiveValType::U8);
    let bytes = slots + 2;
    let string = ComponentValType::Primitive(PrimitiveValType::String);
    types
        .function()
        .params([
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
    let records_ty = slots + 3;
    append(&mut out, &types);

    let mut imports = ComponentImportSection::new();
    imports.import(SHARE_IMPORT, ComponentTypeRef::Func(share_ty));
    append(&mut out, &imports);
    let share = totals.funcs;

    let mut canon = CanonicalFunctionSection::new();
    canon.lower(share, [CanonicalOption::Memory(lift.memory)]);
    append(&mut out, &canon);
    let share_core = totals.core_funcs;

    let module = loop_module(lift.post_return.is_some());
    append(
        &mut out,
        &RawSection {
            id: ComponentSectionId::CoreModule as u8,
            data: &module,
        },
    );
    let module = totals.core_modules;

    let mut env = vec![
        ("memory", ExportKind::Memory, lift.memory),
        ("realloc", ExportKind::Func, lift.realloc),
        ("handle", ExportKind::Func, lift.core_func),
        ("share", ExportKind::Func, share_core),
    ];
    if let Some(post) = lift.post_return {
        env.push(("post", ExportKind::Func, post));
    }
    let mut instances = InstanceSection::new();
    instances.export_items(env);
    instances.instantiate(
        module,
        [("env", ModuleArg::Instance(totals.core_instances))],
    );
    append(&mut out, &instances);
    let looped = totals.core_instances + 1;

    let mut aliases = ComponentAliasSection::new();
    for name in ["run", "arena-realloc"] {
        aliases.alias(Alias::CoreInstanceExport {
            instance: looped,
            kind: ExportKind::Func,
            name,
        });
    }
    append(&mut out, &aliases);
    let (run, arena_realloc) = (share_core + 1, share_core + 2);

    let mut canon = CanonicalFunctionSection::new();
    canon.lift(
        run,
        records_ty,
        [
            CanonicalOption::Memory(lift.memory),
            CanonicalOption::Realloc(arena_realloc),
            CanonicalOption::UTF8,
        ],
    );
    append(&mut out, &canon);
    let records = share + 1;

    let mut exports = ComponentExportSection::new();
    exports.export(ADAPTED_EXPORT, ComponentExportKind::Func, records, None);
    append(&mut out, &exports);
    out
}

/// The loop's imports, then its own functions.
const FN_HANDLE: u32 = 0;
const FN_SHARE: u32 = 1;
const FN_REALLOC: u32 = 2;
/// Only when the lift has a post-return; the module's own functions follow the imports.
const FN_POST: u32 = 3;

/// The loop's globals: the arena (its start, its size, how much of it is handed out) and the
/// board (its address, its size in bytes).
const ARENA: u32 = 0;
const ARENA_SIZE: u32 = 1;
const ARENA_TOP: u32 = 2;
const BOARD: u32 = 3;
const BOARD_SIZE: u32 = 4;

/// The core module of the loop: imports `env.memory` (the component's), `env.handle` (the
/// core function `handle` is lifted from), `env.share` (the lowered host function),
/// `env.realloc` (the component's) and `env.post` (the lift's post-return, if any); exports
/// `arena-realloc` (the host's lowering of a batch allocates from the arena) and `run`.
pub(super) fn loop_module(post_return: bool) -> Vec<u8> {
    use ValType::{I32, I64};
    let mut types = TypeSection::new();
    // 0: `handle`: the call info (5), the record (10); the outcome's address.
    let mut handle_params = vec![I32; 13];
    handle_params.extend([I64, I32]);
    types.ty().function(handle_params, [I32]);
    // 1: share: the board's address and its slots.
    types.ty().function([I32, I32], []);
    // 2: realloc.
    types.ty().function([I32; 4], [I32]);
    // 3: run: the subscription, two strings and three lists.
    types.ty().function([I32; 11], []);
    // 4: post-return: the outcome's address.
    types.ty().function([I32], []);

    let mut imports = ImportSection::new();
    imports.import(
        "env",
        "memory",
        EntityType::Memory(MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        }),
    );
    imports.import("env", "handle", EntityType::Function(0));
    imports.import("env", "share", EntityType::Function(1));
    imports.import("env", "realloc", EntityType::Function(2));
    let imported = if post_return {
        imports.import("env", "post", EntityType::Function(4));
        4
    } else {
        3
    };
    let (arena_realloc, run_fn) = (imported, imported + 1);

    let mut functions = FunctionSection::new();
    functions.function(2);
    functions.function(3);

    let mut globals = GlobalSection::new();
    for _ in 0..5 {
        globals.global(
            GlobalType {
                val_type: I32,
                mutable: true,
                shared: false,
            },
            &wasm_encoder::ConstExpr::i32_const(0),
        );
    }

    let mut exports = ExportSection::new();
    exports.export("arena-realloc", ExportKind::Func, arena_realloc);
    exports.export("run", ExportKind::Func, run_fn);

    let mut code = CodeSection::new();
    code.function(&arena_realloc_body());
    code.function(&run_body(post_return.then_some(FN_POST)));

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

/// `arena-realloc(old, old_len, align, len)`: the next 8-aligned block of the arena. When
/// the arena cannot hold it, a fresh one at least twice its size is reserved through the
/// component's `realloc` (the blocks already handed out stay where they are). The host only
/// asks for fresh blocks; a reallocation copies.
fn arena_realloc_body() -> Function {
    const LEN: u32 = 3;
    const PTR: u32 = 4;
    const END: u32 = 5;
    const SIZE: u32 = 6;
    let mut f = Function::new([(3, ValType::I32)]);
    let mut i = f.instructions();
    // ptr = (top + 7) & -8; end = ptr + len
    i.global_get(ARENA_TOP)
        .i32_const(7)
        .i32_add()
        .i32_const(-8)
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
    i.local_get(END)
        .global_get(ARENA)
        .global_get(ARENA_SIZE)
        .i32_add()
        .i32_gt_u()
        .if_(BlockType::Empty);
    {
        // size = max(2 * size, 2 * (len + 8), MIN_ARENA): room for the blocks of the call
        // that follow this one (the batch's records and headers follow its arena).
        i.global_get(ARENA_SIZE)
            .i32_const(1)
            .i32_shl()
            .local_set(SIZE);
        i.local_get(LEN)
            .i32_const(8)
            .i32_add()
            .i32_const(1)
            .i32_shl()
            .local_tee(END)
            .local_get(SIZE)
            .local_get(END)
            .local_get(SIZE)
            .i32_gt_u()
            .select()
            .local_set(SIZE);
        i.i32_const(MIN_ARENA)
            .local_get(SIZE)
            .i32_const(MIN_ARENA)
            .local_get(SIZE)
            .i32_gt_u()
            .select()
            .local_set(SIZE);
        // A fresh block: the component's realloc need not take an old one (componentize-py's
        // refuses to), and blocks of this call may be in the old one.
        i.i32_const(0)
            .i32_const(0)
            .i32_const(8)
            .local_get(SIZE)
            .call(FN_REALLOC)
            .local_tee(PTR)
            .global_set(ARENA)
            .local_get(SIZE)
            .global_set(ARENA_SIZE);
        i.local_get(PTR).local_get(LEN).i32_add().local_set(END);
    }
    i.end();
    i.local_get(END).global_set(ARENA_TOP).local_get(PTR).end();
    f
}

/// Emits a copy of `len` bytes from `from` into a block of the component's own allocator,
/// whose address is left in `to`, as the canonical ABI lowers a string or a list into a
/// callee. `from` and `len` are locals of the function the code is emitted into, taken from the
/// operand stack (the address, then the length); `to` is set.
///
/// It is emitted in place, not called: a call into a function of the loop costs as much as a
/// short copy. A record's fields are mostly short, and `memory.copy` is a call out of the guest
/// into the runtime that costs more than copying a short field does; so up to [`SHORT_COPY`]
/// bytes are copied here without a loop (a loop's back edge checks the deadline): words from
/// the start and words from the end, which overlap when the length is not a multiple of the
/// word.
fn copy(i: &mut InstructionSink<'_>, (from, len, to): (u32, u32, u32), align: i32) {
    i.local_set(len).local_set(from);
    i.i32_const(0)
        .i32_const(0)
        .i32_const(align)
        .local_get(len)
        .call(FN_REALLOC)
        .local_set(to);
    // Copies `width` bytes `at` bytes from the start, or (`from_end`) `at` bytes before the end.
    let word = |i: &mut InstructionSink<'_>, width: u32, at: i32, from_end: bool| {
        for base in [to, from] {
            i.local_get(base);
            if from_end {
                i.local_get(len).i32_add().i32_const(at).i32_sub();
            } else if at != 0 {
                i.i32_const(at).i32_add();
            }
        }
        match width {
            8 => i.i64_load(mem(0, 0)).i64_store(mem(0, 0)),
            4 => i.i32_load(mem(0, 0)).i32_store(mem(0, 0)),
            _ => i.i32_load8_u(mem(0, 0)).i32_store8(mem(0, 0)),
        };
    };
    i.block(BlockType::Empty);
    i.local_get(len)
        .i32_const(SHORT_COPY)
        .i32_gt_u()
        .if_(BlockType::Empty);
    i.local_get(to)
        .local_get(from)
        .local_get(len)
        .memory_copy(0, 0)
        .br(1)
        .end();
    // Each case covers the lengths from its least up to twice its words: as many words from
    // the start as from the end.
    for (least, width, words) in [(SHORT_COPY / 2 + 1, 8, 4), (16, 8, 2), (8, 8, 1), (4, 4, 1)] {
        i.local_get(len)
            .i32_const(least)
            .i32_ge_u()
            .if_(BlockType::Empty);
        for n in 0..words {
            word(i, width, (n * width) as i32, false);
            word(i, width, ((n + 1) * width) as i32, true);
        }
        i.br(1).end();
    }
    // One to three bytes: the first, the last and the middle one.
    i.local_get(len).i32_eqz().br_if(0);
    word(i, 1, 0, false);
    word(i, 1, 1, true);
    for base in [to, from] {
        i.local_get(base)
            .local_get(len)
            .i32_const(1)
            .i32_shr_u()
            .i32_add();
    }
    i.i32_load8_u(mem(0, 0)).i32_store8(mem(0, 0));
    i.end();
}

/// `run(subscription, stream, shard-id, arena, records, headers)`: one `handle` call per
/// record, each outcome on the board before the next call; the arena is free again when it
/// returns.
fn run_body(post: Option<u32>) -> Function {
    const SUBSCRIPTION: u32 = 0;
    const STREAM: u32 = 1;
    const STREAM_LEN: u32 = 2;
    const SHARD: u32 = 3;
    const SHARD_LEN: u32 = 4;
    const ARENA_AT: u32 = 5;
    const RECORDS: u32 = 7;
    const RECORDS_LEN: u32 = 8;
    const HEADERS: u32 = 9;
    const INDEX: u32 = 11;
    const COUNT: u32 = 12;
    const ENTRY: u32 = 13;
    const LIST: u32 = 14;
    const HEADER: u32 = 15;
    const HEADER_COUNT: u32 = 16;
    const FROM: u32 = 17;
    const OUTCOME: u32 = 18;
    const NEED: u32 = 19;
    // The copy's locals: from, length, to.
    const COPY: (u32, u32, u32) = (20, 21, 22);
    let mut f = Function::new([(12, ValType::I32)]);
    let mut i = f.instructions();

    i.local_get(RECORDS_LEN)
        .i32_const(RECORD_ENTRY)
        .i32_div_u()
        .local_set(COUNT);
    // The board: a count, then a slot per record, kept from call to call and replaced by a
    // bigger one through the component's realloc when a batch needs more. Lent before the first record runs, so the host sees every
    // record the call gets through, trap or not.
    i.local_get(COUNT)
        .i32_const(1)
        .i32_add()
        .i32_const(8)
        .i32_mul()
        .local_tee(NEED)
        .global_get(BOARD_SIZE)
        .i32_gt_u()
        .if_(BlockType::Empty);
    // size = max(need, 2 * size), a fresh block (as for the arena).
    i.global_get(BOARD_SIZE)
        .i32_const(1)
        .i32_shl()
        .local_get(NEED)
        .global_get(BOARD_SIZE)
        .i32_const(1)
        .i32_shl()
        .local_get(NEED)
        .i32_gt_u()
        .select()
        .local_set(NEED);
    i.i32_const(0)
        .i32_const(0)
        .i32_const(8)
        .local_get(NEED)
        .call(FN_REALLOC)
        .global_set(BOARD)
        .local_get(NEED)
        .global_set(BOARD_SIZE)
        .end();
    i.global_get(BOARD).i64_const(0).i64_store(mem(0, 3));
    i.global_get(BOARD)
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

    // The record's headers, as a `list<header>` of the component's own: a block of
    // 16-byte entries, each name and value copied into blocks of their own.
    i.local_get(ENTRY)
        .i32_load(mem(28, 0))
        .local_set(HEADER_COUNT);
    i.i32_const(0)
        .i32_const(0)
        .i32_const(4)
        .local_get(HEADER_COUNT)
        .i32_const(HEADER_ENTRY)
        .i32_mul()
        .call(FN_REALLOC)
        .local_set(LIST);
    i.local_get(ENTRY)
        .i32_load(mem(24, 0))
        .i32_const(HEADER_ENTRY)
        .i32_mul()
        .local_get(HEADERS)
        .i32_add()
        .local_set(FROM);
    i.i32_const(0).local_set(HEADER);
    i.block(BlockType::Empty).loop_(BlockType::Empty);
    i.local_get(HEADER)
        .local_get(HEADER_COUNT)
        .i32_ge_u()
        .br_if(1);
    for field in [0u64, 8] {
        // to = list + header * 16 + field: (copy of the span, its length)
        i.local_get(LIST)
            .local_get(HEADER)
            .i32_const(HEADER_ENTRY)
            .i32_mul()
            .i32_add();
        i.local_get(FROM)
            .i32_load(mem(field, 0))
            .local_get(ARENA_AT)
            .i32_add()
            .local_get(FROM)
            .i32_load(mem(field + 4, 0));
        copy(&mut i, COPY, 1);
        i.local_get(COPY.2).i32_store(mem(field, 0));
        i.local_get(LIST)
            .local_get(HEADER)
            .i32_const(HEADER_ENTRY)
            .i32_mul()
            .i32_add()
            .local_get(FROM)
            .i32_load(mem(field + 4, 0))
            .i32_store(mem(field + 4, 0));
    }
    i.local_get(FROM)
        .i32_const(HEADER_ENTRY)
        .i32_add()
        .local_set(FROM);
    i.local_get(HEADER)
        .i32_const(1)
        .i32_add()
        .local_set(HEADER)
        .br(0)
        .end()
        .end();

    // The call info: the subscription, then the stream and shard id, each the component's
    // to keep (its `handle` frees what it is given).
    i.local_get(SUBSCRIPTION);
    for (at, len) in [(STREAM, STREAM_LEN), (SHARD, SHARD_LEN)] {
        i.local_get(at).local_get(len);
        copy(&mut i, COPY, 1);
        i.local_get(COPY.2).local_get(len);
    }
    // Data, partition key and sequence number: spans of the arena.
    for offset in [0u64, 8, 16] {
        i.local_get(ENTRY)
            .i32_load(mem(offset, 0))
            .local_get(ARENA_AT)
            .i32_add()
            .local_get(ENTRY)
            .i32_load(mem(offset + 4, 0));
        copy(&mut i, COPY, 1);
        i.local_get(COPY.2).local_get(COPY.1);
    }
    i.local_get(LIST).local_get(HEADER_COUNT);
    i.local_get(ENTRY)
        .i64_load(mem(32, 0))
        .local_get(ENTRY)
        .i32_load(mem(40, 0))
        .call(FN_HANDLE)
        .local_set(OUTCOME);

    // The outcome in the record's slot, 1 ack, 2 drop, 3 retry, 4 + ms retry-after
    // (saturated); a case past the variant's traps, as the canonical ABI's lift does.
    i.local_get(OUTCOME)
        .i32_load8_u(mem(0, 0))
        .i32_const(3)
        .i32_gt_u()
        .if_(BlockType::Empty)
        .unreachable()
        .end();
    i.global_get(BOARD)
        .local_get(INDEX)
        .i32_const(8)
        .i32_mul()
        .i32_add();
    push_slot(&mut i, |i| {
        i.local_get(OUTCOME);
    });
    i.i64_store(mem(8, 0));
    if let Some(post) = post {
        i.local_get(OUTCOME).call(post);
    }
    i.local_get(INDEX).i32_const(1).i32_add().local_set(INDEX);
    i.global_get(BOARD)
        .local_get(INDEX)
        .i64_extend_i32_u()
        .i64_store(mem(0, 3))
        .br(0)
        .end()
        .end();
    // The next call reuses the arena: the host reads only the board once this returns.
    i.global_get(ARENA).global_set(ARENA_TOP).end();
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{Caller, Engine, Instance, Linker, Memory, Store};

    #[test]
    fn the_loop_module_is_valid_with_and_without_a_post_return() {
        for post in [false, true] {
            wasmparser::Validator::new()
                .validate_all(&loop_module(post))
                .unwrap_or_else(|error| panic!("post-return {post}: {error}"));
        }
    }

    /// One `handle` call as the component's core function saw it.
    #[derive(Debug, PartialEq)]
    struct Seen {
        subscription: u32,
        stream: String,
        shard: String,
        data: Vec<u8>,
        key: String,
        sequence: String,
        headers: Vec<(String, Vec<u8>)>,
        arrival: u64,
        attempt: u32,
    }

    /// The component's side: its memory, a bump `cabi_realloc` that takes no old block (as
    /// componentize-py's), a `handle` that notes what it is given and returns the next
    /// outcome (case, payload), and a post-return that notes the address it is given.
    struct Component {
        memory: Option<Memory>,
        heap: u32,
        reallocs: Vec<u32>,
        blocks: Vec<(u32, u32)>,
        seen: Vec<Seen>,
        outcomes: Vec<(u8, u64)>,
        posts: Vec<u32>,
        boards: Vec<(u32, u32)>,
    }

    /// Where `handle` writes its outcome.
    const OUTCOME_AT: u32 = 8;
    /// Bytes left between the blocks of the component's `realloc`, holding [`UNTOUCHED`].
    const GAP: u32 = 8;
    /// What the component's memory holds where nothing was written.
    const UNTOUCHED: u8 = 0xaa;

    fn bytes(caller: &Caller<'_, Component>, at: u32, len: u32) -> Vec<u8> {
        let memory = caller.data().memory.expect("memory");
        memory.data(caller)[at as usize..(at + len) as usize].to_vec()
    }

    fn text(caller: &Caller<'_, Component>, at: u32, len: u32) -> String {
        String::from_utf8(bytes(caller, at, len)).expect("UTF-8")
    }

    fn u32_at(caller: &Caller<'_, Component>, at: u32) -> u32 {
        u32::from_le_bytes(bytes(caller, at, 4).try_into().expect("4 bytes"))
    }

    fn running(post_return: bool) -> (Store<Component>, Instance) {
        let engine = Engine::default();
        let mut store = Store::new(
            &engine,
            Component {
                memory: None,
                heap: 1 << 16,
                reallocs: Vec::new(),
                blocks: Vec::new(),
                seen: Vec::new(),
                outcomes: Vec::new(),
                posts: Vec::new(),
                boards: Vec::new(),
            },
        );
        let memory = Memory::new(&mut store, wasmtime::MemoryType::new(64, None)).expect("memory");
        memory.data_mut(&mut store).fill(UNTOUCHED);
        store.data_mut().memory = Some(memory);
        let mut linker = Linker::new(&engine);
        linker
            .define(&store, "env", "memory", memory)
            .expect("memory");
        linker
            .func_wrap(
                "env",
                "realloc",
                |mut caller: Caller<'_, Component>,
                 old: u32,
                 old_len: u32,
                 align: u32,
                 len: u32| {
                    assert_eq!((old, old_len), (0, 0), "an old block handed to realloc");
                    let state = caller.data_mut();
                    let at = state.heap.next_multiple_of(align.max(1));
                    state.heap = at + len + GAP;
                    state.reallocs.push(len);
                    state.blocks.push((at, len));
                    at
                },
            )
            .expect("realloc");
        linker
            .func_wrap(
                "env",
                "share",
                |mut caller: Caller<'_, Component>, at: u32, slots: u32| {
                    caller.data_mut().boards.push((at, slots));
                },
            )
            .expect("share");
        linker
            .func_wrap(
                "env",
                "handle",
                |mut caller: Caller<'_, Component>,
                 subscription: u32,
                 stream: u32,
                 stream_len: u32,
                 shard: u32,
                 shard_len: u32,
                 data: u32,
                 data_len: u32,
                 key: u32,
                 key_len: u32,
                 sequence: u32,
                 sequence_len: u32,
                 headers: u32,
                 header_count: u32,
                 arrival: u64,
                 attempt: u32|
                 -> u32 {
                    let headers = (0..header_count)
                        .map(|i| {
                            let entry = headers + i * 16;
                            let (name, name_len) =
                                (u32_at(&caller, entry), u32_at(&caller, entry + 4));
                            let (value, value_len) =
                                (u32_at(&caller, entry + 8), u32_at(&caller, entry + 12));
                            (
                                text(&caller, name, name_len),
                                bytes(&caller, value, value_len),
                            )
                        })
                        .collect();
                    let seen = Seen {
                        subscription,
                        stream: text(&caller, stream, stream_len),
                        shard: text(&caller, shard, shard_len),
                        data: bytes(&caller, data, data_len),
                        key: text(&caller, key, key_len),
                        sequence: text(&caller, sequence, sequence_len),
                        headers,
                        arrival,
                        attempt,
                    };
                    let (case, payload) = caller.data_mut().outcomes.remove(0);
                    caller.data_mut().seen.push(seen);
                    let memory = caller.data().memory.expect("memory");
                    let at = OUTCOME_AT as usize;
                    memory.data_mut(&mut caller)[at] = case;
                    memory.data_mut(&mut caller)[at + 8..at + 16]
                        .copy_from_slice(&payload.to_le_bytes());
                    OUTCOME_AT
                },
            )
            .expect("handle");
        if post_return {
            linker
                .func_wrap(
                    "env",
                    "post",
                    |mut caller: Caller<'_, Component>, at: u32| {
                        caller.data_mut().posts.push(at);
                    },
                )
                .expect("post");
        }
        let module = wasmtime::Module::new(&engine, loop_module(post_return)).expect("compiles");
        let instance = linker
            .instantiate(&mut store, &module)
            .expect("instantiates");
        (store, instance)
    }

    /// A record of the batch: data, key, sequence number, headers, arrival, attempt.
    type Record<'a> = (
        &'a [u8],
        &'a str,
        &'a str,
        &'a [(&'a str, &'a [u8])],
        u64,
        u32,
    );

    /// Lowers a batch as wasmtime does (each buffer from `arena-realloc`), then runs it.
    fn run(
        store: &mut Store<Component>,
        instance: &Instance,
        records: &[Record<'_>],
    ) -> wasmtime::Result<()> {
        let mut arena = Vec::new();
        let mut entries = Vec::new();
        let mut headers = Vec::new();
        let span = |arena: &mut Vec<u8>, bytes: &[u8]| {
            let at = u32::try_from(arena.len()).expect("small");
            arena.extend_from_slice(bytes);
            [at, u32::try_from(bytes.len()).expect("small")]
        };
        for &(data, key, sequence, record_headers, arrival, attempt) in records {
            let mut entry = Vec::new();
            for bytes in [data, key.as_bytes(), sequence.as_bytes()] {
                for word in span(&mut arena, bytes) {
                    entry.extend(word.to_le_bytes());
                }
            }
            let first = u32::try_from(headers.len() / 16).expect("small");
            for (name, value) in record_headers {
                for bytes in [name.as_bytes(), value] {
                    for word in span(&mut arena, bytes) {
                        headers.extend(word.to_le_bytes());
                    }
                }
            }
            entry.extend(first.to_le_bytes());
            entry.extend(
                u32::try_from(record_headers.len())
                    .expect("small")
                    .to_le_bytes(),
            );
            entry.extend(arrival.to_le_bytes());
            entry.extend(attempt.to_le_bytes());
            entries.extend(entry);
        }
        let realloc =
            instance.get_typed_func::<(u32, u32, u32, u32), u32>(&mut *store, "arena-realloc")?;
        let memory = store.data().memory.expect("memory");
        let lower = |store: &mut Store<Component>, bytes: &[u8]| -> wasmtime::Result<(u32, u32)> {
            let len = u32::try_from(bytes.len()).expect("small");
            let at = realloc.call(&mut *store, (0, 0, 1, len))?;
            memory.write(&mut *store, at as usize, bytes)?;
            Ok((at, len))
        };
        let stream = lower(store, b"orders")?;
        let shard = lower(store, b"shardId-000000000007")?;
        let arena = lower(store, &arena)?;
        let entries = lower(store, &entries)?;
        let headers = lower(store, &headers)?;
        let run = instance
            .get_typed_func::<(u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32), ()>(
                &mut *store,
                "run",
            )?;
        run.call(
            store,
            (
                2, stream.0, stream.1, shard.0, shard.1, arena.0, arena.1, entries.0, entries.1,
                headers.0, headers.1,
            ),
        )
    }

    /// The board lent in the last call: the count, then the slots it covers.
    fn board(store: &Store<Component>) -> Vec<u64> {
        let (at, slots) = *store.data().boards.last().expect("a board was lent");
        let memory = store.data().memory.expect("memory");
        let data = &memory.data(store)[at as usize..(at + slots * 8) as usize];
        let words: Vec<u64> = data
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let count = usize::try_from(words[0]).expect("small");
        words[..=count].to_vec()
    }

    #[test]
    fn each_record_reaches_handle_whole_and_its_outcome_is_on_the_board() -> wasmtime::Result<()> {
        for post_return in [false, true] {
            let (mut store, instance) = running(post_return);
            store.data_mut().outcomes = vec![(0, 0), (3, u64::MAX - 1), (1, 0), (3, 250)];
            let records: [Record<'_>; 4] = [
                (b"{\"id\":1}", "k1", "495", &[], 1_700, 1),
                (
                    b"",
                    "",
                    "496",
                    &[("x-trace", b"a1"), ("x-empty", b"")],
                    1_701,
                    3,
                ),
                (&[0xff, 0], "zo\u{eb}", "497", &[], 1_702, 1),
                (
                    b"last",
                    "k4",
                    "498",
                    &[("x-lang", "\u{3b5}".as_bytes())],
                    1_703,
                    2,
                ),
            ];
            run(&mut store, &instance, &records)?;
            // ack 1, retry-after(ms) 4 + ms saturated, drop 2, retry-after(250) 254.
            assert_eq!(board(&store), [4, 1, u64::MAX, 2, 254]);
            let seen = &store.data().seen;
            assert_eq!(seen.len(), 4);
            for (seen, record) in seen.iter().zip(&records) {
                let headers: Vec<_> = record
                    .3
                    .iter()
                    .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
                    .collect();
                let expected = Seen {
                    subscription: 2,
                    stream: "orders".into(),
                    shard: "shardId-000000000007".into(),
                    data: record.0.to_vec(),
                    key: record.1.into(),
                    sequence: record.2.into(),
                    headers,
                    arrival: record.4,
                    attempt: record.5,
                };
                assert_eq!(*seen, expected);
            }
            let posts = &store.data().posts;
            assert_eq!(
                *posts,
                if post_return {
                    vec![OUTCOME_AT; 4]
                } else {
                    vec![]
                }
            );
        }
        Ok(())
    }

    #[test]
    fn fields_of_every_length_are_copied_whole_and_nothing_past_them_is_written()
    -> wasmtime::Result<()> {
        let (mut store, instance) = running(false);
        let lengths = 0..=(SHORT_COPY as usize * 2 + 3);
        let data: Vec<Vec<u8>> = lengths
            .clone()
            .map(|len| (0..len).map(|at| (at * 7 + len) as u8).collect())
            .collect();
        let keys: Vec<String> = lengths
            .clone()
            .map(|len| ('a'..='z').cycle().skip(len).take(len).collect())
            .collect();
        let records: Vec<Record<'_>> = data
            .iter()
            .zip(&keys)
            .map(|(data, key)| (data.as_slice(), key.as_str(), "1", &[][..], 0, 1))
            .collect();
        store.data_mut().outcomes = vec![(0, 0); records.len()];
        run(&mut store, &instance, &records)?;
        let seen = &store.data().seen;
        assert_eq!(seen.len(), records.len());
        for ((seen, data), key) in seen.iter().zip(&data).zip(&keys) {
            assert_eq!(&seen.data, data, "{} bytes", data.len());
            assert_eq!(&seen.key, key, "{} bytes", key.len());
        }
        let memory = store.data().memory.expect("memory");
        let bytes = memory.data(&store);
        for &(at, len) in &store.data().blocks {
            let after = (at + len) as usize..(at + len + GAP) as usize;
            assert!(
                bytes[after.clone()].iter().all(|&b| b == UNTOUCHED),
                "written past a block of {len} bytes: {:?}",
                &bytes[after]
            );
        }
        Ok(())
    }

    #[test]
    fn a_case_past_the_outcome_variant_traps_after_the_records_before_it() -> wasmtime::Result<()> {
        let (mut store, instance) = running(true);
        store.data_mut().outcomes = vec![(1, 0), (4, 0), (0, 0)];
        let records: [Record<'_>; 3] = [(b"a", "k", "1", &[], 0, 1); 3];
        let error = run(&mut store, &instance, &records).expect_err("traps");
        assert_eq!(
            error.downcast_ref::<wasmtime::Trap>(),
            Some(&wasmtime::Trap::UnreachableCodeReached)
        );
        assert_eq!(board(&store), [1, 2]);
        assert_eq!(store.data().seen.len(), 2);
        Ok(())
    }

    #[test]
    fn the_arena_is_reused_by_each_call_and_replaced_by_a_bigger_one_when_a_batch_needs_more()
    -> wasmtime::Result<()> {
        let (mut store, instance) = running(false);
        let realloc =
            instance.get_typed_func::<(u32, u32, u32, u32), u32>(&mut store, "arena-realloc")?;
        let small: [Record<'_>; 1] = [(b"a", "k", "1", &[], 0, 1)];
        let reserved = |store: &Store<Component>| {
            store
                .data()
                .reallocs
                .iter()
                .filter(|&&len| len >= MIN_ARENA as u32)
                .count()
        };
        for _ in 0..3 {
            store.data_mut().outcomes = vec![(0, 0)];
            run(&mut store, &instance, &small)?;
        }
        assert_eq!(reserved(&store), 1, "one arena for three small calls");
        // The next call's blocks start where the last call's did: the arena is free again.
        let first = realloc.call(&mut store, (0, 0, 1, 10))?;
        let again = realloc.call(&mut store, (0, 0, 1, 10))?;
        assert_eq!(again, first + 16, "blocks are 8-aligned");

        let big = vec![7u8; 100 << 10];
        let records: Vec<Record<'_>> = (0..3)
            .map(|_| (big.as_slice(), "k", "1", &[][..], 0, 1))
            .collect();
        store.data_mut().outcomes = vec![(0, 0); 3];
        run(&mut store, &instance, &records)?;
        assert_eq!(board(&store), [3, 1, 1, 1]);
        assert!(
            store
                .data()
                .seen
                .iter()
                .skip(3)
                .all(|seen| seen.data == big)
        );
        // Blocks of the arena's size or more, but the copies `handle` is given.
        let arenas: Vec<u32> = store
            .data()
            .reallocs
            .iter()
            .copied()
            .filter(|&len| len >= MIN_ARENA as u32 && len != 100 << 10)
            .collect();
        // One more arena for the big batch: the first, too small, holds this call's strings.
        assert_eq!(arenas.len(), 2, "{arenas:?}");
        assert!(arenas[1] >= 2 * (300 << 10), "{arenas:?}");
        // The same batch again fits the arena it left.
        let before = store.data().reallocs.len();
        store.data_mut().outcomes = vec![(0, 0); 3];
        run(&mut store, &instance, &records)?;
        let reserved_again = store.data().reallocs[before..]
            .iter()
            .filter(|&&len| len >= MIN_ARENA as u32 && len != 100 << 10)
            .count();
        assert_eq!(reserved_again, 0);
        Ok(())
    }
}
