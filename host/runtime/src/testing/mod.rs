//! Testing: run a compiled component with [`TestApp`] against in-process streams, in paused time.
//!
//! The transport has one shard per stream and sequence numbers shaped like Kinesis's. It
//! consults no lease store, and a held record does not come back: exactly the semantics of a
//! single run of the real host. Everything else is the real runtime: the same component
//! loading, sandbox, batching and settlement as on Kinesis.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ruststream_runtime::testing::TestAppError> {
//! use ruststream_runtime::{Outcome, TestApp};
//!
//! let mut app = TestApp::start("settlement.wasm").await?;
//! app.publish("ledger", &serde_json::json!({"id": 1, "amount": 0})).await?;
//! let book = app.subscriber("book")?;
//! assert_eq!(book.outcomes(), [Outcome::Drop]);
//! assert!(book.checkpoint().is_some());
//! # Ok(()) }
//! ```
//!
//! Which streams exist is [`ExistingStreams`]: by default every stream, as in an account
//! holding every stream the component names (read and dead-letter streams from the start, any
//! other from the first write to it); or only a list of them, with every stream the
//! component reads or dead-letters into checked against it at start. Every publish the
//! component is refused, for whatever reason, is noted with its subscription and record
//! ([`TestApp::publish_notes`]).
//!
//! [`TestApp::swap`] replaces the component with another version of the same app between two
//! calls, as `ruststream dev --watch` does on every rebuild: the streams, the checkpoints and
//! the held records stay, subscriptions the new version adds start, and those it drops stop.

mod clock;
mod streams;

pub use clock::ManualClock;

/// `component` nested, byte for byte, in a component that declares its imports and re-exports
/// its exports: the layout a composition tool such as `wac` gives, where `handle` is lifted in
/// a child component. The host's adapter goes
/// [beside](crate::component::AdapterRoute::Beside) such a component rather than into it.
/// `None` when its top level is laid out in a way the wrapper does not copy (imports after
/// definitions, module or value imports or exports).
pub fn nested_component(component: &[u8]) -> Option<Vec<u8>> {
    crate::component::adapter::nest(component).ok()
}
pub use streams::{InProcessStreams, SHARD_ID, StoredRecord};

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::app::{AppSpec, MaxRecordAge, StartPosition, SubscriptionSpec};
use crate::clock::Clock;
use crate::component::{AdapterRoute, HandleAdapter, RuntimeConfig};
use crate::component::{CallForm, LoadError, LoadedComponent, Runtime, RuntimeError};
use crate::log::{LogLine, LogSink};
use crate::outcome::Outcome;
use crate::pipeline::{DeliveryReport, PipelineEnv, ShardPipeline};
use crate::publish::{PublishError, PublishNotes, derived_partition_key};
use crate::record::{Header, OutgoingRecord, Published};
use crate::tenant::{Tenant, TenantError};
use ruststream_common::escape::escape_controls;
use ruststream_common::sync::lock;

/// Where paused time starts: 2026-01-01T00:00:00Z.
const START_MS: u64 = 1_767_225_600_000;

/// Rounds of delivery [`TestApp::settle`] allows before it decides the app never settles
/// (a handler that publishes to its own stream on every record, say).
const MAX_SETTLE_ROUNDS: usize = 10_000;

/// What can go wrong driving a [`TestApp`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestAppError {
    /// The component was refused.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The component subscribes to or dead-letters into a stream its tenant is not granted.
    #[error(transparent)]
    Refused(#[from] TenantError),
    /// The wasm runtime could not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A record could not be published.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// A value could not be encoded as JSON.
    #[error("cannot encode the record as JSON")]
    Encode(#[from] serde_json::Error),
    /// No subscriber (or stream read by one subscriber) has this name.
    #[error("no subscriber or stream named `{0}` in the component")]
    UnknownSubscriber(String),
    /// Delivery went on for this many rounds without settling.
    #[error(
        "the app did not settle after {0} rounds of delivery: a handler keeps producing records"
    )]
    NeverSettles(usize),
    /// Streams the component reads or dead-letters into are not among the streams that
    /// exist ([`ExistingStreams::Listed`]).
    #[error("{}", missing_streams(.0))]
    MissingStreams(Vec<MissingStream>),
    /// A swap offered a component declaring another app than the running one.
    #[error(
        "cannot swap app `{running}` for app `{offered}`: a new version must keep the app's name"
    )]
    Renamed {
        /// The app running.
        running: String,
        /// The app the refused component declares.
        offered: String,
    },
}

/// A stream a component needs that does not exist, and what it needs it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingStream {
    /// The stream.
    pub stream: String,
    /// What for: `read by `book``, `dead letters of `book``, ...
    pub needed_as: String,
}

fn missing_streams(missing: &[MissingStream]) -> String {
    let named: Vec<_> = (missing.iter())
        .map(|m| format!("`{}` ({})", escape_controls(&m.stream), m.needed_as))
        .collect();
    format!(
        "streams the component needs do not exist (they are not among the streams listed): {}",
        named.join(", ")
    )
}

/// Which streams exist for a [`TestApp`]'s component: what a host's account would hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExistingStreams {
    /// Every stream: those the component reads and dead-letters into exist from the start,
    /// any other from the first write to it (by the component, the runtime or the test), so
    /// a publish is never refused for a missing stream.
    #[default]
    Any,
    /// Only these, and those made with [`TestApp::create_stream`]: a write to any other is
    /// refused with `stream-not-found`, and a component reading or dead-lettering into a
    /// stream not among them does not start ([`TestAppError::MissingStreams`]).
    Listed(BTreeSet<String>),
}

impl From<LoadError> for TestAppError {
    fn from(error: LoadError) -> Self {
        Self::Load(Box::new(error))
    }
}

/// Builds a [`TestApp`] with non-default settings.
pub struct TestAppBuilder {
    component: PathBuf,
    runtime: RuntimeConfig,
    tenant: Tenant,
    max_record_ages: HashMap<String, MaxRecordAge>,
    existing: ExistingStreams,
    through_handle: bool,
}

impl TestAppBuilder {
    /// Calls the component through `handle`, one record per call, even if it exports the
    /// batch fast path: the path a Python or JavaScript component takes (through the host's
    /// adapter, [`LoadedComponent::handle_adapted`], which wraps it whatever
    /// [`RuntimeConfig::handle_adapter`] says).
    pub fn through_handle(mut self) -> Self {
        self.through_handle = true;
        self
    }

    /// Which streams exist (default: [`ExistingStreams::Any`]).
    pub fn streams(mut self, existing: ExistingStreams) -> Self {
        self.existing = existing;
        self
    }

    /// Engine settings (deadlines, fuel, stack size) and the compiler. The default compiles in
    /// this process ([`RuntimeConfig::in_process`]): a tenant testing its own component trusts
    /// it, and a test binary does not serve the compile worker. A program that runs components
    /// it does not trust (as `ruststream dev` does) passes a config with the worker here.
    /// Whatever `config` says of compute threads, calls run on the test's own executor
    /// ([`Compute::Inline`](crate::cpu::Compute::Inline)), so paused time reaches them.
    pub fn runtime(mut self, config: RuntimeConfig) -> Self {
        self.runtime = config;
        self
    }

    /// The tenant running the component: its grants and limits (default: a trusted tenant
    /// granted every stream, with default limits).
    pub fn tenant(mut self, tenant: Tenant) -> Self {
        self.tenant = tenant;
        self
    }

    /// Gives up on `subscriber`'s records once they are older than `max` (from the arrival of
    /// the record a chain of copies started from), as an operator's `maximum_record_age` does
    /// on a host.
    pub fn max_record_age(mut self, subscriber: &str, max: MaxRecordAge) -> Self {
        self.max_record_ages.insert(subscriber.to_owned(), max);
        self
    }

    /// Loads the component and opens its subscriptions.
    ///
    /// # Errors
    /// When the runtime cannot start or the component is refused, and
    /// [`TestAppError::MissingStreams`] when streams are listed and one the component reads
    /// or dead-letters into is not among them.
    pub async fn start(self) -> Result<TestApp, TestAppError> {
        let mut config = self.runtime.inline();
        if self.through_handle {
            config.handle_adapter = HandleAdapter::All;
        }
        let runtime = Runtime::new(config)?;
        let tenant = Arc::new(self.tenant);
        let log = LogSink::capturing();
        let notes = PublishNotes::default();
        let component = LoadedComponent::from_file_noting(
            &runtime,
            &self.component,
            tenant.policy(),
            &log,
            Some(&notes),
        )
        .await?;
        let component = match self.through_handle {
            true => component.through_handle(),
            false => component,
        };
        tenant.admit(&component)?;
        let clock = Arc::new(ManualClock::new(START_MS));
        let streams = match &self.existing {
            ExistingStreams::Any => InProcessStreams::creating_on_write(clock.clone()),
            ExistingStreams::Listed(listed) => {
                let streams = InProcessStreams::new(clock.clone());
                listed.iter().for_each(|stream| streams.create(stream));
                streams
            }
        };
        let mut app = TestApp {
            runtime,
            component,
            tenant,
            streams: Arc::new(streams),
            clock,
            log,
            reports: Arc::default(),
            notes,
            readers: Vec::new(),
            max_record_ages: self.max_record_ages,
        };
        app.needs_streams_of(&app.component)?;
        let env = app.pipeline_env(&app.component);
        let readers = (app.component.app().subscriptions.iter())
            .map(|spec| app.open(&app.component, spec, &env))
            .collect();
        app.readers = readers;
        Ok(app)
    }
}

fn start_index(streams: &InProcessStreams, spec: &SubscriptionSpec) -> usize {
    let records = streams.records(&spec.stream);
    match &spec.start {
        Some(StartPosition::Horizon) => 0,
        Some(StartPosition::AtTimestamp(ms)) => records
            .iter()
            .position(|r| r.arrival_ms >= *ms)
            .unwrap_or(records.len()),
        Some(StartPosition::AtSequence {
            sequence_number, ..
        }) => records
            .iter()
            .position(|r| r.sequence_number == *sequence_number)
            .unwrap_or(records.len()),
        Some(StartPosition::Latest) | None => records.len(),
    }
}

/// A compiled component running against in-process streams in paused time.
pub struct TestApp {
    /// The runtime every version of the component is loaded with.
    runtime: Runtime,
    component: LoadedComponent,
    tenant: Arc<Tenant>,
    streams: Arc<InProcessStreams>,
    clock: Arc<ManualClock>,
    log: LogSink,
    reports: Arc<Mutex<Vec<DeliveryReport>>>,
    /// Every publish the component was refused, and who wrote each record it published.
    notes: PublishNotes,
    readers: Vec<Reader>,
    /// The operator's maximum record ages, by subscriber.
    max_record_ages: HashMap<String, MaxRecordAge>,
}

struct Reader {
    next: usize,
    pipeline: ShardPipeline,
}

impl TestApp {
    /// Loads the component file at `component` with default settings.
    ///
    /// # Errors
    /// When the component is refused; see [`LoadError`].
    pub async fn start(component: impl AsRef<Path>) -> Result<Self, TestAppError> {
        Self::builder(component).start().await
    }

    /// A builder for non-default limits or grants.
    pub fn builder(component: impl AsRef<Path>) -> TestAppBuilder {
        TestAppBuilder {
            component: component.as_ref().to_owned(),
            // In process: a tenant testing its own code trusts it (see `runtime`).
            runtime: RuntimeConfig::in_process(),
            tenant: Tenant::trusted("test"),
            max_record_ages: HashMap::new(),
            existing: ExistingStreams::default(),
            through_handle: false,
        }
    }

    /// The tenant running the component: quarantine status, `resume`.
    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// The app the component declared.
    pub fn app(&self) -> &AppSpec {
        self.component.app()
    }

    /// How the host calls the component: in batches (`handle-batch`), or one record per
    /// `handle` call.
    pub fn component_form(&self) -> CallForm {
        self.component.form()
    }

    /// Where the host's adapter went, if it calls `handle` inside the component, once per
    /// record of a batch ([`LoadedComponent::handle_adapter_route`]).
    pub fn component_adapter_route(&self) -> Option<AdapterRoute> {
        self.component.handle_adapter_route()
    }

    /// Creates a stream. Subscribed and dead-letter streams exist from the start, and with
    /// [`ExistingStreams::Any`] every other stream from its first write: this matters for
    /// [`ExistingStreams::Listed`], where it adds `stream` to the list.
    pub fn create_stream(&self, stream: &str) {
        self.streams.create(stream);
    }

    /// The names of every stream that exists, in name order: with [`ExistingStreams::Any`],
    /// those the component reads and dead-letters into and every stream written to.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams.names()
    }

    /// What the component's publishes came to: each one refused (a missing stream, a grant,
    /// the size limit, the write quota, a reserved header, an outage), by subscription and by
    /// the record the call was on, counted by stream and reason; and who wrote each record a
    /// publish put in a stream.
    pub fn publish_notes(&self) -> &PublishNotes {
        &self.notes
    }

    /// Publishes `value` as JSON (partition key derived from the payload), then delivers
    /// everything that is due.
    ///
    /// # Errors
    /// When the value cannot be encoded, the stream does not exist, or the app never settles.
    pub async fn publish<T: Serialize + ?Sized>(
        &mut self,
        stream: &str,
        value: &T,
    ) -> Result<Published, TestAppError> {
        self.publish_raw(stream, serde_json::to_vec(value)?).await
    }

    /// Publishes every value as JSON before delivering anything, so they reach the component
    /// together, in one batch.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_batch<T: Serialize>(
        &mut self,
        stream: &str,
        values: &[T],
    ) -> Result<Vec<Published>, TestAppError> {
        let mut published = Vec::with_capacity(values.len());
        for value in values {
            let record = plain_record(serde_json::to_vec(value)?, &[]);
            published.push(self.streams.append(stream, &record)?);
        }
        self.settle().await?;
        Ok(published)
    }

    /// Publishes `data` as is, then delivers everything that is due.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_raw(
        &mut self,
        stream: &str,
        data: impl Into<Vec<u8>>,
    ) -> Result<Published, TestAppError> {
        let record = plain_record(data.into(), &[]);
        self.publish_record(stream, record).await
    }

    /// Publishes `value` as JSON with user headers (written in an `RSK2` envelope).
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_with_headers<T: Serialize + ?Sized>(
        &mut self,
        stream: &str,
        value: &T,
        headers: &[(&str, &str)],
    ) -> Result<Published, TestAppError> {
        let record = plain_record(serde_json::to_vec(value)?, headers);
        self.publish_record(stream, record).await
    }

    /// Publishes a fully specified record, then delivers everything that is due.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub async fn publish_record(
        &mut self,
        stream: &str,
        record: OutgoingRecord,
    ) -> Result<Published, TestAppError> {
        let published = self.streams.append(stream, &record)?;
        self.settle().await?;
        Ok(published)
    }

    /// Moves paused time forward by `by`, delivering each delayed record at its due time.
    ///
    /// # Errors
    /// When the app never settles.
    pub async fn advance(&mut self, by: Duration) -> Result<(), TestAppError> {
        let target = self.clock.now_ms().saturating_add(by.as_millis() as u64);
        while let Some(due) = self.next_due_ms().filter(|due| *due <= target) {
            self.move_clock_to(due);
            self.settle().await?;
        }
        self.move_clock_to(target);
        self.settle().await
    }

    /// Delivers every record that is readable and due, until nothing moves.
    ///
    /// # Errors
    /// [`TestAppError::NeverSettles`] when handlers keep producing records to read.
    pub async fn settle(&mut self) -> Result<(), TestAppError> {
        for _ in 0..MAX_SETTLE_ROUNDS {
            for reader in &mut self.readers {
                let stream = reader.pipeline.subscription().stream.clone();
                let new = self.streams.read_from(&stream, reader.next);
                if !new.is_empty() {
                    reader.next += new.len();
                    let deliveries = new.iter().map(StoredRecord::to_delivery).collect();
                    reader.pipeline.deliver(deliveries).await;
                }
                reader.pipeline.poll_due().await;
            }
            // What a round did that needs another round shows as records still to read: a
            // handler publishing, a copy, a dead letter, on any reader's stream.
            let unread = self.readers.iter().any(|reader| {
                self.streams.len(&reader.pipeline.subscription().stream) > reader.next
            });
            if !unread {
                return Ok(());
            }
        }
        Err(TestAppError::NeverSettles(MAX_SETTLE_ROUNDS))
    }

    /// Makes the next `count` writes to `stream` by the component or the runtime (a counted
    /// copy, a dead letter) fail as an unavailable stream would. The test's own `publish`
    /// calls are not affected.
    pub fn fail_next_publishes(&self, stream: &str, count: u32) {
        self.streams.fail_next_publishes(stream, count);
    }

    /// Repositions a subscriber's shard, as the host's seek does, and starts its checkpoint
    /// bookkeeping afresh; then delivers what is due.
    ///
    /// # Errors
    /// When no subscriber matches, or the app never settles.
    pub async fn seek(
        &mut self,
        subscriber: &str,
        position: StartPosition,
    ) -> Result<(), TestAppError> {
        let index = self.reader_index(subscriber)?;
        let reader = &mut self.readers[index];
        let mut spec = reader.pipeline.subscription().clone();
        spec.start = Some(position);
        reader.next = start_index(&self.streams, &spec);
        reader.pipeline.reset(None);
        self.settle().await
    }

    /// Hot-swaps the app to another version of it, the component file at `component`, as a
    /// developer's rebuild would: loaded with the same runtime and tenant, and admitted.
    /// Streams, paused time, logs and delivery reports carry over. Then, by the subscriptions
    /// the new version declares:
    ///
    /// - one of the same name and stream as a running one takes over its shard between two
    ///   calls: checkpoint, held record, waiting and unsent copies and read position are kept,
    ///   and the new version's settings (retries, batch) apply from the next call;
    /// - one only the new version declares starts as at [`start`](Self::start), at its start
    ///   position;
    /// - a running one the new version does not declare stops: its reader and any copy it
    ///   still had pending are dropped.
    ///
    /// Then delivers what is due, so a new subscription starting at the horizon catches up.
    ///
    /// # Errors
    /// When the new version is refused (see [`LoadError`]), is not admitted for the tenant,
    /// declares another app name ([`TestAppError::Renamed`]) or, with
    /// [`ExistingStreams::Listed`], reads or dead-letters into a stream that does not exist
    /// ([`TestAppError::MissingStreams`]): then nothing changed and the running version goes
    /// on. [`TestAppError::NeverSettles`] after the swap.
    pub async fn swap(&mut self, component: impl AsRef<Path>) -> Result<(), TestAppError> {
        let next = LoadedComponent::from_file_noting(
            &self.runtime,
            component,
            self.tenant.policy(),
            &self.log,
            Some(&self.notes),
        )
        .await?;
        self.install(next).await
    }

    /// As [`swap`](Self::swap), with the component's bytes, named `name` in log lines.
    ///
    /// # Errors
    /// As [`swap`](Self::swap).
    pub async fn swap_bytes(&mut self, name: &str, bytes: Vec<u8>) -> Result<(), TestAppError> {
        let next = LoadedComponent::from_bytes_noting(
            &self.runtime,
            name,
            bytes,
            self.tenant.policy(),
            &self.log,
            Some(&self.notes),
        )
        .await?;
        self.install(next).await
    }

    /// Puts a loaded version in place of the running one; see [`swap`](Self::swap).
    async fn install(&mut self, next: LoadedComponent) -> Result<(), TestAppError> {
        self.tenant.admit(&next)?;
        let (running, offered) = (&self.component.app().name, &next.app().name);
        if running != offered {
            return Err(TestAppError::Renamed {
                running: running.clone(),
                offered: offered.clone(),
            });
        }
        self.needs_streams_of(&next)?;
        let env = self.pipeline_env(&next);
        let mut previous = std::mem::take(&mut self.readers);
        self.readers = (next.app().subscriptions.iter())
            .map(|spec| self.take_over(&mut previous, &next, spec, &env))
            .collect();
        // What is left of the previous readers are subscriptions the new version dropped.
        drop(previous);
        let old = std::mem::replace(&mut self.component, next);
        // The old version's code goes only now that no pipeline can call into it.
        drop(old);
        self.settle().await
    }

    /// The reader of `spec` for version `next`: the running reader of the same subscription
    /// (name and stream), taken out of `previous` and swapped over, or a new one.
    fn take_over(
        &self,
        previous: &mut Vec<Reader>,
        next: &LoadedComponent,
        spec: &SubscriptionSpec,
        env: &PipelineEnv,
    ) -> Reader {
        let same = previous.iter().position(|reader| {
            let running = reader.pipeline.subscription();
            running.name == spec.name && running.stream == spec.stream
        });
        let Some(index) = same else {
            return self.open(next, spec, env);
        };
        let mut reader = previous.swap_remove(index);
        self.create_streams(spec);
        (reader.pipeline).swap(next, self.operated(spec), env.clone());
        reader
    }

    /// A reader of `spec`'s stream for `component`, positioned at the subscription's start.
    fn open(
        &self,
        component: &LoadedComponent,
        spec: &SubscriptionSpec,
        env: &PipelineEnv,
    ) -> Reader {
        self.create_streams(spec);
        let mut pipeline =
            ShardPipeline::new(component, self.operated(spec), SHARD_ID, None, env.clone());
        pipeline.keep_publish_notes(Some(self.notes.clone()));
        Reader {
            next: start_index(&self.streams, spec),
            pipeline,
        }
    }

    /// `spec` under the operator's settings of this app.
    fn operated(&self, spec: &SubscriptionSpec) -> Arc<SubscriptionSpec> {
        let mut spec = spec.clone();
        if let Some(max) = self.max_record_ages.get(&spec.name) {
            spec.max_record_age = Some(max.clone());
        }
        Arc::new(spec)
    }

    /// Creates the streams a subscription reads and dead-letters into (with listed streams,
    /// [`needs_streams_of`](Self::needs_streams_of) found every one of them already there).
    fn create_streams(&self, spec: &SubscriptionSpec) {
        for (stream, _) in self.needed_streams(spec) {
            self.streams.create(stream);
        }
    }

    /// The streams `spec` reads and dead-letters into (its own dead letters, and the
    /// operator's past the maximum record age), each with what it is needed as.
    fn needed_streams<'a>(&'a self, spec: &'a SubscriptionSpec) -> Vec<(&'a str, String)> {
        let name = escape_controls(&spec.name);
        let mut needed = vec![(spec.stream.as_str(), format!("read by `{name}`"))];
        if let Some(dead_letter) = &spec.retry.dead_letter {
            needed.push((dead_letter, format!("dead letters of `{name}`")));
        }
        let aged = self.max_record_ages.get(&spec.name);
        if let Some(dead_letter) = aged.and_then(|max| max.dead_letter.as_ref()) {
            let needed_as = format!("dead letters of `{name}` past its maximum record age");
            needed.push((dead_letter, needed_as));
        }
        needed
    }

    /// Checks that every stream `component` reads or dead-letters into exists: always, with
    /// [`ExistingStreams::Any`], where each is created.
    fn needs_streams_of(&self, component: &LoadedComponent) -> Result<(), TestAppError> {
        let specs = component.app().subscriptions.iter();
        let needed = specs.flat_map(|spec| self.needed_streams(spec));
        let missing: Vec<_> = (needed.filter(|(stream, _)| !self.streams.exists(stream)))
            .map(|(stream, needed_as)| MissingStream {
                stream: stream.to_owned(),
                needed_as,
            })
            .collect();
        if missing.is_empty() || self.streams.creates_on_write() {
            return Ok(());
        }
        Err(TestAppError::MissingStreams(missing))
    }

    /// What `component`'s pipelines run in: this app's streams, clock, log and reports.
    fn pipeline_env(&self, component: &LoadedComponent) -> PipelineEnv {
        let reports = self.reports.clone();
        PipelineEnv {
            component: component.env(
                self.tenant.policy().clone(),
                self.streams.clone(),
                self.clock.clone(),
                self.log.clone(),
            ),
            tenant: self.tenant.clone(),
            observer: Some(Arc::new(move |report: &DeliveryReport| {
                lock(&reports).push(report.clone());
            })),
            calls: None,
        }
    }

    /// Paused time elapsed since the app started.
    pub fn elapsed(&self) -> Duration {
        Duration::from_millis(self.clock.now_ms() - START_MS)
    }

    /// What a subscriber (by subscriber name, or by stream when one subscriber reads it) did.
    ///
    /// # Errors
    /// [`TestAppError::UnknownSubscriber`] when nothing matches `name`.
    pub fn subscriber(&self, name: &str) -> Result<SubscriberView<'_>, TestAppError> {
        let reader = &self.readers[self.reader_index(name)?];
        let subscriber = reader.pipeline.subscription().name.clone();
        let reports = lock(&self.reports)
            .iter()
            .filter(|r| r.subscriber == subscriber)
            .cloned()
            .collect();
        Ok(SubscriberView {
            pipeline: &reader.pipeline,
            reports,
        })
    }

    /// Every record `stream` holds, copies and dead letters included.
    pub fn stream(&self, stream: &str) -> Vec<StoredRecord> {
        self.streams.records(stream)
    }

    /// Every log line so far: the component's and the runtime's.
    pub fn logs(&self) -> Vec<LogLine> {
        self.log.captured()
    }

    /// Log lines whose message contains `text`.
    pub fn logs_containing(&self, text: &str) -> Vec<LogLine> {
        self.logs()
            .into_iter()
            .filter(|line| line.message.contains(text))
            .collect()
    }

    fn reader_index(&self, name: &str) -> Result<usize, TestAppError> {
        let by_name = self
            .readers
            .iter()
            .position(|r| r.pipeline.subscription().name == name);
        let by_stream = || {
            let mut on_stream = self
                .readers
                .iter()
                .enumerate()
                .filter(|(_, r)| r.pipeline.subscription().stream == name)
                .map(|(i, _)| i);
            on_stream.next().filter(|_| on_stream.next().is_none())
        };
        by_name
            .or_else(by_stream)
            .ok_or_else(|| TestAppError::UnknownSubscriber(name.to_owned()))
    }

    fn next_due_ms(&self) -> Option<u64> {
        self.readers
            .iter()
            .filter_map(|r| r.pipeline.next_due_ms())
            .min()
    }

    fn move_clock_to(&self, at_ms: u64) {
        let now = self.clock.now_ms();
        if at_ms > now {
            self.clock.advance(Duration::from_millis(at_ms - now));
        }
    }
}

/// What one subscriber did in a [`TestApp`].
pub struct SubscriberView<'a> {
    pipeline: &'a ShardPipeline,
    reports: Vec<DeliveryReport>,
}

impl SubscriberView<'_> {
    /// How many times the handler was given a record (each attempt of a copy counts).
    pub fn calls(&self) -> usize {
        self.reports.len()
    }

    /// The settled outcome of each call, in order.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.reports.iter().map(|r| r.outcome).collect()
    }

    /// The attempt number of each call, in order.
    pub fn attempts(&self) -> Vec<u32> {
        self.reports.iter().map(|r| r.attempt).collect()
    }

    /// Every delivery report, in order.
    pub fn reports(&self) -> &[DeliveryReport] {
        &self.reports
    }

    /// Where the shard's checkpoint stands: the last record of the handled prefix.
    pub fn checkpoint(&self) -> Option<&str> {
        self.pipeline.checkpoint()
    }

    /// The first unhandled record, in front of which the checkpoint is held.
    pub fn held_at(&self) -> Option<&str> {
        self.pipeline.held_at()
    }

    /// How many times the component instance was replaced after a failed call.
    pub fn instance_replacements(&self) -> u64 {
        self.pipeline.instance_replacements()
    }

    /// How many counted copies of other subscriptions it moved past without a call.
    pub fn foreign_copies(&self) -> u64 {
        self.pipeline.outcomes().foreign_copies
    }

    /// How many copies it owes a stream: waiting for their due time or being published.
    pub fn pending_copies(&self) -> usize {
        self.pipeline.pending_copies()
    }
}

/// A record as a producer would write it: key derived from the payload.
fn plain_record(payload: Vec<u8>, headers: &[(&str, &str)]) -> OutgoingRecord {
    OutgoingRecord {
        partition_key: derived_partition_key(&payload),
        payload,
        headers: headers.iter().map(|(n, v)| Header::new(*n, *v)).collect(),
    }
}
