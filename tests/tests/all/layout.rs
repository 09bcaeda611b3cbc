//! The shape of the workspace: no import cycles between the modules of any crate.

use std::path::{Path, PathBuf};

use ruststream_tests::imports::ImportGraph;

/// Every crate of the workspace, by source root.
const CRATES: &[&str] = &[
    "host/runtime/src",
    "host/host/src",
    "host/fleet/src",
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

/// Every package `root` depends on, whatever the features, as `Cargo.lock` resolves them.
fn dependencies_of(root: &str) -> std::io::Result<std::collections::BTreeSet<String>> {
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
    let host = dependencies_of("ruststream-host")?;
    assert!(host.contains("aws-sdk-kinesis"), "the lock file was read");
    for binary_only in ["clap", "toml", "tracing-subscriber", "aws-config"] {
        assert!(
            !host.contains(binary_only),
            "the host library pulls in {binary_only}"
        );
    }
    Ok(())
}
