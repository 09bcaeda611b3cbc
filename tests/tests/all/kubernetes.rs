//! The Kubernetes manifests (`deploy/kubernetes/`), offline: every resource the kustomization
//! lists validates strictly against the Kubernetes 1.33 schemas (`kubernetes-validate`, from
//! the harness's virtualenv, `tests/servers/requirements.txt`), holds what running the host in
//! a pod needs (`kubernetes_manifests.py`: non-root, read-only root, probes on the admin API,
//! a termination grace longer than the host's, a PDB over the pods, ...), and the ConfigMap's
//! tenants file passes `ruststream check --config` with a component where the file expects it.
//! Broken copies of the Deployment (a misspelled field, `runAsNonRoot` removed) must fail, so
//! the checks are seen to bite. No cluster and no network: the schemas are in the package.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context as _, Result, bail, ensure};
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::servers::python_packages;
use ruststream_tests::{binary, compile_cache_dir, guests};

/// The Kubernetes version the manifests are validated against: the oldest EKS standard
/// support still has.
const KUBERNETES_VERSION: &str = "1.33";

fn base() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `kubernetes-validate --strict` over `files`: whether every one passed, and what it said.
fn validate(python: &Path, files: &[PathBuf]) -> Result<(bool, String)> {
    let tool = python.with_file_name("kubernetes-validate");
    let output = Command::new(&tool)
        .args(["--strict", "--kubernetes-version", KUBERNETES_VERSION])
        .args(files)
        .output()
        .with_context(|| format!("running {}", tool.display()))?;
    Ok((output.status.success(), text(&output)))
}

/// What `kubernetes_manifests.py` found in the base, `replace` (resource file → path) read in
/// place of its files.
fn invariants(python: &Path, out: &Path, replace: &[(&str, &Path)]) -> Result<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/kubernetes_manifests.py");
    let mut command = Command::new(python);
    command.arg(&script).arg(base()).arg(out);
    for (file, path) in replace {
        command
            .arg("--replace")
            .arg(format!("{file}={}", path.display()));
    }
    let output = command
        .output()
        .context("running kubernetes_manifests.py")?;
    ensure!(
        output.status.success(),
        "kubernetes_manifests.py failed ({}):\n{}",
        output.status,
        text(&output)
    );
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("kubernetes_manifests.py printed:\n{}", text(&output)))
}

fn violations(found: &serde_json::Value) -> Vec<String> {
    found["violations"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn strings(found: &serde_json::Value, key: &str) -> Vec<PathBuf> {
    found[key]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|v| v.as_str().map(PathBuf::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A copy of the base's Deployment in `dir` with `from` replaced by `to` (which must occur).
fn broken_deployment(dir: &Path, name: &str, from: &str, to: &str) -> Result<PathBuf> {
    let original = std::fs::read_to_string(base().join("deployment.yaml"))?;
    ensure!(
        original.contains(from),
        "deployment.yaml no longer holds `{from}`"
    );
    let path = dir.join(name);
    std::fs::write(&path, original.replace(from, to))?;
    Ok(path)
}

#[test]
fn the_manifests_validate_and_hold_what_a_pod_of_the_host_needs() -> Result<()> {
    // Never skipped: without the virtualenv this fails, saying why (pip's output included).
    let python = python_packages().context("installing tests/servers/requirements.txt")?;
    let dir = ScratchDir::new("kubernetes")?;

    // The invariants, and the files the kustomization lists.
    let found = invariants(&python, &dir.join("out"), &[])?;
    let problems = violations(&found);
    assert!(
        problems.is_empty(),
        "deploy/kubernetes does not hold what a pod of the host needs:\n{}",
        problems.join("\n")
    );
    let resources = strings(&found, "resources");
    assert_eq!(resources.len(), 6, "{found}");
    let grace_ms = found["shutdown_grace_ms"].as_u64().unwrap_or_default();
    let termination = found["termination_grace_seconds"]
        .as_u64()
        .unwrap_or_default();
    assert!(termination * 1000 > grace_ms, "{found}");

    // Strict schema validation: unknown fields are errors. A kind the schemas lack is only a
    // warning there, so every file must also be reported as passed.
    let (ok, said) = validate(&python, &resources)?;
    assert!(ok, "kubernetes-validate refused deploy/kubernetes:\n{said}");
    for file in &resources {
        let passed = said.lines().any(|line| {
            line.starts_with("INFO")
                && line.contains(&*file.to_string_lossy())
                && line.contains(" passed ")
        });
        assert!(passed, "{} was not validated:\n{said}", file.display());
    }

    // The ConfigMap's tenants file, as `run --config` would load it in the pod: a component
    // where the file expects one (the image's /etc/ruststream/components/).
    let config = found["config"]
        .as_str()
        .map(PathBuf::from)
        .context("no tenants file written")?;
    let components = strings(&found, "components");
    assert!(!components.is_empty(), "{found}");
    for component in &components {
        let parent = component
            .parent()
            .context("a component without a directory")?;
        std::fs::create_dir_all(parent)?;
        std::fs::copy(guests::SETTLEMENT.path(), component)?;
    }
    let checked = Command::new(binary())
        .args(["check", "--config"])
        .arg(&config)
        .arg("--compile-cache")
        .arg(compile_cache_dir())
        .env("RUST_LOG", "warn")
        .output()?;
    assert!(
        checked.status.success(),
        "`ruststream check --config` refused the ConfigMap's tenants file:\n{}",
        text(&checked)
    );

    // A misspelled field is refused by the schemas, naming it.
    let misspelled = broken_deployment(
        &dir,
        "misspelled.yaml",
        "readOnlyRootFilesystem:",
        "readOnlyRootFileSystem:",
    )?;
    let (ok, said) = validate(&python, &[misspelled])?;
    assert!(!ok, "a misspelled field passed validation:\n{said}");
    assert!(
        said.contains("'readOnlyRootFileSystem' was unexpected"),
        "{said}"
    );

    // `runAsNonRoot` removed is valid Kubernetes, and refused by the invariants.
    let rooted = broken_deployment(&dir, "rooted.yaml", "runAsNonRoot: true", "")?;
    let (ok, said) = validate(&python, std::slice::from_ref(&rooted))?;
    assert!(ok, "{said}");
    let found = invariants(
        &python,
        &dir.join("rooted"),
        &[("deployment.yaml", &rooted)],
    )?;
    let problems = violations(&found);
    if !problems
        .iter()
        .any(|p| p == "container ruststream: runAsNonRoot is not true")
    {
        bail!("a Deployment without runAsNonRoot was not refused: {problems:?}");
    }

    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
