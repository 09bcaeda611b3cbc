//! The shape of the workspace: no import cycles between the modules of any crate; the layers
//! common ← runtime ← kinesis ← fleet ← tools ← cli, none depending on one above it; a
//! runtime whose public modules are its embedders' API, not the helpers every layer shares; a
//! serving host
//! (the fleet) that does not build the runtime's test harness; a binary that is argument
//! parsing, one file per verb and printing, with everything else in the libraries; no crate
//! reaching into another's hidden internals.

use std::path::{Path, PathBuf};

use ruststream_tests::imports::ImportGraph;

/// Every crate of the workspace, by source root.
const CRATES: &[&str] = &[
    "host/common/src",
    "host/runtime/src",
    "host/kinesis/src",
    "host/fleet/src",
    "host/tools/src",
    "host/cli/src",
    "guest-sdk/src",
    "guest-sdk/macros/src",
    "tests/src",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_owned()
}

#[test]
fn no_module_of_any_crate_is_on_an_import_cycle() -> std::io::Result<()> {
    let mut cycles = Vec::new();
    for src in CRATES {
        let graph = ImportGraph::of_crate(&workspace().join(src))?;
        assert!(graph.module_count() > 0, "{src}: no modules read");
        cycles.extend(graph.cycles().into_iter().map(|c| format!("{src}: {c}")));
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    Ok(())
}

/// Every `.rs` file under `dir`, build output (`target`) and hidden folders left out.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, files)?;
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
    Ok(())
}

#[test]
fn no_crate_reaches_into_a_hidden_internals_module() -> std::io::Result<()> {
    // What one crate needs of another is a documented part of a public module; a hidden
    // `internals` module would be an API nobody states the contract of. (The needles are
    // built so that this file does not match itself.)
    let path = format!("{}::", "internals");
    let module = format!("mod {}", "internals");
    let found = code_lines_naming(SOURCES, 100, &[&path, &module])?;
    assert!(found.is_empty(), "internals used:\n{}", found.join("\n"));
    Ok(())
}

/// Each line of code (comments left out) in the Rust files under `dirs` that contains one of
/// `needles`, as `file:line: code`. Fails if fewer than `at_least` files were read, so that a
/// check that read nothing cannot pass.
fn code_lines_naming(
    dirs: &[&str],
    at_least: usize,
    needles: &[&str],
) -> std::io::Result<Vec<String>> {
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(&workspace().join(dir), &mut files)?;
    }
    assert!(files.len() >= at_least, "{} files read", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        for (line, code) in text.lines().enumerate() {
            let code = code.trim();
            if !code.starts_with("//") && needles.iter().any(|needle| code.contains(needle)) {
                found.push(format!("{}:{}: {code}", file.display(), line + 1));
            }
        }
    }
    Ok(found)
}

/// Where every crate's sources are, for the checks of what code names.
const SOURCES: &[&str] = &["host", "guest-sdk", "tests"];

#[test]
fn the_runtime_s_root_re_exports_only_its_core_types() -> std::io::Result<()> {
    // Everything else lives in the module it belongs to (`component::compile::WORKER_COMMAND`,
    // `testing::ManualClock`, ...).
    let lib = std::fs::read_to_string(workspace().join("host/runtime/src/lib.rs"))?;
    let mut names = Vec::new();
    for statement in lib.split(';') {
        let Some((_, tree)) = statement.split_once("pub use ") else {
            continue;
        };
        let leaves = tree.rsplit_once("::{").map_or(tree, |(_, inner)| inner);
        for leaf in leaves.split(',') {
            let leaf = leaf.trim().trim_end_matches('}');
            names.push(leaf.rsplit("::").next().unwrap_or(leaf).to_owned());
        }
    }
    assert!(
        names.contains(&"Runtime".to_owned()),
        "root re-exports read: {names:?}"
    );
    assert!(names.len() <= 10, "the root re-exports {names:?}");
    assert!(
        !lib.contains("#[doc(hidden)]"),
        "the runtime's root hides an item"
    );
    Ok(())
}

/// The runtime's public modules: what an embedder builds on. A new one is a decision about
/// the runtime's API, made here and in `docs/architecture.md`.
const RUNTIME_API: &[&str] = &[
    "app",
    "component",
    "cpu",
    "dead_letter",
    "envelope",
    "log",
    "metrics",
    "outcome",
    "pipeline",
    "policy",
    "publish",
    "record",
    "rollout",
    "shadow",
    "tenant",
    "testing",
];

#[test]
fn the_runtime_s_public_modules_are_its_api_not_shared_helpers() -> std::io::Result<()> {
    let lib = std::fs::read_to_string(workspace().join("host/runtime/src/lib.rs"))?;
    let public: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|name| name.trim_end_matches(';'))
        .collect();
    assert_eq!(public, RUNTIME_API, "the runtime's public modules");
    // The lock, backoff and text display every layer uses are `ruststream-common`'s, beneath
    // the runtime, so no crate reaches them through the runtime.
    let common = std::fs::read_to_string(workspace().join("host/common/src/lib.rs"))?;
    let mut misplaced = Vec::new();
    for helper in common
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|name| name.trim_end_matches(';'))
    {
        assert!(!public.contains(&helper), "the runtime exposes `{helper}`");
        let path = format!("ruststream_runtime::{helper}::");
        misplaced.extend(code_lines_naming(SOURCES, 100, &[&path])?);
    }
    assert!(
        misplaced.is_empty(),
        "helpers reached through the runtime: {misplaced:?}"
    );
    Ok(())
}

#[test]
fn the_cycle_check_reads_the_runtime_s_imports() -> std::io::Result<()> {
    // A check that read nothing would find no cycle: make sure it sees the runtime's layers.
    let graph = ImportGraph::of_crate(&workspace().join("host/runtime/src"))?;
    assert!(
        graph.module_count() > 25,
        "{} modules",
        graph.module_count()
    );
    assert!(graph.edge_count() > 40, "{} edges", graph.edge_count());
    Ok(())
}

#[test]
fn the_guest_sdk_ships_the_contract_the_host_implements() -> std::io::Result<()> {
    // The SDK carries its own copy of the WIT so it can be packaged; `wit/` stays the
    // contract of record, and the two must never drift apart.
    let root = workspace();
    let contract = std::fs::read_to_string(root.join("wit/ruststream.wit"))?;
    let shipped = std::fs::read_to_string(root.join("guest-sdk/wit/ruststream.wit"))?;
    assert!(
        contract == shipped,
        "guest-sdk/wit/ruststream.wit differs from wit/ruststream.wit: copy the contract over"
    );
    Ok(())
}

/// Every package of `Cargo.lock` with the packages it depends on directly, whatever the
/// features.
fn lock_graph() -> std::io::Result<std::collections::BTreeMap<String, Vec<String>>> {
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock"))?;
    let mut graph = std::collections::BTreeMap::<String, Vec<String>>::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().trim_matches('"').to_owned())
        };
        let Some(name) = field("name = ") else {
            continue;
        };
        let deps = package
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or_default())
            .unwrap_or_default()
            .lines()
            // `"name"` or `"name version"` when several versions are locked.
            .filter_map(|l| {
                l.trim()
                    .trim_end_matches(',')
                    .trim_matches('"')
                    .split(' ')
                    .next()
            })
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        graph.entry(name).or_default().extend::<Vec<String>>(deps);
    }
    Ok(graph)
}

/// Every package `root` depends on, whatever the features, as `Cargo.lock` resolves them.
fn dependencies_of(root: &str) -> std::io::Result<std::collections::BTreeSet<String>> {
    let graph = lock_graph()?;
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![root.to_owned()];
    while let Some(next) = todo.pop() {
        for dep in graph.get(&next).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    Ok(seen)
}

#[test]
fn each_layer_depends_only_on_what_it_needs() -> std::io::Result<()> {
    let runtime = dependencies_of("ruststream-runtime")?;
    assert!(runtime.contains("wasmtime"), "the lock file was read");
    let aws: Vec<_> = runtime.iter().filter(|d| d.starts_with("aws-")).collect();
    assert!(aws.is_empty(), "the runtime pulls in {aws:?}");
    let common = dependencies_of("ruststream-common")?;
    assert!(common.contains("tokio"), "the lock file was read");
    let heavy: Vec<_> = common
        .iter()
        .filter(|d| d.starts_with("aws-") || d.starts_with("wasmtime"))
        .collect();
    assert!(heavy.is_empty(), "the shared helpers pull in {heavy:?}");
    let host = dependencies_of("ruststream-kinesis")?;
    assert!(host.contains("aws-sdk-kinesis"), "the lock file was read");
    for binary_only in ["clap", "toml", "tracing-subscriber", "aws-config"] {
        assert!(
            !host.contains(binary_only),
            "the host library pulls in {binary_only}"
        );
    }
    Ok(())
}

/// The crates of the host, lowest layer first: each may depend on those before it only.
const LAYERS: &[&str] = &[
    "ruststream-common",
    "ruststream-runtime",
    "ruststream-kinesis",
    "ruststream-fleet",
    "ruststream-tools",
    "ruststream-cli",
];

#[test]
fn no_layer_depends_on_one_above_it() -> std::io::Result<()> {
    for (i, layer) in LAYERS.iter().enumerate() {
        let deps = dependencies_of(layer)?;
        if let Some(below) = i.checked_sub(1) {
            assert!(
                deps.contains(LAYERS[below]),
                "{layer} does not depend on {}: is the lock file read?",
                LAYERS[below]
            );
        }
        for above in &LAYERS[i + 1..] {
            assert!(!deps.contains(*above), "{layer} depends on {above}");
        }
    }
    Ok(())
}

/// The `[dependencies]` table of a crate's manifest, as lines.
fn dependency_lines(manifest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside && !line.starts_with('#') {
            lines.push(line.to_owned());
        }
    }
    lines
}

#[test]
fn the_serving_host_does_not_build_the_runtime_s_test_harness() -> std::io::Result<()> {
    // `TestApp` is for `dev`, `test` and tenants' own tests: the tools' crate enables it, and
    // an embedder of the serving host compiles none of it.
    let root = workspace();
    for (krate, enables) in [("host/fleet", false), ("host/tools", true)] {
        let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml"))?;
        let runtime = dependency_lines(&manifest)
            .into_iter()
            .find(|l| l.starts_with("ruststream-runtime"))
            .unwrap_or_else(|| panic!("{krate} does not depend on ruststream-runtime"));
        assert_eq!(
            runtime.contains("\"testing\""),
            enables,
            "{krate}/Cargo.toml: {runtime}"
        );
    }
    // Feature unification would hide a use from the compiler in a workspace build: the
    // sources must not name the harness either.
    let (testing, harness) = (format!("{}::", "testing"), format!("Test{}", "App"));
    let found = code_lines_naming(&["host/fleet/src"], 50, &[&testing, &harness])?;
    assert!(
        found.is_empty(),
        "the fleet uses the test harness:\n{}",
        found.join("\n")
    );
    Ok(())
}

/// What only the library may use: the binary is argument parsing and printing.
fn is_a_service_crate(name: &str) -> bool {
    name.starts_with("aws-")
        || name.starts_with("wasmtime")
        || name.starts_with("hyper")
        || name.starts_with("metrics")
        || ["axum", "notify", "rustls", "tokio-rustls", "toml"].contains(&name)
}

/// Every crate the binary may depend on directly.
const BINARY_DEPENDENCIES: &[&str] = &[
    "ruststream-fleet",
    "ruststream-tools",
    "clap",
    "tokio",
    "anyhow",
    "thiserror",
    "serde_json",
    "tracing-subscriber",
];

#[test]
fn the_binary_depends_on_the_library_for_all_but_arguments_and_printing() -> std::io::Result<()> {
    let graph = lock_graph()?;
    let direct = graph
        .get("ruststream-cli")
        .expect("ruststream-cli is in the lock file");
    assert!(direct.iter().any(|d| d == "ruststream-fleet"), "{direct:?}");
    assert!(direct.iter().any(|d| d == "clap"), "{direct:?}");
    // The library and what a command line needs: arguments, an async main, errors at the
    // edge, JSON and the log subscriber printed to; no lower layer reached around the library.
    let beside_the_library: Vec<_> = direct
        .iter()
        .filter(|d| !BINARY_DEPENDENCIES.contains(&d.as_str()))
        .collect();
    assert!(
        beside_the_library.is_empty(),
        "the binary depends on {beside_the_library:?} directly: re-export what it needs from \
         ruststream-fleet or ruststream-tools"
    );
    // A setting is one type that clap and serde both read (the host's settings, the tools'
    // options), so the libraries may name clap, but only behind their `cli` feature: an
    // embedder builds no command-line parser.
    for library in ["host/fleet", "host/tools"] {
        let manifest = std::fs::read_to_string(workspace().join(library).join("Cargo.toml"))?;
        let clap = dependency_lines(&manifest)
            .into_iter()
            .find(|l| l.starts_with("clap"));
        assert!(
            clap.as_deref()
                .is_none_or(|line| line.contains("optional = true")),
            "{library} parses command lines unasked: {clap:?}"
        );
        assert!(
            manifest.contains("cli = [\"dep:clap\"]") || clap.is_none(),
            "clap is {library}'s only through its `cli` feature"
        );
    }
    let services: Vec<_> = direct.iter().filter(|d| is_a_service_crate(d)).collect();
    assert!(
        services.is_empty(),
        "the binary uses {services:?} itself: that belongs in a library crate"
    );
    Ok(())
}

/// The binary's modules besides `main.rs`, `args.rs` and `commands/`: what it prints.
const PRINTING: &[&str] = &["status_view"];

/// Lines any file of the binary may have: a verb's module defines its flags, turns them into
/// options and prints answers; a printing module lays out one kind of answer.
const BINARY_FILE_LINES: usize = 300;

#[test]
fn the_binary_is_shared_flags_one_file_per_verb_and_printing_none_over_300_lines()
-> std::io::Result<()> {
    let src = workspace().join("host/cli/src");
    let mut stray = Vec::new();
    for entry in std::fs::read_dir(&src)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let allowed = ["main.rs", "args.rs", "commands"].contains(&name.as_str())
            || PRINTING.contains(&name.as_str());
        if !allowed {
            stray.push(name);
        }
    }
    assert!(
        stray.is_empty(),
        "host/cli/src holds {stray:?}: logic goes in a library crate, a verb in commands/"
    );
    let mut verbs = 0;
    for entry in std::fs::read_dir(src.join("commands"))? {
        let path = entry?.path();
        assert!(
            path.extension().is_some_and(|e| e == "rs"),
            "{}: commands/ holds one file per verb, no folders",
            path.display()
        );
        verbs += 1;
    }
    assert!(verbs > 10, "{verbs} files in commands/");
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    for path in files {
        let lines = std::fs::read_to_string(&path)?.lines().count();
        assert!(
            lines <= BINARY_FILE_LINES,
            "{}: {lines} lines, over {BINARY_FILE_LINES}",
            path.display()
        );
    }
    Ok(())
}
