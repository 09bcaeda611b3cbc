//! No record lost, no shard stalled: correctness under expired iterators, resharding, seeks,
//! restarts, lease moves and stops. Each test failed on the code before its fix (see
//! docs/testing.md); slow handlers and long waits are in `testapp::deadlines` and
//! `testapp::holds`.

mod balancing;
mod leases;
mod positions;
mod restarts;
mod stalls;
