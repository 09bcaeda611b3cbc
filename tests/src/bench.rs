//! What the benchmarks (`benches/`) and the process tests share: where benchmarks keep their
//! files, an executor for futures that never wait, an idle shard pipeline, the seed's
//! `consume_json` records and a batch call of them, and a process's memory as `/proc` reports
//! it.

use std::future::Future;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

use anyhow::{Context, Result};
use ruststream_runtime::component::{BatchCall, HandlerInstance};
use ruststream_runtime::record::Text;
use ruststream_runtime::record::{Bytes, Deliveries};
use ruststream_runtime::{
    Delivery, LoadedComponent, Outcome, ShardPipeline, SystemClock, Tenant, log::LogSink,
    pipeline::PipelineEnv, testing::InProcessStreams,
};

/// The cargo target directory the running benchmark was built in
/// (`<target>/release/deps/<bench>-<hash>`).
///
/// # Errors
/// When the executable is not inside a cargo target directory.
pub fn target_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .context("the benchmark is not in a cargo target dir")
}

/// Polls `future` until it is ready: for handlers, whose futures complete without waiting.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

/// A pipeline of the first subscription of `component` on one shard, for `tenant`, publishing
/// to in-process streams; its instance is created on its first record.
///
/// # Errors
/// When the component declares no subscription.
pub fn pipeline(component: &LoadedComponent, tenant: Arc<Tenant>) -> Result<ShardPipeline> {
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let env = component.env(tenant.policy().clone(), streams, clock, LogSink::new());
    let spec = component
        .app()
        .subscriptions
        .first()
        .context("the component declares no subscription")?;
    Ok(ShardPipeline::new(
        component,
        Arc::new(spec.clone()),
        "shardId-000000000000",
        None,
        PipelineEnv {
            component: env,
            tenant,
            observer: None,
            calls: None,
        },
    ))
}

/// A memory figure of process `pid` (`"self"` for this one) from `/proc/<pid>/status`, in KiB:
/// `field` is `VmRSS` (resident now), `VmHWM` (peak resident), ...
///
/// # Errors
/// When the file cannot be read or has no such field.
pub fn status_kib(pid: &str, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?
        .parse()
        .with_context(|| format!("{field} in /proc/{pid}/status is not a number"))
}

/// How long each of this process's threads named `prefix...` (as `/proc` shows a name: its
/// first 15 bytes) has been runnable and waiting for a core so far, by thread id: time the
/// operating system gave to other threads, which a call's own-time deadline does not spend.
/// Compare two with [`RunqueueWaits::since`].
///
/// # Errors
/// When `/proc/self/task` cannot be read.
pub fn runqueue_waits(prefix: &str) -> Result<RunqueueWaits> {
    let mut waits = std::collections::BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task")? {
        let dir = task?.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !name.trim_end().starts_with(prefix) {
            continue;
        }
        // `schedstat`: ns on a core, ns waiting on a run queue, time slices.
        let stats = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        let waited = stats
            .split_whitespace()
            .nth(1)
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
        waits.insert(dir, waited);
    }
    Ok(RunqueueWaits(waits))
}

/// Run-queue waits of threads, as [`runqueue_waits`] read them at one moment.
pub struct RunqueueWaits(std::collections::BTreeMap<std::path::PathBuf, u64>);

impl RunqueueWaits {
    /// How long the threads seen in both readings waited between `earlier` and this one:
    /// threads that ended meanwhile (another test's pool, shut down) or started count nothing.
    pub fn since(&self, earlier: &Self) -> std::time::Duration {
        let waited = self
            .0
            .iter()
            .filter_map(|(thread, now)| Some(now.saturating_sub(*earlier.0.get(thread)?)))
            .sum();
        std::time::Duration::from_nanos(waited)
    }
}

/// The put → handled latencies (ms) of the deliveries a host reports: handled time minus the
/// record's arrival at the stream (the server's clock, on the same machine).
#[derive(Clone, Default)]
pub struct HandledLatencies {
    ms: Arc<std::sync::Mutex<Vec<u64>>>,
    handled: Arc<std::sync::atomic::AtomicUsize>,
}

impl HandledLatencies {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The observer to give the host (`Host::with_observer`).
    pub fn observer(&self) -> ruststream_runtime::pipeline::Observer {
        let latencies = self.clone();
        Arc::new(
            move |report: &ruststream_runtime::pipeline::DeliveryReport| {
                let ms = report.at_ms.saturating_sub(report.arrival_ms);
                ruststream_common::sync::lock(&latencies.ms).push(ms);
                latencies
                    .handled
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
        )
    }

    /// Deliveries reported so far.
    pub fn handled(&self) -> usize {
        self.handled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The latencies reported so far, sorted, taken out.
    pub fn take_sorted(&self) -> Vec<u64> {
        let mut taken = std::mem::take(&mut *ruststream_common::sync::lock(&self.ms));
        taken.sort_unstable();
        taken
    }
}

/// The seed's `consume_json` body of record `i`: `{"id":<1000000+i>,"amount":37}`.
pub fn consume_json_payload(i: usize) -> Vec<u8> {
    format!(r#"{{"id":{},"amount":37}}"#, 1_000_000 + i).into_bytes()
}

/// The sequence number of record `i` of [`consume_json_batch`].
pub fn consume_json_sequence(i: usize) -> String {
    format!("4960{:052}", i + 1)
}

/// Records `range` of the seed's `consume_json` workload as the Kinesis reader hands them
/// over: their sequence numbers and keys slices of one text (the answer's body), their
/// payloads slices of one buffer.
pub fn consume_json_batch(range: Range<usize>) -> Vec<Delivery> {
    let mut strings = String::new();
    let mut payloads = Vec::new();
    let mut spans = Vec::with_capacity(range.len());
    let mut push = |text: &str| {
        strings.push_str(text);
        strings.len() - text.len()..strings.len()
    };
    for i in range.clone() {
        let seq = push(&consume_json_sequence(i));
        let key = push(&format!("key-{}", i % 64));
        let data = payloads.len();
        payloads.extend_from_slice(&consume_json_payload(i));
        spans.push((seq, key, data..payloads.len()));
    }
    let (strings, payloads) = (Text::from(strings), Bytes::from(payloads));
    range
        .zip(spans)
        .map(|(i, (seq, key, data))| Delivery {
            sequence_number: strings.slice(seq),
            partition_key: strings.slice(key),
            arrival_ms: 1_767_225_600_000 + i as u64,
            payload: payloads.slice(data),
            headers: Vec::new(),
            retry_count: 0,
            due_at_ms: None,
            copy: None,
        })
        .collect()
}

/// Hands `deliveries` to `instance` in one call, as records of shard `shardId-000000000000` of
/// stream `ledger`: their outcomes.
///
/// # Errors
/// The call failed (a trap, a deadline); the error says how.
pub async fn call_batch(
    instance: &mut HandlerInstance,
    deliveries: &Arc<Vec<Delivery>>,
) -> Result<Vec<Outcome>> {
    let (stream, shard): (Arc<str>, Arc<str>) = ("ledger".into(), "shardId-000000000000".into());
    let call = BatchCall {
        subscription: 0,
        stream: &stream,
        shard_id: &shard,
        deliveries: Deliveries::whole(deliveries.clone()),
        stop: None,
    };
    Ok(instance.handle_batch(&call).await?)
}
