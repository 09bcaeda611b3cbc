//! The batch and the outcome board as the adapters' code reads and writes them: the layouts of
//! the `batch` and `progress` interfaces in `wit/ruststream.wit`.

use wasm_encoder::{BlockType, InstructionSink, MemArg, ValType};

/// Bytes of one record's entry in the `records` buffer.
pub(super) const RECORD_ENTRY: i32 = 44;
/// Bytes of one header's entry in the `headers` buffer, and of one `header` in the canonical
/// ABI's layout (two pointer-length pairs).
pub(super) const HEADER_ENTRY: i32 = 16;

/// An access to memory 0 at `offset`, aligned to 2^`align` bytes.
pub(super) fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

/// Pushes the board slot (an i64) of the `handler-outcome` at the address `outcome` pushes:
/// 1 `ack`, 2 `drop`, 3 `retry`, 4 + ms `retry-after(ms)`, saturated.
pub(super) fn push_slot(i: &mut InstructionSink<'_>, outcome: impl Fn(&mut InstructionSink<'_>)) {
    outcome(i);
    i.i32_load8_u(mem(0, 0))
        .i32_const(3)
        .i32_eq()
        .if_(BlockType::Result(ValType::I64))
        .i64_const(-1);
    outcome(i);
    i.i64_load(mem(8, 3)).i64_const(4).i64_add();
    outcome(i);
    i.i64_load(mem(8, 3))
        .i64_const(-5)
        .i64_gt_u()
        .select()
        .else_();
    outcome(i);
    i.i64_load8_u(mem(0, 0)).i64_const(1).i64_add().end();
}
