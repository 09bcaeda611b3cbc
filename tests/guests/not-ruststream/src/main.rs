//! Malformed: a valid `wasm32-wasip2` component that is a `wasi:cli` command (it exports
//! `wasi:cli/run`), not a RustStream handler.
//!
//! The host must refuse to load it: it does not export `ruststream:handler/handler@0.5.0`.

fn main() {
    println!("hello");
}
