//! Every test of the tests crate, in one binary (as wasmtime's `tests/all`): each test binary
//! links wasmtime and both AWS SDKs, so one binary instead of eight saves most of the link time
//! and ~450 MB of disk.
//!
//! - `testapp`: components under `TestApp`, no server;
//! - `call_paths`, `code_pages`: what a call allocates, and what a loaded component's code
//!   holds of the host's memory;
//! - `console`: the web console (`/ui`) in headless Chromium, driven through ChromeDriver;
//! - `dashboards`: the Grafana dashboard and the Prometheus alert rules (`deploy/grafana/`,
//!   `deploy/prometheus/`), checked by promtool and against a running host's scrape;
//! - `e2e`: the host and the binary against local Kinesis and DynamoDB servers;
//! - `embed`: the host embedded through `ruststream-fleet`, no binary;
//! - `kubernetes`: the Kubernetes manifests (`deploy/kubernetes/`), validated offline;
//! - `layout`: the shape of the workspace itself;
//! - `lease_contract`: every `LeaseStore` case against the memory store and dynalite;
//! - `shadow_run`: a shadow's instance against its tenant's memory budget, in process.
//!
//! Run one area with `cargo test --test all e2e::sandbox::`.

mod call_paths;
mod code_pages;
mod console;
mod dashboards;
mod docs;
mod e2e;
mod embed;
mod kubernetes;
mod layout;
mod lease_contract;
mod shadow_run;
mod testapp;
