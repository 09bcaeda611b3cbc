//! The seed's native framework (crates.io `ruststream` 0.7.7 and `ruststream-kinesis` 0.7.1)
//! running the seed's `book` handler linked into the service, consuming one Kinesis stream from
//! its oldest record, timed so a benchmark can set its CPU cost beside the wasm host's.
//!
//! ```text
//! seed-kinesis-bench --endpoint http://127.0.0.1:4567 --stream ledger --records 5000
//! ```
//!
//! Prints `native records=<N> cpu_us=<u64> wall_us=<u64>` once `N` records were handled and
//! exits 0; exits 1 if that takes longer than 600 s. See `../README.md`.

use std::process::exit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ruststream::prelude::*;
use ruststream_kinesis::{KinesisBroker, KinesisPosition, KinesisStream};
use serde::Deserialize;
use tokio::sync::Notify;

/// How long the records may take before the run counts as failed.
const DEADLINE: Duration = Duration::from_secs(600);
/// The pause after an empty read of a shard: the host's read cadence.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Records the handler has seen, whatever its outcome.
static HANDLED: AtomicUsize = AtomicUsize::new(0);
/// The number of records the run waits for (set once, before the app starts).
static TARGET: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Woken by the handler that brings [`HANDLED`] to [`TARGET`].
static REACHED: Notify = Notify::const_new();

/// One ledger entry; fields the records carry beyond these (`memo`) are ignored.
#[derive(Deserialize)]
struct Entry {
    id: u64,
    amount: i64,
}

/// The seed's `book` handler, without its log line.
async fn book(entry: &Entry) -> HandlerOutcome {
    match entry.amount {
        0 => HandlerOutcome::drop(),
        a if a < 0 => HandlerOutcome::retry(),
        a => {
            std::hint::black_box((entry.id, a));
            HandlerOutcome::ack()
        }
    }
}

/// [`book`] as a manual-path body, counting every record it handles.
struct Book;

impl Handle<Entry> for Book {
    async fn handle(
        &self,
        entry: &Entry,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let outcome = book(entry).await;
        if HANDLED.fetch_add(1, Ordering::Relaxed) + 1 == TARGET.load(Ordering::Relaxed) {
            REACHED.notify_one();
        }
        if outcome.is_ack() {
            Ok(())
        } else {
            Err(outcome)
        }
    }
}

/// The command line.
struct Args {
    endpoint: String,
    stream: String,
    records: usize,
}

fn parse_args() -> Result<Args, String> {
    let (mut endpoint, mut stream, mut records) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--endpoint" => endpoint = Some(value),
            "--stream" => stream = Some(value),
            "--records" => {
                let n = value
                    .parse()
                    .map_err(|e| format!("--records {value}: {e}"))?;
                records = Some(n);
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(Args {
        endpoint: endpoint.ok_or("--endpoint is required")?,
        stream: stream.ok_or("--stream is required")?,
        records: records.filter(|&n| n > 0).ok_or("--records N (N > 0) is required")?,
    })
}

/// This process's user + system CPU time so far, in microseconds.
fn cpu_us() -> u64 {
    // SAFETY: `getrusage` only writes the zeroed struct it is handed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &raw mut usage);
        usage
    };
    let us = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(t.tv_usec).unwrap_or(0)
    };
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// The service: the broker on the local stack with an in-memory lease store (its default),
/// one subscription reading every shard of `stream` from its oldest record.
fn service(args: &Args) -> RustStream {
    let broker = KinesisBroker::new()
        .endpoint(args.endpoint.clone())
        .region("us-east-1")
        .test_credentials();
    let stream = KinesisStream::new(args.stream.clone()).poll_interval(POLL_INTERVAL);
    RustStream::new(AppInfo::new("seed-kinesis-bench", "0.1.0")).with_broker(broker, |b| {
        b.include(
            subscriber(stream, Book)
                .build()
                .start_at(KinesisPosition::horizon()),
        );
    })
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("seed-kinesis-bench: {e}");
            exit(2);
        }
    };
    TARGET.store(args.records, Ordering::Relaxed);
    let app = service(&args);

    let (wall, cpu) = (Instant::now(), cpu_us());
    // Registered before the app starts, so a wake-up during startup is not missed.
    let reached = REACHED.notified();
    // Kept alive until the process exits.
    let _running = match app.start().await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("seed-kinesis-bench: the app did not start: {e}");
            exit(1);
        }
    };
    if tokio::time::timeout(DEADLINE, reached).await.is_err() {
        eprintln!(
            "seed-kinesis-bench: {} of {} records handled after {DEADLINE:?}",
            HANDLED.load(Ordering::Relaxed),
            args.records
        );
        exit(1);
    }
    let (wall_us, cpu_us) = (wall.elapsed().as_micros(), cpu_us() - cpu);
    println!(
        "native records={} cpu_us={cpu_us} wall_us={wall_us}",
        args.records
    );
    // The service's shutdown is not part of the measurement: the process ends here.
    exit(0);
}
