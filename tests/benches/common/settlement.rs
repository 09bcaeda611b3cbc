//! The seed's settlement example in the three languages the benches compare it in: Rust
//! (`guest-examples/settlement`), Python (componentize-py) and JavaScript (ComponentizeJS).

use std::path::PathBuf;

use ruststream_tests::guests;
use ruststream_tests::toolchains::{SETTLEMENT_JS, SETTLEMENT_PYTHON};

/// Every language, Rust (the baseline) first.
pub(crate) const LANGUAGES: [&str; 3] = ["rust", "python", "javascript"];

/// The languages named among the bench's arguments (`-- python`), in the order named.
pub(crate) fn named() -> Vec<&'static str> {
    std::env::args()
        .skip(1)
        .filter_map(|arg| LANGUAGES.into_iter().find(|language| *language == arg))
        .collect()
}

/// The settlement component of `language`, built when it is missing.
///
/// # Errors
/// The Python or JavaScript toolchain cannot be installed, or its build failed.
pub(crate) fn component(language: &str) -> anyhow::Result<PathBuf> {
    match language {
        "python" => SETTLEMENT_PYTHON.build(),
        "javascript" => SETTLEMENT_JS.build(),
        _ => Ok(guests::SETTLEMENT.path()),
    }
}
