//! Shared helpers of RustStream's end-to-end tests: where the compiled guest components are.
//!
//! `build.rs` builds every crate of `guest-examples/` for `wasm32-wasip2` before the tests
//! compile; [`component`] gives the path of one of them.
//!
//! ```
//! let path = ruststream_tests::component("settlement");
//! assert!(path.ends_with("settlement.wasm"));
//! ```

use std::path::PathBuf;

pub mod e2e;
pub mod servers;

/// Directory holding the compiled guest components.
pub const GUEST_DIR: &str = env!("RUSTSTREAM_GUEST_DIR");

/// The compiled component of guest example `name` (its crate name; `-` and `_` are the same).
pub fn component(name: &str) -> PathBuf {
    PathBuf::from(GUEST_DIR).join(format!("{}.wasm", name.replace('-', "_")))
}
