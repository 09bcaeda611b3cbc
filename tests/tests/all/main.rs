//! Every test of the tests crate, in one binary (as wasmtime's `tests/all`): each test binary
//! links wasmtime and both AWS SDKs, so one binary instead of eight saves most of the link time
//! and ~450 MB of disk. Each module is one area; run one with `cargo test --test all <module>::`.

mod binary;
mod chaos;
mod copies;
mod kinesis;
mod kinesis_copies;
mod limits;
mod resilience;
mod sandbox;
mod servers;
mod settlement;
