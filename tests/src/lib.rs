//! Shared helpers of RustStream's end-to-end tests: the compiled guest components, local
//! servers, hosts running against them, fault injection, hostile components, and waiting for
//! a condition.
//!
//! `build.rs` builds every crate of `guest-examples/` (what a tenant reads) and of
//! `tests/guests/` (components that exist only for tests) for `wasm32-wasip2` before the tests
//! compile, and writes one constant per component in [`guests`]:
//!
//! ```
//! use ruststream_tests::guests;
//!
//! let path = guests::SETTLEMENT.path();
//! assert!(path.ends_with("settlement.wasm"));
//! ```

#![forbid(unsafe_code)]

use std::path::PathBuf;

pub mod bench;
pub mod browser;
pub mod e2e;
pub mod faults;
pub mod fixture;
pub mod fleet;
pub mod hostile;
pub mod http;
pub mod imports;
pub mod neighbour;
pub mod process;
pub mod proxy;
pub mod reads;
pub mod scrape;
pub mod scratch;
pub mod servers;
pub mod skew;
pub mod toolchains;
pub mod versioned;
pub mod wait;

/// Directory holding the compiled guest components.
pub const GUEST_DIR: &str = env!("RUSTSTREAM_GUEST_DIR");

/// One compiled component of `guest-examples/` or `tests/guests/`; the constants of [`guests`]
/// name them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guest {
    name: &'static str,
}

impl Guest {
    const fn new(name: &'static str) -> Self {
        Self { name }
    }

    /// Its crate name in `guest-examples/` or `tests/guests/`.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Its compiled component file.
    pub fn path(self) -> PathBuf {
        PathBuf::from(GUEST_DIR).join(format!("{}.wasm", self.name.replace('-', "_")))
    }
}

impl std::fmt::Display for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every guest component, as built for this test run.
pub mod guests {
    use super::Guest;

    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// The `ruststream` binary cargo built beside the running test (`cargo test --workspace`
/// builds it for the CLI crate's own tests).
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
        "{} is missing: build it with `cargo build -p ruststream-cli`",
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
