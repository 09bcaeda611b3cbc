//! Builds the guest components for `wasm32-wasip2`, as wasmtime's test-programs do, so
//! `cargo test` always runs against components built from this tree: the examples a tenant
//! reads (`guest-examples/`) and the components that exist only for tests (`tests/guests/`),
//! two cargo workspaces.
//!
//! Both build, one after the other, in one target dir of their own (`<target>/guests`): a
//! nested cargo on the outer build's target dir would wait on its lock forever.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// Names a rustup toolchain to build the guests with instead of the host's. The host can then
/// build on a toolchain that has no wasm target (a nightly, to measure a wasmtime that needs a
/// newer Rust: `tests/wasmtime-next/run`) while the guests stay byte for byte the same.
const GUEST_TOOLCHAIN: &str = "RUSTSTREAM_GUEST_TOOLCHAIN";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("tests/ lives in the repo root");
    for watched in ["guest-examples", "tests/guests", "guest-sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo:rerun-if-env-changed={GUEST_TOOLCHAIN}");

    require_target();
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    let mut guests = Vec::new();
    for workspace in WORKSPACES {
        build_guests(root, workspace, &target_dir);
        guests.extend(members(root, workspace).into_iter().map(|m| (workspace, m)));
    }
    let out = target_dir.join(TARGET).join("release");
    println!("cargo:rustc-env=RUSTSTREAM_GUEST_DIR={}", out.display());
    write_constants(&guests, &out);
}

/// The guest workspaces, relative to the repo root: the examples, then the test fixtures.
const WORKSPACES: [&str; 2] = ["guest-examples", "tests/guests"];

/// The crates of the guest workspace `workspace`, as its `Cargo.toml` lists them.
fn members(root: &Path, workspace: &str) -> Vec<String> {
    let path = root.join(workspace).join("Cargo.toml");
    let manifest = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", path.display()));
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("{} lists no members", path.display()));
    list.lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"').to_owned())
        .filter(|item| !item.is_empty())
        .collect()
}

/// One constant per guest component (`SETTLEMENT`, `HOSTILE_SPIN`, ...) in
/// `$OUT_DIR/guests.rs`, so a test naming a component that does not exist does not compile.
fn write_constants(members: &[(&str, String)], built: &Path) {
    let mut code = String::new();
    for (workspace, member) in members {
        let file = built.join(format!("{}.wasm", member.replace('-', "_")));
        assert!(
            file.exists(),
            "guest `{member}` was built, but {} is missing",
            file.display()
        );
        let constant = member.to_uppercase().replace('-', "_");
        code.push_str(&format!(
            "/// `{workspace}/{member}`.\npub const {constant}: Guest = Guest::new({member:?});\n"
        ));
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("guests.rs");
    std::fs::write(&out, code).expect("cannot write the guest constants");
}

/// Fails the build with the fix when the wasm target's standard library is not installed.
fn require_target() {
    let sysroot = guest_command("rustc", "RUSTC")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let installed = sysroot.is_some_and(|root| root.join("lib/rustlib").join(TARGET).exists());
    if !installed {
        let toolchain = env::var(GUEST_TOOLCHAIN)
            .map(|name| format!(" --toolchain {name}"))
            .unwrap_or_default();
        panic!(
            "\n\nThe guest components build for `{TARGET}`, whose standard library is not installed.\n\
             Install it with:\n\n    rustup target add {TARGET}{toolchain}\n\n"
        );
    }
}

/// `tool` (`cargo` or `rustc`) as the guests build with it: the host build's own (named by
/// `host_var`, as cargo sets it), or the one of the toolchain [`GUEST_TOOLCHAIN`] names.
fn guest_command(tool: &str, host_var: &str) -> Command {
    match env::var_os(GUEST_TOOLCHAIN) {
        Some(toolchain) => {
            let mut command = Command::new("rustup");
            command.arg("run").arg(toolchain).arg(tool);
            // What the host's toolchain set for its own build would override the choice.
            for var in [
                "RUSTUP_TOOLCHAIN",
                "RUSTC",
                "CARGO",
                "RUSTC_WRAPPER",
                "RUSTDOC",
            ] {
                command.env_remove(var);
            }
            command
        }
        None => Command::new(env::var_os(host_var).unwrap_or_else(|| tool.into())),
    }
}

/// Builds the guest workspace `workspace` into `target_dir`; the caller runs one at a time.
fn build_guests(root: &Path, workspace: &str, target_dir: &Path) {
    let status = guest_command("cargo", "CARGO")
        .args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(root.join(workspace).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        // Flags meant for the host build (coverage, sanitizers) must not reach the guests.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        // `cargo clippy` on the tests wraps rustc with clippy-driver (and -D warnings): the
        // guests are linted by their own workspaces, not rebuilt under it.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .status()
        .expect("cannot run cargo to build the guest components");
    if !status.success() {
        panic!("building the guest components in {workspace}/ failed (see the output above)");
    }
}
