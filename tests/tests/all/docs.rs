//! The docs state what is true now: every repository path they name exists, and none names an
//! issue or a commit (history belongs to git; a decision has its own record under
//! `docs/decisions/`).

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_owned()
}

/// README.md and every Markdown file under docs/, with their text.
fn docs() -> std::io::Result<Vec<(PathBuf, String)>> {
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
        .into_iter()
        .map(|path| Ok((path.clone(), std::fs::read_to_string(&path)?)))
        .collect()
}

/// The folders a path the docs name starts with.
const TOP: &[&str] = &[
    "host/",
    // The tests crate's own folders (a tenant crate has a `tests/` of its own).
    "tests/tests/",
    "tests/src/",
    "tests/guests/",
    "tests/benches/",
    "tests/examples/",
    "tests/fixtures/",
    "tests/servers/",
    "tests/toolchains/",
    "tests/wasmtime-next/",
    "guest-sdk/",
    "guest-examples/",
    "docs/",
    "wit/",
    "deploy/",
    "benches-native/",
    ".ci/",
];

/// Each `code span` of `text` that is a repository path: one of [`TOP`]'s folders, then
/// no space, pattern or placeholder; a `:line` or `#anchor` after it left off.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| TOP.iter().any(|top| span.starts_with(top)))
        .filter(|span| !span.contains([' ', '{', '*', '<', '$', '…']) && !span.contains("..."))
        .map(|span| {
            let span = span.split(['#', ':']).next().unwrap_or(span);
            span.trim_end_matches(['.', ',']).to_owned()
        })
        .collect()
}

#[test]
fn every_repository_path_the_docs_name_exists() -> std::io::Result<()> {
    let root = workspace();
    let mut missing = Vec::new();
    let mut named = 0;
    for (file, text) in docs()? {
        for path in named_paths(&text) {
            named += 1;
            if !root.join(&path).exists() {
                missing.push(format!("{}: `{path}`", file.display()));
            }
        }
    }
    assert!(
        named > 50,
        "only {named} paths read: is the check reading the docs?"
    );
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// Whether `text` names an issue: `issue 12`, `issues 12 and 13`, `(#12)`.
fn names_an_issue(text: &str) -> bool {
    let lower = text.to_lowercase();
    let after_word = ["issue ", "issues "].iter().any(|word| {
        lower
            .match_indices(word)
            .any(|(at, _)| lower[at + word.len()..].starts_with(|c: char| c.is_ascii_digit()))
    });
    let by_number = lower
        .match_indices("(#")
        .any(|(at, _)| lower[at + 2..].starts_with(|c: char| c.is_ascii_digit()));
    after_word || by_number
}

/// Whether `text` names a commit: `commit abc1234`, or a 7-12 digit hex word in parentheses.
fn names_a_commit(text: &str) -> bool {
    let hex = |word: &str| {
        (7..=40).contains(&word.len())
            && word
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic())
    };
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '(' && c != ')')
        .collect();
    words
        .windows(2)
        .any(|w| w[0].ends_with("commit") && hex(w[1]))
        || words.iter().any(|w| {
            w.strip_prefix('(')
                .and_then(|w| w.strip_suffix(')'))
                .is_some_and(|inner| inner.len() <= 12 && hex(inner))
        })
}

#[test]
fn no_doc_names_an_issue_or_a_commit() -> std::io::Result<()> {
    let mut found = Vec::new();
    for (file, text) in docs()? {
        for (line, code) in text.lines().enumerate() {
            if names_an_issue(code) || names_a_commit(code) {
                found.push(format!("{}:{}: {code}", file.display(), line + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "history in the docs:\n{}",
        found.join("\n")
    );
    Ok(())
}

#[test]
fn the_checks_see_what_they_look_for() {
    // A check that matched nothing would pass on anything.
    assert!(names_an_issue("as issue 37 asked"));
    assert!(names_an_issue("Issues 24 and 25"));
    assert!(names_an_issue("fixed (#12)"));
    assert!(!names_an_issue("a known issue with fan-out"));
    assert!(names_a_commit("since commit 4d09231"));
    assert!(names_a_commit("the layout test (e17171e)"));
    assert!(!names_a_commit("shows #4e2399626976 for the version"));
    assert!(!names_a_commit("a decade (2026)"));
    assert_eq!(
        named_paths("see `host/runtime/src/lib.rs:12` and `host/{a,b}.rs` and `x.rs`"),
        ["host/runtime/src/lib.rs"]
    );
}
