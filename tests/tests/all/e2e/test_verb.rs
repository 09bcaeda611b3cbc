//! `ruststream test` through the binary: a component fed a records file and checked against an
//! expectations file, with no Rust toolchain in the loop. Every example of the seed's
//! settlement table runs the same shared files (`tests/fixtures/settlement/`): an example in
//! another language is one more line in [`settlement_examples`]. The streams a component has
//! (every one it publishes to, unless `--streams listed`), the publishes it is refused and
//! the expectations per subscription run `dispatch`, whose `book` publishes where each entry
//! says and whose `audit` reads the same stream.

use std::path::{Path, PathBuf};
use std::process::Command;

use ruststream_tests::scratch::ScratchDir;
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
    ruststream_test_with(component, records, expect, &[])
}

/// `ruststream test component --records records --expect expect FLAGS`.
fn ruststream_test_with(
    component: &Path,
    records: &Path,
    expect: &Path,
    flags: &[&str],
) -> anyhow::Result<Run> {
    let out = Command::new(binary())
        .arg("test")
        .arg(component)
        .arg("--records")
        .arg(records)
        .arg("--expect")
        .arg(expect)
        .arg("--compile-cache")
        .arg(ruststream_tests::compile_cache_dir())
        .args(flags)
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
    let dir = ScratchDir::new(concat!("test-verb-", "publishes"))?;
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
    let dir = ScratchDir::new(concat!("test-verb-", "bad-input"))?;
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

/// `dispatch` run on `records` against `expect` (both written into a directory of their own
/// named `name`) with `flags`.
fn dispatch(name: &str, records: &str, expect: &str, flags: &[&str]) -> anyhow::Result<Run> {
    let dir = ScratchDir::new(&format!("test-verb-{name}"))?;
    let (records_file, expect_file) = (dir.join("records.jsonl"), dir.join("expect.toml"));
    std::fs::write(&records_file, records)?;
    std::fs::write(&expect_file, expect)?;
    ruststream_test_with(&guests::DISPATCH.path(), &records_file, &expect_file, flags)
}

/// Only `ledger` (which `dispatch` reads) and `ledger.dead` (where `book` dead-letters) exist.
const LISTED: [&str; 6] = [
    "--streams",
    "listed",
    "--with-stream",
    "ledger",
    "--with-stream",
    "ledger.dead",
];

/// The report's `FAIL` lines.
fn failures(run: &Run) -> Vec<&str> {
    let lines = run.stdout.lines();
    lines.filter(|l| l.starts_with("FAIL  ")).collect()
}

#[test]
fn every_stream_a_component_publishes_to_exists_and_what_it_writes_there_is_checked()
-> anyhow::Result<()> {
    // `book` writes to `ledger.booked`, which it does not read and the file does not name,
    // and to two more streams a record names.
    let records = "{\"json\": {\"id\": 1, \"amount\": 5}}\n\
                   {\"json\": {\"id\": 2, \"amount\": 7, \"to\": [\"audit-7\", \"x.y_z\"]}}\n";
    let outcomes = "[[record]]\nsubscription = \"book\"\noutcome = \"ack\"\n\
                    [[record]]\nsubscription = \"book\"\noutcome = \"ack\"\n";
    let run = dispatch("any-stream", records, outcomes, &[])?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("ok    record 1 (line 1, key 1, sequence ")
            && run.stdout.contains(") on `book`: ack"),
        "{said}"
    );
    assert!(!run.stdout.contains("refused"), "{said}");
    // What it wrote where the file expects nothing fails the run, by stream.
    assert_eq!(run.code, Some(1), "{said}");
    for stream in ["ledger.booked", "audit-7", "x.y_z"] {
        let line = format!("FAIL  publish 1 to `{stream}`: expected nothing, got {{\"id\":");
        assert!(run.stdout.contains(&line), "{stream}: {said}");
    }

    let expect = format!(
        "{outcomes}\
         [[publish]]\nstream = \"ledger.booked\"\njson = {{ id = 1, amount = 5 }}\n\
         [[publish]]\nstream = \"audit-7\"\njson = {{ id = 2, amount = 7 }}\n\
         [[publish]]\nstream = \"x.y_z\"\njson = {{ id = 2, amount = 7 }}\n"
    );
    let run = dispatch("any-stream-expected", records, &expect, &[])?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{said}");
    assert!(run.stdout.contains("passed: 5 expectations held"), "{said}");
    assert!(
        run.stdout
            .contains("  streams: any (read and dead-letter streams"),
        "{said}"
    );
    Ok(())
}

#[test]
fn with_listed_streams_a_publish_elsewhere_is_refused_and_reported_with_its_record()
-> anyhow::Result<()> {
    let records = "{\"json\": {\"id\": 1, \"amount\": 5}}\n\
                   # a refund: audit drops it\n\
                   {\"json\": {\"id\": 2, \"amount\": -3}, \"partition_key\": \"acct-2\"}\n";
    let outcomes = "[[record]]\nsubscription = \"book\"\noutcome = \"retry\"\n\
                    [[record]]\nsubscription = \"book\"\noutcome = \"retry\"\n";
    let run = dispatch("listed", records, outcomes, &LISTED)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(
        run.stdout
            .contains("  streams: listed, only `ledger`, `ledger.dead`"),
        "{said}"
    );
    assert!(
        run.stdout
            .contains("subscriber `book` on `ledger`: 4 calls, 4 publishes refused"),
        "{said}"
    );
    // One line per record (its first call and its copy's), with its number, line, key and
    // sequence number, the subscription, the stream and why.
    let failed = failures(&run);
    assert_eq!(failed.len(), 2, "{said}");
    for (line, (number, at, key)) in failed.iter().zip([(1, 1, "1"), (2, 3, "acct-2")]) {
        let from = format!(
            "FAIL  publish refused, from record {number} (line {at}, key {key}, sequence 4960"
        );
        assert!(line.starts_with(&from), "{said}");
        assert!(
            line.ends_with(
                ") on `book`: expected no refused publish, got to `ledger.booked`: \
                 stream-not-found (stream `ledger.booked` does not exist), 2 times"
            ),
            "{said}"
        );
    }
    // Under it, the log lines of that record: what the guest made of the refusal.
    assert!(
        run.stdout
            .contains("guest warn: not booked entry.id=1 stream=ledger.booked error=stream"),
        "{said}"
    );

    // Expected, it holds; an expected refusal that did not come fails.
    let expect = format!(
        "{outcomes}[[refused]]\nsubscription = \"book\"\nstream = \"ledger.booked\"\n\
         reason = \"stream-not-found\"\n\
         [[refused]]\nrecord = 1\nstream = \"ledger.audit\"\n"
    );
    let run = dispatch("listed-expected", records, &expect, &LISTED)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert_eq!(
        failures(&run),
        [
            "FAIL  refused publish of [[refused]] 2: expected to `ledger.audit`, from record 1, \
          got no such refused publish"
        ],
        "{said}"
    );
    assert!(
        run.stdout
            .contains("ok    publish refused, from record 2 (line 3, key acct-2"),
        "{said}"
    );
    Ok(())
}

#[test]
fn with_listed_streams_what_the_component_or_the_records_need_must_be_listed() -> anyhow::Result<()>
{
    let records = "{\"json\": {\"id\": 1, \"amount\": 5}}\n";
    let expect = "[[record]]\nsubscription = \"book\"\noutcome = \"ack\"\n";
    let cases: [(&str, &[&str], &str); 3] = [
        // Its dead-letter stream is missing: named, with what it is for.
        (
            records,
            &["--streams", "listed", "--with-stream", "ledger"],
            "streams the component needs do not exist: `ledger.dead` (dead letters of `book`); \
             name each with --with-stream",
        ),
        // A record goes to a stream that is not listed: named, with its line.
        (
            "{\"json\": {\"id\": 1, \"amount\": 5}, \"stream\": \"elsewhere\"}\n",
            &LISTED,
            "records.jsonl, line 1: stream `elsewhere` does not exist",
        ),
        // A list without `--streams listed` would mean nothing.
        (
            records,
            &["--with-stream", "ledger"],
            "--with-stream `ledger` lists a stream for --streams listed",
        ),
    ];
    for (index, (records, flags, says)) in cases.into_iter().enumerate() {
        let run = dispatch(&format!("needs-{index}"), records, expect, flags)?;
        let said = format!("{says}:\n{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, Some(2), "{said}");
        assert_eq!(run.stderr.lines().count(), 1, "{said}");
        assert!(run.stderr.contains(says), "{said}");
        assert!(run.stdout.is_empty(), "{said}");
    }
    Ok(())
}

#[test]
fn a_refused_publish_is_reported_whatever_the_reason() -> anyhow::Result<()> {
    let records = [
        r#"{"json": {"id": 1, "amount": 1, "header": "x-ruststream-due-ms", "to": ["ledger"]}}"#,
        r#"{"json": {"id": 2, "amount": 1, "bytes": 1100000, "to": ["ledger"]}}"#,
        r#"{"json": {"id": 3, "amount": 1, "to": ["nowhere"]}}"#,
        // A second's worth of the write quota goes at once; the rest is throttled.
        r#"{"json": {"id": 4, "amount": 1, "to": ["nowhere"], "times": 1001}}"#,
    ]
    .join("\n");
    let run = dispatch("reasons", &records, "", &LISTED)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    let failed = failures(&run);
    let reasons = [
        (
            1,
            "ledger",
            "reserved-header (header `x-ruststream-due-ms` is reserved to the host \
             (`x-ruststream-*`) or set by readers on delivery",
        ),
        (
            2,
            "ledger",
            "record-too-large (record of 1100001 bytes exceeds",
        ),
        (
            3,
            "nowhere",
            "stream-not-found (stream `nowhere` does not exist)",
        ),
        (
            4,
            "nowhere",
            "stream-not-found (stream `nowhere` does not exist)",
        ),
        (
            4,
            "nowhere",
            "throttled (tenant `test` has spent its write quota",
        ),
    ];
    for (record, stream, reason) in reasons {
        let from = format!("FAIL  publish refused, from record {record} (line {record}, ");
        let got = format!("on `book`: expected no refused publish, got to `{stream}`: {reason}");
        assert!(
            failed
                .iter()
                .any(|l| l.starts_with(&from) && l.contains(&got)),
            "record {record}, {reason}:\n{said}"
        );
    }

    // Outside any record: `describe` publishing 100 000 times, each refused.
    let dir = ScratchDir::new(concat!("test-verb-", "reasons-describe"))?;
    let (records, expect) = (dir.join("records.jsonl"), dir.join("expect.toml"));
    std::fs::write(&records, "{\"data\": \"x\"}\n")?;
    std::fs::write(&expect, "")?;
    let component = guests::HOSTILE_DESCRIBE_PUBLISH.path();
    let run = ruststream_test(&component, &records, &expect)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert!(
        run.stdout
            .contains("  100000 publishes refused while loading the component"),
        "{said}"
    );
    assert!(
        run.stdout.contains(
            "FAIL  publish refused, from outside any record while loading the component \
             (instantiating, `describe`): expected no refused publish, got to `payments`: \
             not-permitted (publishing to stream `payments` is not granted to this tenant)"
        ),
        "{said}"
    );
    // Expected by its record number, 0: outside any record.
    std::fs::write(&expect, "[[refused]]\nrecord = 0\nstream = \"payments\"\n")?;
    let run = ruststream_test(&component, &records, &expect)?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{said}");
    Ok(())
}

#[test]
fn a_record_is_checked_for_each_subscription_that_reads_its_stream() -> anyhow::Result<()> {
    let records = "{\"json\": {\"id\": 1, \"amount\": 5}}\n\
                   {\"json\": {\"id\": 2, \"amount\": -3}}\n";
    let publishes = "[[publish]]\nstream = \"ledger.booked\"\njson = { id = 1, amount = 5 }\n\
                     [[publish]]\nstream = \"ledger.booked\"\njson = { id = 2, amount = -3 }\n";
    // Record 1 without a subscription: every subscription of `ledger`. Record 2: `book`
    // positionally, and `audit` by the record's number.
    let expect = |audit: &str| {
        format!(
            "[[record]]\noutcome = \"ack\"\n\
             [[record]]\nsubscription = \"book\"\noutcome = \"ack\"\n\
             [[record]]\nnumber = 2\nsubscriber = \"audit\"\noutcome = \"{audit}\"\n{publishes}"
        )
    };
    let run = dispatch("per-subscription", records, &expect("drop"), &[])?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{said}");
    let checked: Vec<_> = (run.stdout.lines())
        .filter(|l| l.starts_with("ok    record "))
        .map(|l| {
            let (record, rest) = l["ok    record ".len()..]
                .split_once(' ')
                .unwrap_or_default();
            let (_, on) = rest.split_once(") on ").unwrap_or_default();
            format!("{record} {on}")
        })
        .collect();
    assert_eq!(
        checked,
        [
            "1 `book`: ack",
            "1 `audit`: ack",
            "2 `book`: ack",
            "2 `audit`: drop"
        ],
        "{said}"
    );

    // Each subscription's outcome is its own: a wrong one names it.
    let run = dispatch("per-subscription-wrong", records, &expect("ack"), &[])?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    let failed = failures(&run);
    assert_eq!(failed.len(), 1, "{said}");
    assert!(
        failed[0].starts_with("FAIL  record 2 (line 2, key 2, sequence 4960")
            && failed[0].ends_with(") on `audit`: expected ack, got drop"),
        "{said}"
    );

    // A publish can name who made it: the record and the subscription.
    let by = |first: &str| {
        format!(
            "[[record]]\nnumber = 1\nsubscription = \"book\"\noutcome = \"ack\"\n\
             [[publish]]\nstream = \"ledger.booked\"\njson = {{ id = 1, amount = 5 }}\n{first}\n\
             [[publish]]\nstream = \"ledger.booked\"\njson = {{ id = 2, amount = -3 }}\n\
             record = 2\nsubscriber = \"book\"\n"
        )
    };
    let run = dispatch("publisher", records, &by("record = 1"), &[])?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{said}");
    let run = dispatch(
        "publisher-wrong",
        records,
        &by("subscription = \"audit\""),
        &[],
    )?;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(1), "{said}");
    assert_eq!(
        failures(&run),
        [
            "FAIL  publish 1 to `ledger.booked`: expected {\"amount\":5,\"id\":1} on `audit`, got \
          {\"id\":1,\"amount\":5} from record 1 (line 1, key 1, sequence \
          49600000000000000000000000000000000000000000000000000001) on `book`"
        ],
        "{said}"
    );

    // A subscription the app does not have, and two outcomes for one call, are bad input.
    let bad = [
        (
            "[[record]]\nnumber = 1\nsubscription = \"audt\"\noutcome = \"ack\"\n",
            "[[record]] 1: no subscription `audt` in the component (it has: book, audit)",
        ),
        (
            "[[record]]\nnumber = 1\noutcome = \"ack\"\n\
             [[record]]\nnumber = 1\nsubscription = \"audit\"\noutcome = \"ack\"\n",
            "[[record]] 2: record 1 on `audit` is already expected by [[record]] 1",
        ),
        (
            "[[record]]\nnumber = 3\noutcome = \"ack\"\n",
            "[[record]] 1: record 3: there are 2 records",
        ),
    ];
    for (index, (expect, says)) in bad.into_iter().enumerate() {
        let run = dispatch(
            &format!("per-subscription-bad-{index}"),
            records,
            expect,
            &[],
        )?;
        let said = format!("{says}:\n{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, Some(2), "{said}");
        assert!(run.stderr.contains(says), "{said}");
    }
    Ok(())
}

#[test]
fn dev_and_test_take_the_same_stream_flags() -> anyhow::Result<()> {
    for verb in ["dev", "test"] {
        let out = Command::new(binary()).args([verb, "--help"]).output()?;
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{verb}: {help}");
        for flag in [
            "--streams <WHICH>",
            "--with-stream <NAME>",
            "[default: any]",
        ] {
            assert!(help.contains(flag), "{verb} --help lacks {flag}:\n{help}");
        }
    }
    Ok(())
}
