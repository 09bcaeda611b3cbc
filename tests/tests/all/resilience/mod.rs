//! No record lost, no shard stalled: correctness under slow handlers, expired iterators, long
//! waits, resharding, seeks, restarts, lease moves and stops. Each test failed on the code
//! before its fix (see docs/notes.md).

mod deadlines;
mod holds;
mod leases;
mod restarts;
mod stalls;
