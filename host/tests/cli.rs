//! The `ruststream` binary's handling of bad input. (Running components with it against real
//! servers is tested in `tests/tests/all/binary.rs`.)

use std::process::Command;

fn ruststream(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ruststream"))
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn check_reports_a_missing_component_by_path() {
    let (ok, text) = ruststream(&["check", "no/such/component.wasm"]);
    assert!(!ok);
    assert!(text.contains("no/such/component.wasm"), "{text}");
    assert!(text.contains("1 of 1 components refused"), "{text}");
}

#[test]
fn check_refuses_a_file_that_is_not_wasm() {
    let dir = std::env::temp_dir().join(format!("ruststream-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("notes.wasm");
    std::fs::write(&path, "just text").expect("write");
    let (ok, text) = ruststream(&["check", path.to_str().expect("utf-8 path")]);
    assert!(!ok);
    assert!(text.contains("not a WebAssembly file"), "{text}");
}

#[test]
fn a_bad_config_file_says_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("ruststream-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\nsubscrbe = [\"ledger\"]\n",
    )
    .expect("write");
    let (ok, text) = ruststream(&["run", "--config", path.to_str().expect("utf-8 path")]);
    assert!(!ok);
    assert!(
        text.contains("subscrbe") && text.contains("bad.toml"),
        "{text}"
    );
}

#[test]
fn run_needs_components_or_a_config() {
    let (ok, text) = ruststream(&["run"]);
    assert!(!ok);
    assert!(
        text.contains("--config") || text.contains("COMPONENTS"),
        "{text}"
    );
}
