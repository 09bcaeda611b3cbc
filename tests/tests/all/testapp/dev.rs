//! `ruststream dev`, the binary: a prebuilt component fed JSON lines on stdin, and `--watch`
//! swapping in a component file replaced under it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::{binary, compile_cache_dir, guests};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// Long enough for a loaded machine (a first compile of the component included); only a
/// failing test waits this long.
const PATIENCE: Duration = Duration::from_secs(120);

fn dev(component: &Path, extra: &[&str]) -> anyhow::Result<Child> {
    Command::new(binary())
        .arg("dev")
        .arg(component)
        .arg("--compile-cache")
        .arg(compile_cache_dir())
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting ruststream dev")
}

/// The sequence number a `record N -> STREAM SEQ: JSON` line names.
fn published_at(output: &str, record: usize) -> anyhow::Result<String> {
    let prefix = format!("record {record} -> ");
    let line = (output.lines())
        .find(|line| line.starts_with(&prefix))
        .with_context(|| format!("no line for record {record} in:\n{output}"))?;
    let (_stream, rest) = line[prefix.len()..]
        .split_once(' ')
        .context("stream then sequence")?;
    let (sequence, _json) = rest.split_once(':').context("sequence then JSON")?;
    Ok(sequence.to_owned())
}

#[tokio::test]
async fn dev_prints_each_records_outcome_checkpoint_and_held_record() -> anyhow::Result<()> {
    let mut child = dev(&guests::SETTLEMENT.path(), &[])?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let records = "{\"id\": 1, \"amount\": 120}\n\n{\"id\": 2, \"amount\": -40}\n\
                   {\"id\": 3, \"amount\": 75}\nnot json\n";
    stdin.write_all(records.as_bytes()).await?;
    drop(stdin);
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .context("ruststream dev did not end with its input")??;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");

    assert!(text.contains("app ledger 0.1.0"), "{text}");
    assert!(
        text.contains("subscriber `book` on stream `ledger`"),
        "{text}"
    );
    assert!(text.contains("to stream `ledger`"), "{text}");
    let [first, refund, third] = [1, 2, 3].map(|n| published_at(&text, n));
    let (first, refund, third) = (first?, refund?, third?);
    assert_ne!(first, third);
    let expected = [
        format!("record 1 -> ledger {first}: "),
        format!("  book: ack | checkpoint {first} | held at -"),
        "  guest info: booked entry.id=1 amount=120".to_owned(),
        format!("  book: retry | checkpoint {first} | held at {refund}"),
        format!("  book: ack | checkpoint {first} | held at {refund}"),
        "record 4: not JSON".to_owned(),
    ];
    let mut rest = text.as_ref();
    for line in &expected {
        let at = rest
            .find(line.as_str())
            .with_context(|| format!("`{line}` missing, or out of order, in:\n{text}"))?;
        rest = &rest[at + line.len()..];
    }
    assert!(
        text.contains("cannot requeue"),
        "the host's warning: {text}"
    );
    Ok(())
}

/// Reads lines until one contains `wanted`; the transcript so far is in the error.
async fn expect_line(
    lines: &mut Lines<BufReader<ChildStdout>>,
    seen: &mut String,
    wanted: &str,
) -> anyhow::Result<String> {
    let read = async {
        while let Some(line) = lines.next_line().await? {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(wanted) {
                return anyhow::Ok(Some(line));
            }
        }
        Ok(None)
    };
    match tokio::time::timeout(PATIENCE, read).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(Ok(None)) => anyhow::bail!("output ended before `{wanted}`:\n{seen}"),
        Ok(Err(error)) => Err(error.context(format!("reading, before `{wanted}`:\n{seen}"))),
        Err(_) => anyhow::bail!("no `{wanted}` within {PATIENCE:?}:\n{seen}"),
    }
}

/// Replaces `path` as editors and cargo do: a temporary file beside it, renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let temporary = path.with_extension("wasm.tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}

#[tokio::test]
async fn dev_watch_swaps_in_a_replaced_component_and_keeps_the_old_one_on_a_bad_one()
-> anyhow::Result<()> {
    let dir = ScratchDir::new("dev-watch")?;
    let component = dir.join("app.wasm");
    std::fs::copy(guests::VERSIONED_V1.path(), &component)?;

    let mut child = dev(&component, &["--watch"])?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = String::new();
    // Printed once the watch is in place.
    expect_line(&mut lines, &mut seen, "records: JSON lines from stdin").await?;

    stdin.write_all(b"{\"id\": 1}\n").await?;
    expect_line(&mut lines, &mut seen, "handled event.id=1 version=1").await?;

    replace(&component, b"not a component")?;
    let failed = expect_line(&mut lines, &mut seen, "load failed").await?;
    assert!(failed.contains("still running versioned 1.0.0"), "{failed}");
    stdin.write_all(b"{\"id\": 2}\n").await?;
    expect_line(&mut lines, &mut seen, "handled event.id=2 version=1").await?;

    replace(&component, &std::fs::read(guests::VERSIONED_V2.path())?)?;
    expect_line(
        &mut lines,
        &mut seen,
        "swapped versioned 1.0.0 for versioned 2.0.0",
    )
    .await?;
    stdin.write_all(b"{\"id\": 3}\n").await?;
    let record = expect_line(&mut lines, &mut seen, "record 3 -> events").await?;
    let handled = expect_line(&mut lines, &mut seen, "  handle: ").await?;
    expect_line(&mut lines, &mut seen, "handled event.id=3 version=2").await?;
    let sequence = published_at(&record, 3)?;
    assert_eq!(
        handled,
        format!("  handle: ack | checkpoint {sequence} | held at -"),
        "the checkpoint moves on past the swap: {seen}"
    );
    assert_eq!(seen.matches("handled event.id=").count(), 3, "{seen}");

    drop(stdin);
    expect_line(&mut lines, &mut seen, "watching for changes").await?;
    child.kill().await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// `ruststream dev component FLAGS` fed `records` on stdin, to its end: its exit status,
/// stdout and stderr.
async fn dev_to_end(
    component: &Path,
    flags: &[&str],
    records: &str,
) -> anyhow::Result<(bool, String, String)> {
    let mut child = Command::new(binary())
        .arg("dev")
        .arg(component)
        .arg("--compile-cache")
        .arg(compile_cache_dir())
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting ruststream dev")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    // A component refused at start reads no records: the pipe may be closed already.
    let _ = stdin.write_all(records.as_bytes()).await;
    drop(stdin);
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .context("ruststream dev did not end with its input")??;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[tokio::test]
async fn dev_gives_a_component_every_stream_it_publishes_to_and_shows_each_refusal()
-> anyhow::Result<()> {
    let dispatch = guests::DISPATCH.path();
    // `book` publishes to `ledger.booked`, which it does not read: it exists, as in a host's
    // account, and the booking acks. A reserved header is refused: shown with the record.
    let records = "{\"id\": 1, \"amount\": 5}\n\
                   {\"id\": 2, \"amount\": 5, \"header\": \"x-ruststream-due-ms\"}\n";
    let (ok, text, errors) = dev_to_end(&dispatch, &[], records).await?;
    assert!(ok, "{text}{errors}");
    assert!(text.contains("  streams: any ("), "{text}");
    let first = published_at(&text, 1)?;
    let second = published_at(&text, 2)?;
    let expected = [
        format!("record 1 -> ledger {first}: "),
        format!("  book: ack | checkpoint {first} | held at -"),
        format!("record 2 -> ledger {second}: "),
        format!(
            "  publish refused, from record 2 (sequence {second}) on `book`: to `ledger.booked`: \
             reserved-header (header `x-ruststream-due-ms` is reserved to the host \
             (`x-ruststream-*`) or set by readers on delivery"
        ),
    ];
    in_order(&text, &expected)?;

    // Only `ledger` and `ledger.dead`: the publish is refused, and shown, for the record and
    // for the copy its retry made.
    let listed = [
        "--streams",
        "listed",
        "--with-stream",
        "ledger",
        "--with-stream",
        "ledger.dead",
    ];
    let (ok, text, errors) = dev_to_end(&dispatch, &listed, "{\"id\": 1, \"amount\": 5}\n").await?;
    assert!(ok, "{text}{errors}");
    let first = published_at(&text, 1)?;
    let expected = [
        "  streams: listed, only `ledger`, `ledger.dead`".to_owned(),
        "  book: retry, retry | ".to_owned(),
        format!(
            "  publish refused, from record 1 (sequence {first}) on `book`: to `ledger.booked`: \
             stream-not-found (stream `ledger.booked` does not exist)"
        ),
        "  publish refused, from record 1 (a copy, sequence ".to_owned(),
    ];
    in_order(&text, &expected)?;

    // Without its dead-letter stream it does not start, and says which stream is missing.
    let (ok, text, errors) =
        dev_to_end(&dispatch, &listed[..4], "{\"id\": 1, \"amount\": 5}\n").await?;
    assert!(!ok, "{text}{errors}");
    assert!(
        errors.contains("`ledger.dead` (dead letters of `book`); name each with --with-stream"),
        "{errors}"
    );
    // Nor when the records would go to a stream not listed.
    let elsewhere = [&listed[..], &["--stream", "elsewhere"]].concat();
    let (ok, text, errors) = dev_to_end(&dispatch, &elsewhere, "{\"id\": 1}\n").await?;
    assert!(!ok, "{text}{errors}");
    assert!(
        errors.contains("the records go to stream `elsewhere`, which does not exist"),
        "{errors}"
    );
    Ok(())
}

/// That `lines` appear in `text`, in order.
fn in_order(text: &str, lines: &[String]) -> anyhow::Result<()> {
    let mut rest = text;
    for line in lines {
        let at = rest
            .find(line.as_str())
            .with_context(|| format!("`{line}` missing, or out of order, in:\n{text}"))?;
        rest = &rest[at + line.len()..];
    }
    Ok(())
}
