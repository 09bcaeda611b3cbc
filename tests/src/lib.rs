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
pub mod faults;
pub mod hostile;
pub mod servers;

/// Directory holding the compiled guest components.
pub const GUEST_DIR: &str = env!("RUSTSTREAM_GUEST_DIR");

/// The compiled component of guest example `name` (its crate name; `-` and `_` are the same).
pub fn component(name: &str) -> PathBuf {
    PathBuf::from(GUEST_DIR).join(format!("{}.wasm", name.replace('-', "_")))
}

/// The `ruststream` binary cargo built beside the running test (`cargo test --workspace`
/// builds it for the host crate's own CLI tests).
///
/// # Panics
/// When it is missing, saying how to build it.
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let binary = dir.join("ruststream");
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p ruststream-host`",
        binary.display()
    );
    binary
}

/// Where the tests cache compiled components: `<target>/compile-cache`, next to the guests.
pub fn compile_cache_dir() -> PathBuf {
    let guests = PathBuf::from(GUEST_DIR);
    guests.ancestors().nth(3).map_or_else(
        || guests.join("compile-cache"),
        |target| target.join("compile-cache"),
    )
}
