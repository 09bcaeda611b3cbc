//! `ruststream test` through the binary: a component fed a records file and checked against an
//! expectations file, with no Rust toolchain in the loop. Every example of the seed's
//! settlement table runs the same shared files (`tests/fixtures/settlement/`): an example in
//! another language is one more line in [`settlement_examples`].

use std::path::{Path, PathBuf};
use std::process::Command;

use ruststream_tests::toolchains::{SETTLEMENT_JS, SETTLEMENT_PYTHON};
use ruststream_tests::{binary, guests};

/// The components that answer the seed's settlement table, one per way of writing it: the
/// SDK's two forms, plain `wit-bindgen`, Python and JavaScript (built by their toolchains).
fn settlement_examples() -> anyhow::Result<Vec<PathBuf>> {
    Ok(vec![
        guests::SETTLEMENT.path(),
        guests::SETTLEMENT_MANUAL.path(),
        guests::SETTLEMENT_PLAIN.path(),
        SETTLEMENT_PYTHON.build()?,
        SETTLEMENT_JS.build()?,
    ])
}

/// What one run of `ruststream test` came to.
struct Run {
    /// The exit status.
    code: Option<i32>,
    /// The report.
    stdout: String,
    /// The one-line error, if any.
    stderr: String,
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path)
}

/// `ruststream test component --records records --expect expect`.
fn ruststream_test(component: &Path, records: &Path, expect: &Path) -> anyhow::Result<Run> {
    let out = Command::new(binary())
        .arg("test")
        .arg(component)
        .arg("--records")
        .arg(records)
        .arg("--expect")
        .arg(expect)
        .arg("--compile-cache")
        .arg(ruststream_tests::compile_cache_dir())
        .output()?;
    Ok(Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// The settlement table's run of `guest` against the shared expectations file `expect`.
fn settlement(guest: &Path, expect: &str) -> anyhow::Result<Run> {
    let records = fixture("settlement/records.jsonl");
    ruststream_test(guest, &records, &fixture(expect))
}

#[test]
fn every_settlement_example_passes_the_seed_table_in_toml_and_json() -> anyhow::Result<()> {
    for guest in settlement_examples()? {
        for expect in ["settlement/expect.toml", "settlement/expect.json"] {
            let run = settlement(&guest, expect)?;
            let said = format!(
                "{}, {expect}:\n{}{}",
                guest.display(),
                run.stdout,
                run.stderr
            );
            assert_eq!(run.code, Some(0), "{said}");
            assert!(run.stdout.contains("passed: 6 expectations held"), "{said}");
            assert!(!run.stdout.contains("FAIL"), "{said}");
        }
    }
    Ok(())
}

#[test]
fn a_wrong_outcome_names_the_record_and_both_outcomes() -> anyhow::Result<()> {
    for guest in settlement_examples()? {
        let run = settlement(&guest, "settlement/expect-wrong.toml")?;
        let said = format!("{}:\n{}{}", guest.display(), run.stdout, run.stderr);
        assert_eq!(run.code, Some(1), "{said}");
        let failed: Vec<_> = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("FAIL  "))
            .collect();
        assert_eq!(failed.len(), 1, "{said}");
        // Its number, line and key, its sequence number, and both outcomes.
        assert!(
            failed[0].starts_with("FAIL  record 3 (line 4, key 3, sequence 4960")
                && failed[0].ends_with(": expected ack, got retry"),
            "{said}"
        );
        assert!(run.stdout.contains("FAILED: 1 of 6 expectations"), "{said}");
    }
    Ok(())
}

#[test]
fn publishes_delays_and_attempts_are_checked() -> anyhow::Result<()> {
    let records = fixture("relay/records.jsonl");
    let run = ruststream_test(
        &guests::RELAY.path(),
        &records,
        &fixture("relay/expect.toml"),
    )?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{said}");
    assert!(run.stdout.contains("passed: 5 expectations held"), "{said}");
    // The reminder's copy came back after its delay and was handled: two calls for it.
    assert!(
        run.stdout.contains("`remind` on `reminders`: 3 calls"),
        "{said}"
    );

    // A publish the file does not expect fails the run, with what was published.
    let dir = tempdir("publishes")?;
    let unexpected = dir.join("expect.toml");
    std::fs::write(&unexpected, "streams = [\"shipments\"]\n")?;
    let run = ruststream_test(&guests::RELAY.path(), &records, &unexpected)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(
        run.stdout.contains(
            "FAIL  publish 1 to `shipments`: expected nothing, got {\"id\":1,\"customer\":\"ada\"}"
        ),
        "{said}"
    );
    Ok(())
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_file_and_line() -> anyhow::Result<()> {
    let dir = tempdir("bad-input")?;
    let records = fixture("settlement/records.jsonl");
    let expect = fixture("settlement/expect.toml");
    let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let bad_records = write("records.jsonl", "{\"json\": 1}\n\n{\"jsn\": 2}\n")?;
    let bad_expect = write("expect.toml", "[[record]]\noutcom = \"ack\"\n")?;
    let short_expect = write("short.toml", "[[record]]\noutcome = \"ack\"\n")?;
    let settlement = guests::SETTLEMENT.path();
    let cases: [(&Path, &Path, &Path, &str); 5] = [
        (
            &settlement,
            &bad_records,
            &expect,
            "records.jsonl, line 3: unknown field `jsn`",
        ),
        (
            &settlement,
            &records,
            &bad_expect,
            "expect.toml: TOML parse error at line 2",
        ),
        (
            &settlement,
            &records,
            &short_expect,
            "1 [[record]] entries for 4 records",
        ),
        (
            &guests::NOT_RUSTSTREAM.path(),
            &records,
            &expect,
            "not_ruststream.wasm: ",
        ),
        (
            &settlement,
            &dir.join("missing.jsonl"),
            &expect,
            "cannot read",
        ),
    ];
    for (component, records, expect, says) in cases {
        let run = ruststream_test(component, records, expect)?;
        let said = format!("{says}:\n{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, Some(2), "{said}");
        assert_eq!(run.stderr.lines().count(), 1, "{said}");
        assert!(
            run.stderr.starts_with("error: ") && run.stderr.contains(says),
            "{said}"
        );
    }
    Ok(())
}

/// An empty directory of this test's own.
fn tempdir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "ruststream-test-verb-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
