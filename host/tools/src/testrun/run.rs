//! The component fed the records: the app started on in-process streams, each record
//! published in order, delayed copies delivered, and what came of it all collected: calls,
//! the records written to every stream, the publishes refused.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use ruststream_common::escape::escape_controls;
use ruststream_runtime::envelope;
use ruststream_runtime::{
    RuntimeConfig, TestApp,
    app::AppSpec,
    log::LogLine,
    pipeline::DeliveryReport,
    publish::{PublishedBy, RefusedPublish},
    record::{Header, OutgoingRecord},
    testing::{ExistingStreams, TestAppError},
};

use super::TestRunError;
use super::expect::Expectations;
use super::records::InputRecord;

/// How far paused time moves at once while copies are still due.
const DRAIN_STEP: Duration = Duration::from_secs(3600);
/// Steps of [`DRAIN_STEP`] before the copies still pending are left undelivered: a day.
const DRAIN_STEPS: usize = 24;

/// What came of the records.
#[derive(Debug)]
pub(crate) struct Observed {
    /// The app the component declared, as `ledger 0.1.0`.
    pub app: String,
    /// Each subscription and where it ended.
    pub subscriptions: Vec<SubscriptionState>,
    /// Where each input record went, in the records file's order.
    pub sent: Vec<Sent>,
    /// Every call of every subscriber, each subscriber's in order.
    pub calls: Vec<DeliveryReport>,
    /// What the component published to the streams watched, in order per stream.
    pub written: Vec<Written>,
    /// Every publish the component was refused, by subscription and record.
    pub refused: Vec<RefusedPublish>,
    /// Refused publishes past the kinds noted for a record: subscriber, record, how many.
    pub unlisted: Vec<(Option<String>, Option<String>, u64)>,
    /// Which streams existed.
    pub existing: ExistingStreams,
    /// Every log line: the component's and the runtime's.
    pub logs: Vec<LogLine>,
}

/// Where one input record went.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The stream.
    pub stream: String,
    /// Its sequence number there.
    pub sequence: String,
    /// Its partition key.
    pub key: String,
}

/// One subscription, once everything was delivered.
#[derive(Debug, Clone)]
pub(crate) struct SubscriptionState {
    /// Its name.
    pub name: String,
    /// The stream it reads.
    pub stream: String,
    /// The last record of the handled prefix.
    pub checkpoint: Option<String>,
    /// The first unhandled record.
    pub held_at: Option<String>,
    /// Copies still waiting for their due time after a day of paused time.
    pub pending_copies: usize,
}

/// A record the component wrote.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    /// The stream.
    pub stream: String,
    /// Who published it: the subscription and the record its call was on.
    pub by: Option<PublishedBy>,
    /// Its partition key.
    pub key: String,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its user headers.
    pub headers: Vec<Header>,
}

/// Loads `component` with `config` on the streams `existing`, publishes every record,
/// delivers the copies due within a day of paused time, and collects what happened.
///
/// # Errors
/// [`TestRunError::Component`] when the component is refused, [`TestRunError::MissingStreams`]
/// when it reads or dead-letters into a stream not listed, [`TestRunError::Records`] for a
/// record whose subscription the component does not have or whose stream does not exist,
/// [`TestRunError::Run`] when publishing fails or the app never settles.
pub(crate) async fn run(
    component: &Path,
    config: RuntimeConfig,
    existing: &ExistingStreams,
    (records_file, records): (&Path, &[InputRecord]),
    expected: &Expectations,
) -> Result<Observed, TestRunError> {
    let refused = |source| match source {
        TestAppError::MissingStreams(missing) => TestRunError::MissingStreams {
            file: component.to_owned(),
            missing,
        },
        source => TestRunError::Component {
            file: component.to_owned(),
            source: Box::new(source),
        },
    };
    let failed = |source| TestRunError::Run {
        file: component.to_owned(),
        source: Box::new(source),
    };
    let mut app = TestApp::builder(component)
        .runtime(config)
        .streams(existing.clone())
        .start()
        .await
        .map_err(refused)?;
    let existing_before = app.stream_names();
    let streams = records
        .iter()
        .map(|record| {
            let stream = stream_of(record, app.app())?;
            exists(record, &stream, existing, &existing_before)?;
            Ok(stream)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|(line, message)| TestRunError::Records {
            file: records_file.to_owned(),
            line,
            message,
        })?;
    let mut sent = Vec::with_capacity(records.len());
    for (record, stream) in records.iter().zip(streams) {
        sent.push(publish(&mut app, record, stream).await.map_err(failed)?);
    }
    drain(&mut app).await.map_err(failed)?;
    collect(&app, existing, sent, expected).map_err(failed)
}

/// With listed streams, that `stream`, where `record` goes, is one of them (`listed`, the
/// streams that exist at start). An error is the record's line and what is wrong.
fn exists(
    record: &InputRecord,
    stream: &str,
    existing: &ExistingStreams,
    listed: &[String],
) -> Result<(), (usize, String)> {
    if *existing == ExistingStreams::Any || listed.iter().any(|s| s == stream) {
        return Ok(());
    }
    Err((
        record.line,
        format!(
            "stream `{}` does not exist: with --streams listed, name it with --with-stream",
            escape_controls(stream)
        ),
    ))
}

/// The stream `record` goes to: its own, its subscription's, or the first subscription's. An
/// error is the record's line and what is wrong.
fn stream_of(record: &InputRecord, app: &AppSpec) -> Result<String, (usize, String)> {
    let bad = |message: String| (record.line, message);
    let names = || {
        let all: Vec<_> = app.subscriptions.iter().map(|s| s.name.as_str()).collect();
        all.join(", ")
    };
    match (&record.subscription, &record.stream) {
        (Some(name), stream) => {
            let spec = app.subscriptions.iter().find(|s| &s.name == name);
            let spec = spec.ok_or_else(|| {
                bad(format!(
                    "no subscription `{name}` in the component (it has: {})",
                    names()
                ))
            })?;
            match stream {
                Some(stream) if *stream != spec.stream => Err(bad(format!(
                    "subscription `{name}` reads `{}`, not `{stream}`",
                    spec.stream
                ))),
                _ => Ok(spec.stream.clone()),
            }
        }
        (None, Some(stream)) => Ok(stream.clone()),
        (None, None) => app
            .subscriptions
            .first()
            .map(|s| s.stream.clone())
            .ok_or_else(|| {
                bad("the component subscribes to no stream: name one with `stream`".into())
            }),
    }
}

/// Every stream whose records are read back: every stream that exists (with any stream
/// existing, every one written to), and those the expectations name.
fn watched(app: &TestApp, expected: &Expectations) -> BTreeSet<String> {
    let published = expected.publishes.iter().map(|p| p.stream.clone());
    (app.stream_names().into_iter())
        .chain(published)
        .chain(expected.streams.iter().cloned())
        .collect()
}

/// Publishes `record` to `stream` and delivers what is due.
async fn publish(
    app: &mut TestApp,
    record: &InputRecord,
    stream: String,
) -> Result<Sent, TestAppError> {
    let key = record.key();
    let outgoing = OutgoingRecord {
        partition_key: key.clone(),
        payload: record.payload.clone(),
        headers: record.stream_headers(),
    };
    let published = app.publish_record(&stream, outgoing).await?;
    Ok(Sent {
        stream,
        sequence: published.sequence_number,
        key,
    })
}

/// Moves paused time on while copies (`retry_after`, counted retries) are waiting, so that
/// they are delivered.
async fn drain(app: &mut TestApp) -> Result<(), TestAppError> {
    for _ in 0..DRAIN_STEPS {
        if pending(app) == 0 {
            break;
        }
        app.advance(DRAIN_STEP).await?;
    }
    Ok(())
}

fn pending(app: &TestApp) -> usize {
    let names = app.app().subscriptions.iter().map(|s| s.name.as_str());
    names
        .filter_map(|name| app.subscriber(name).ok())
        .map(|view| view.pending_copies())
        .sum()
}

/// What happened, read from the app.
fn collect(
    app: &TestApp,
    existing: &ExistingStreams,
    sent: Vec<Sent>,
    expected: &Expectations,
) -> Result<Observed, TestAppError> {
    let spec = app.app();
    let mut subscriptions = Vec::new();
    let mut calls = Vec::new();
    for subscription in &spec.subscriptions {
        let view = app.subscriber(&subscription.name)?;
        calls.extend_from_slice(view.reports());
        subscriptions.push(SubscriptionState {
            name: subscription.name.clone(),
            stream: subscription.stream.clone(),
            checkpoint: view.checkpoint().map(str::to_owned),
            held_at: view.held_at().map(str::to_owned),
            pending_copies: view.pending_copies(),
        });
    }
    let written = written(app, &watched(app, expected), &sent);
    Ok(Observed {
        app: format!("{} {}", spec.name, spec.version),
        subscriptions,
        sent,
        calls,
        written,
        refused: app.publish_notes().refused(),
        unlisted: app.publish_notes().unlisted(),
        existing: existing.clone(),
        logs: app.logs(),
    })
}

/// The records of `streams` the component wrote: neither an input record nor one of the
/// runtime's own (a copy or a dead letter, which carry the host's headers, and which no
/// component can write).
fn written(app: &TestApp, streams: &BTreeSet<String>, sent: &[Sent]) -> Vec<Written> {
    let inputs: BTreeSet<_> = sent.iter().map(|s| s.sequence.as_str()).collect();
    let mut out = Vec::new();
    for stream in streams {
        for record in app.stream(stream) {
            let headers = record.headers();
            let runtime_own = headers.iter().any(|h| envelope::is_reserved(&h.name));
            if inputs.contains(record.sequence_number.as_str()) || runtime_own {
                continue;
            }
            out.push(Written {
                by: app.publish_notes().written_by(&record.sequence_number),
                stream: stream.clone(),
                key: record.partition_key.clone(),
                payload: record.payload(),
                headers,
            });
        }
    }
    out
}
