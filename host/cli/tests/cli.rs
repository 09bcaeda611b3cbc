//! The `ruststream` binary's handling of bad input. (Running components with it against real
//! servers is tested in `tests/tests/all/binary.rs`.)

use std::process::Command;

fn ruststream(args: &[&str]) -> (bool, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_ruststream"))
            .args(args)
            .env("RUST_LOG", "error"),
    )
}

/// Runs `command`: whether it succeeded, and what it printed on stdout and stderr.
fn outcome(command: &mut Command) -> (bool, String) {
    let out = command.output().expect("the command runs");
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

/// `ruststream check --config` of a tenants file holding `text`, in a folder of its own.
fn check_config(name: &str, text: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("ruststream-cfg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("tenants.toml");
    std::fs::write(&path, text).expect("write");
    ruststream(&["check", "--config", path.to_str().expect("utf-8 path")])
}

const TENANT: &str = "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\n";

/// The one `error:` line the binary printed last.
fn error_line(text: &str) -> &str {
    let line = text.lines().rfind(|l| l.starts_with("error:"));
    line.unwrap_or_else(|| panic!("no error line: {text}"))
}

#[test]
fn each_config_mistake_prints_its_whole_reason_on_one_line() {
    let cases = [
        (
            "unknown-key",
            format!("{TENANT}subscibe = [\"ledger\"]\n"),
            &[
                "line 4, column 1, `tenants[0].subscibe`: unknown field `subscibe`",
                "expected one of `name`, `components`, `subscribe`",
                "`subscriptions`; did you mean `subscribe`?",
            ][..],
        ),
        (
            "wrong-type",
            format!("{TENANT}subscribe = \"ledger\"\n"),
            &[
                "line 4, column 13, `tenants[0].subscribe`: invalid type: string \"ledger\", expected a sequence",
            ][..],
        ),
        (
            "bad-value",
            format!("{TENANT}subscribe = [\"l\"]\nstarting_position = \"horizon\"\n"),
            &[
                "`tenants[0].starting_position`: unknown variant `horizon`",
                "`trim_horizon`, `LATEST`, `latest`, `AT_TIMESTAMP`, `at_timestamp`",
            ][..],
        ),
    ];
    for (name, text, expected) in cases {
        let (ok, printed) = check_config(name, &text);
        assert!(!ok, "{name}: {printed}");
        let line = error_line(&printed);
        for part in expected {
            assert!(line.contains(part), "{name}: `{part}` not in {line}");
        }
        assert!(
            !line.contains("more lines") && !line.ends_with("..."),
            "{line}"
        );
    }
}

#[test]
fn lambda_s_spelling_of_a_start_position_is_accepted() {
    let text = format!("{TENANT}subscribe = [\"l\"]\nstarting_position = \"TRIM_HORIZON\"\n");
    let (ok, printed) = check_config("lambda", &text);
    // The file is accepted; only its (missing) component is refused.
    assert!(!ok);
    assert!(!printed.contains("starting_position"), "{printed}");
    assert!(printed.contains("1 of 1 components refused"), "{printed}");
}

#[test]
fn a_missing_component_is_named_as_the_tenants_file_writes_it() {
    let text = "[[tenants]]\nname = \"acme\"\nsubscribe = [\"l\"]\ncomponents = [\"ok.wasm\", \"../gone/missing.wasm\"]\n";
    let (ok, printed) = check_config("missing", text);
    assert!(!ok);
    let line = printed
        .lines()
        .find(|l| l.contains("missing.wasm"))
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(
        line.contains("tenant `acme`, config file ")
            && line.contains(
                "tenants.toml, line 4, `tenants[0].components[1]` = \"../gone/missing.wasm\":"
            ),
        "{line}"
    );
    assert!(line.contains("No such file"), "{line}");
    assert!(!line.contains("acme/"), "{line}");
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

/// The `target` directory this test binary was built in.
fn target_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_ruststream"))
        .ancestors()
        .nth(2)
        .expect("target/<profile>/ruststream")
        .to_owned()
}

/// `cargo <args>` in `dir`, building in `target`.
fn cargo(dir: &std::path::Path, target: &std::path::Path, args: &[&str]) -> (bool, String) {
    outcome(cargo_command(dir, target).args(args))
}

/// Cargo in `dir`, building in `target`: never this test's own target directory, whose lock
/// the outer `cargo test` holds, and without the outer build's flags.
fn cargo_command(dir: &std::path::Path, target: &std::path::Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    command
}

#[test]
fn a_new_tenant_crate_builds_its_component_and_passes_its_test() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("ruststream-tenant-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let krate = dir.join("ledger-book");
    let (ok, text) = ruststream(&[
        "new",
        "ledger-book",
        "--path",
        krate.to_str().expect("utf-8 path"),
        "--ruststream",
        repo.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "{text}");
    // Outside this workspace, with its own target directory (kept between runs, as a
    // tenant's would be).
    let target = target_dir().join("tenant-crate");
    let (ok, text) = cargo(&krate, &target, &["build-component"]);
    assert!(ok, "cargo build-component failed:\n{text}");
    let component = target.join("wasm32-wasip2/release/ledger_book.wasm");
    let (ok, text) = ruststream(&["check", component.to_str().expect("utf-8 path")]);
    assert!(ok && text.contains("ledger-book 0.1.0 (ledger)"), "{text}");
    let (ok, text) = tenant_test(&krate, &target);
    assert!(ok, "the tenant crate's test failed:\n{text}");
    assert!(
        text.contains(
            "entries_are_booked_an_empty_one_retired_and_a_refund_holds_the_checkpoint ... ok"
        ),
        "{text}"
    );
    // The test runs the binary: the crate's graph holds no runtime, so no wasmtime or
    // Cranelift is compiled for it.
    let lock = std::fs::read_to_string(krate.join("Cargo.lock")).expect("Cargo.lock");
    for engine in ["wasmtime", "cranelift-codegen", "ruststream-runtime"] {
        let entry = format!("name = \"{engine}\"");
        assert!(
            !lock.contains(&entry),
            "{engine} in the tenant crate's graph"
        );
    }
    // Warm (the target directory built once above), the whole test takes seconds.
    let started = std::time::Instant::now();
    let (ok, text) = tenant_test(&krate, &target);
    let warm = started.elapsed();
    assert!(ok, "{text}");
    assert!(
        warm < std::time::Duration::from_secs(60),
        "warm cargo test took {warm:?}"
    );
    std::fs::remove_dir_all(&dir).expect("temp dir removed");
}

/// `cargo test` in the tenant crate `krate`, running this build's binary.
fn tenant_test(krate: &std::path::Path, target: &std::path::Path) -> (bool, String) {
    outcome(
        cargo_command(krate, target)
            .args(["test", "--", "--nocapture"])
            .env("RUSTSTREAM_BIN", env!("CARGO_BIN_EXE_ruststream")),
    )
}
