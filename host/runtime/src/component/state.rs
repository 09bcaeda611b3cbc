//! The per-instance host state and the host's imports: `log`, `publish` and the outcome
//! reports (`record-outcome`, or a board: `board.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use wasmtime::component::{HasSelf, Linker, ResourceTable, WasmList};
use wasmtime::{AsContext as _, ResourceLimiter, StoreContext, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::adapter::{self, SHARE_IMPORT};
use super::bindings::ruststream::handler::{host, types};
use super::board::{self, Board};
use super::imports::{self, DeniedHttp};
use super::output::{LogBudget, OutputCapture};
use super::progress::CallProgress;
use super::trap::{CallStopped, MemoryLimitExceeded, TableLimitExceeded};
use crate::cpu::CallClock;
use crate::env::Env;
use crate::envelope::refused_on_publish;
use crate::limits::TABLE_ELEMENT_BYTES;
use crate::log::{Level, LogLine, LogTags, Origin};
use crate::outcome::Outcome;
use crate::publish::{InstanceNotes, PublishLog, RecordedPublish};
use crate::publish::{PublishError, check_size, derived_partition_key};
use crate::record::{Deliveries, Delivery, Header, OutgoingRecord};
use crate::stop::{Stop, cutting};
use ruststream_common::escape::{one_line, quote};

/// What a call is. Only a `handle-batch` call takes progress reports: one from anywhere else
/// would give the guest a fresh deadline it has not earned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// Instantiating (start functions, `_initialize`) or `describe`: no records.
    Load,
    /// A `handle` call: one record, whose outcome it returns.
    Handle,
    /// A `handle-batch` call: records in order, outcomes reported as it goes.
    Batch,
    /// A run of `handle` calls made inside the component by the host's adapter
    /// (`adapter/`): every line is about the record of the `handle` call under way, and
    /// only the adapter's board is read, never the component's own reports.
    Records,
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Load => "loading",
            Self::Handle => "handle",
            Self::Batch => "handle-batch",
            Self::Records => "the host's handle loop",
        })
    }
}

/// What a call is about, so the host can tag what the guest logs.
pub(crate) struct CallScope {
    pub(crate) stream: Arc<str>,
    pub(crate) shard_id: Arc<str>,
    pub(crate) deliveries: Deliveries,
}

/// The call under way: its records, and the tags of lines about them.
struct CallTags {
    tags: LogTags,
    deliveries: Deliveries,
    /// A run of `handle` calls: every line is about the record of the call under way.
    handle: bool,
}

impl CallTags {
    /// The delivery a line the guest tagged `index` (if at all) is about, `under_way` being
    /// the record the call is on: record `index` of a batch; the record of the `handle` call
    /// under way whatever it says.
    fn delivery(&self, index: Option<u32>, under_way: usize) -> Option<&Delivery> {
        if self.handle {
            return self.deliveries.get(under_way);
        }
        self.deliveries.get(usize::try_from(index?).ok()?)
    }
}

/// Everything a component instance's store holds.
pub(crate) struct HostState {
    wasi: WasiCtx,
    /// `wasi:http`, linked for components that import it; every request denied.
    http: DeniedHttp,
    table: ResourceTable,
    pub(crate) env: Env,
    /// Tags of the lines it logs outside a call (instantiating, describing).
    tags: LogTags,
    call: Option<CallTags>,
    /// The call under way; its deadline is read by the epoch callback.
    progress: Option<CallProgress>,
    /// The own time of this instance's calls, which their deadlines are charged.
    clock: CallClock,
    /// Whether the call under way takes progress reports: a `handle-batch` call only.
    takes_reports: bool,
    /// Whether the call under way takes the host adapter's board: a `Records` call only.
    takes_adapter_board: bool,
    /// The lease keeper's signal for the call under way: once the lease is lost the call
    /// stops at its next check and publishes nothing more.
    stop: Option<watch::Receiver<Option<Stop>>>,
    /// The outcomes the guest reported during the call under way by `record-outcome`, in order.
    outcomes: Vec<Outcome>,
    /// The board the guest shared for the call under way, if it reports there instead.
    board: Option<Board>,
    /// Records in the call under way.
    expected: usize,
    pub(crate) limiter: InstanceLimiter,
    budget: LogBudget,
    stdout: OutputCapture,
    stderr: OutputCapture,
    /// Where the publishes the stream accepted are noted, by the record under way, when a
    /// shadow compares this instance's records (see [`crate::shadow`]).
    pub(crate) publishes: Option<PublishLog>,
    /// Where publishes (refused, and written) are noted, by the record under way, for a tool
    /// that reports them (`TestApp`); none on a serving host, whose log lines say it.
    pub(crate) notes: Option<InstanceNotes>,
}

/// Most random bytes one WASI call may ask for: wasmtime-wasi allocates what is asked on the
/// host (64 MiB by default) before the guest's memory cap is ever consulted. Rust's std asks
/// for 16 bytes at a time.
const MAX_RANDOM_BYTES: u64 = 64 << 10;

impl HostState {
    /// The state of a new instance acting on `env`; `adapter` when the host's adapter is
    /// part of it, whose own memories and core instances the tenant's counts leave out (their
    /// bytes count: they hold the tenant's batch).
    pub(crate) fn new(env: Env, clock: CallClock, adapter: Option<adapter::AdapterRoute>) -> Self {
        let limits = env.policy.limits();
        let (memories, instances) =
            adapter.map_or((0, 0), |route| (route.memories(), route.core_instances()));
        let limiter = InstanceLimiter {
            total_bytes: limits.memory_bytes,
            table_elements: limits.max_table_elements,
            used_bytes: 0,
            counts: wasmtime::StoreLimitsBuilder::new()
                .tables(limits.max_tables)
                .memories(limits.max_memories.saturating_add(memories))
                .instances(limits.max_instances.saturating_add(instances))
                .build(),
        };
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits.max_host_resources);
        let stdout = OutputCapture::default();
        let stderr = OutputCapture::default();
        Self {
            // No preopened directories, no environment, no arguments, no network; stdout and
            // stderr become log lines. Clocks and randomness are the only ambient capabilities.
            wasi: imports::deny_network(&mut WasiCtx::builder())
                .stdout(stdout.clone())
                .stderr(stderr.clone())
                .max_random_size(MAX_RANDOM_BYTES)
                .build(),
            http: DeniedHttp::default(),
            table,
            tags: LogTags::new(env.policy.tenant(), env.component.clone()),
            env,
            call: None,
            progress: None,
            clock,
            takes_reports: false,
            takes_adapter_board: false,
            stop: None,
            outcomes: Vec::new(),
            board: None,
            expected: 0,
            limiter,
            budget: LogBudget::default(),
            stdout,
            stderr,
            publishes: None,
            notes: None,
        }
    }

    /// Prepares a call of `kind` of `records` records (tagged with `scope`; none while
    /// instantiating or describing), each with `per_record` to finish, and its log budget;
    /// `stop` ends it early once it says the lease is lost. Returns its progress, for the
    /// timer that bounds the call from outside.
    pub(crate) fn begin_call(
        &mut self,
        kind: CallKind,
        scope: Option<CallScope>,
        records: usize,
        per_record: Duration,
        stop: Option<watch::Receiver<Option<Stop>>>,
    ) -> CallProgress {
        self.stop = stop;
        let limits = &self.env.policy.limits().log;
        self.budget = LogBudget::for_call(limits, records);
        let cap = limits.call_bytes(records);
        let progress = CallProgress::new(per_record, self.clock.clone());
        // A run of `handle` calls inside the component has no host step between two records
        // to log a record's output as its own: the capture notes whose each write is.
        let split = (kind == CallKind::Records).then(|| progress.clone());
        self.stdout.start_call(cap, split.clone());
        self.stderr.start_call(cap, split);
        self.call = scope.map(|scope| CallTags {
            tags: self.tags.clone().on_shard(scope.stream, scope.shard_id),
            deliveries: scope.deliveries,
            handle: matches!(kind, CallKind::Handle | CallKind::Records),
        });
        self.progress = Some(progress.clone());
        self.takes_reports = kind == CallKind::Batch;
        self.takes_adapter_board = kind == CallKind::Records;
        self.outcomes = Vec::new();
        self.board = None;
        self.expected = records;
        progress
    }

    /// Moves a run of `handle` calls on to record `index`: what the record before wrote to
    /// stdout and stderr is logged as its own, and the record gets a fresh deadline (at the
    /// next check, as a reported record of a batch does); its publishes and log lines are its
    /// own from now on. The host's own report, never the guest's: a `handle` call earns its
    /// record's deadline by returning.
    pub(crate) fn next_handle_record(&mut self, index: usize) {
        if index > 0 {
            self.flush_output("stdout", Level::Info);
            self.flush_output("stderr", Level::Warn);
        }
        if let Some(progress) = &self.progress {
            progress.reported(index.min(self.expected));
        }
    }

    /// Takes `board` as the call's reports, unless there is no `handle-batch` call under way,
    /// a board is shared already or the guest has reported by `record-outcome`.
    pub(crate) fn share_board(&mut self, board: Board) {
        if self.takes_reports && self.board.is_none() && self.outcomes.is_empty() {
            self.board = Some(board);
        }
    }

    /// Takes `board`, lent by the host's adapter, as the call's reports, if a `Records` call
    /// is under way and has none yet.
    pub(crate) fn share_adapter_board(&mut self, board: Board) {
        if self.takes_adapter_board && self.board.is_none() {
            self.board = Some(board);
        }
    }

    /// Whether the record under way is past its deadline, during a call.
    pub(crate) fn past_deadline(&self) -> bool {
        self.progress
            .as_ref()
            .is_some_and(|progress| progress.left(Duration::ZERO).is_zero())
    }

    /// The own clock of this instance's calls.
    pub(crate) fn clock(&self) -> &CallClock {
        &self.clock
    }

    /// Why the call under way must stop now, if it must: the shard's lease was lost, the host
    /// is shutting down, the version was withdrawn.
    pub(crate) fn cut(&self) -> Option<Stop> {
        cutting(self.stop.as_ref())
    }

    /// Ends a call: what it wrote to stdout/stderr becomes log lines (within the budget), and
    /// one warning reports what the caps dropped. Returns the outcomes the guest reported:
    /// `from_board` (what [`board_outcomes`] read) if it shared a board.
    pub(crate) fn end_call(&mut self, from_board: Option<Vec<Outcome>>) -> Vec<Outcome> {
        self.flush_output("stdout", Level::Info);
        self.flush_output("stderr", Level::Warn);
        if self.budget.dropped_any() {
            let mut line = self.tag(
                Level::Warn,
                format!(
                    "log output capped: {} lines ({} bytes) of this call were dropped",
                    self.budget.dropped_lines, self.budget.dropped_bytes
                ),
                None,
            );
            line.origin = Origin::Runtime;
            self.host_line("log-capped", line);
        }
        self.env.policy.host_lines().flush(&self.env.log);
        self.call = None;
        self.progress = None;
        self.takes_reports = false;
        self.takes_adapter_board = false;
        self.stop = None;
        self.board = None;
        let reported = std::mem::take(&mut self.outcomes);
        from_board.unwrap_or(reported)
    }

    /// A line the host logs because of this tenant, within the tenant's host-line budget.
    fn host_line(&self, kind: &'static str, line: LogLine) {
        self.env.policy.host_lines().emit(&self.env.log, kind, line);
    }

    fn flush_output(&mut self, fd: &str, level: Level) {
        let capture = if fd == "stdout" {
            &self.stdout
        } else {
            &self.stderr
        };
        let (parts, dropped) = capture.take_by_record();
        if parts.is_empty() && dropped == 0 {
            return;
        }
        self.budget.dropped_bytes += dropped;
        if dropped > 0 {
            self.budget.dropped_lines += 1;
        }
        for (written_during, bytes) in parts {
            let text = String::from_utf8_lossy(&bytes);
            // Whose output it is: the record under way as it was written, when the capture
            // noted it; a call of one record, and a `handle` call of a run, knows anyway.
            let call = self.call.as_ref();
            let delivery = match written_during {
                Some(index) => call.and_then(|c| c.deliveries.get(index)),
                None => call
                    .filter(|c| c.handle || c.deliveries.len() == 1)
                    .and_then(|c| c.delivery(Some(0), self.under_way())),
            };
            let sequence = delivery.map(|d| d.sequence_number.clone());
            for message in text.lines().filter(|l| !l.trim().is_empty()) {
                if !self.budget.spend(message.len(), self.env.policy.log_rate()) {
                    continue;
                }
                let tags = call.map_or(&self.tags, |c| &c.tags);
                let mut line = tags.line(
                    level,
                    Origin::Guest,
                    sequence.as_deref(),
                    message.to_owned(),
                );
                line.fields.push(("fd".into(), fd.to_owned()));
                self.env.log.emit(line);
            }
        }
    }

    /// The index of the record under way (see [`index_under_way`](Self::index_under_way)).
    fn under_way(&self) -> usize {
        self.index_under_way().map_or(0, |index| index as usize)
    }

    fn tag(&self, level: Level, message: String, record: Option<u32>) -> LogLine {
        let call = self.call.as_ref();
        let sequence = call
            .and_then(|c| c.delivery(record, self.under_way()))
            .map(|d| d.sequence_number.as_str());
        let tags = call.map_or(&self.tags, |c| &c.tags);
        tags.line(level, Origin::Guest, sequence, message)
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.http.view(&mut self.table)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps what an instance holds in all its linear memories and tables together, with errors
/// that say so, rather than a failed `memory.grow` or `table.grow` the guest turns into an
/// indistinguishable abort. A per-memory cap would let a component with several memories hold
/// several times the limit. Counts of instances, tables and memories are wasmtime's own
/// checks (an untyped "resource limit exceeded" error).
pub(crate) struct InstanceLimiter {
    total_bytes: usize,
    table_elements: usize,
    /// Bytes granted so far to every memory and table of the instance.
    used_bytes: usize,
    counts: StoreLimits,
}

impl InstanceLimiter {
    /// Grants growing one memory or table from `current` to `desired` bytes, if the instance's
    /// total stays within the cap.
    fn grow(&mut self, current: usize, desired: usize) -> Result<(), MemoryLimitExceeded> {
        let total = self
            .used_bytes
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.total_bytes {
            return Err(MemoryLimitExceeded {
                desired: total,
                limit: self.total_bytes,
            });
        }
        self.used_bytes = total;
        Ok(())
    }
}

impl ResourceLimiter for InstanceLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(current, desired).map_err(wasmtime::Error::new)?;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Err(wasmtime::Error::new(TableLimitExceeded {
                desired,
                limit: self.table_elements,
            }));
        }
        let bytes = |elements: usize| elements.saturating_mul(TABLE_ELEMENT_BYTES);
        self.grow(bytes(current), bytes(desired))
            .map_err(wasmtime::Error::new)?;
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.counts.instances()
    }

    fn tables(&self) -> usize {
        self.counts.tables()
    }

    fn memories(&self) -> usize {
        self.counts.memories()
    }
}

/// The outcomes on the call's board, if the guest shared one: read after the call returned or
/// trapped, before [`HostState::end_call`].
pub(crate) fn board_outcomes(store: StoreContext<'_, HostState>) -> Option<Vec<Outcome>> {
    let state = store.data();
    let board = state.board.as_ref()?;
    Some(board.outcomes(store, state.expected))
}

/// Reads how far the call got from its board into its progress, which gives the next record
/// a fresh deadline. Runs at each epoch deadline check and whenever the guest calls a host
/// import (it may block there): the times the deadline is looked at. It only reads the store,
/// as wasmtime's hooks may (from wasmtime 49 they get a view that cannot change it).
pub(crate) fn sync_progress(store: impl wasmtime::AsContext<Data = HostState>) {
    let store = store.as_context();
    let state = store.data();
    if let (Some(board), Some(progress)) = (&state.board, &state.progress) {
        progress.reported(board.reported(store.as_context(), state.expected));
    }
}

pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // The sockets come with the rest of WASI, denied by the context (`imports::deny_network`);
    // `wasi:http` (types and outgoing-handler) denies every request (`DeniedHttp`).
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    // Interface by interface: `progress.share-outcomes` is defined by hand, because the
    // generated bindings would copy the list out of the guest, and the board is only useful
    // where the guest keeps writing it.
    types::add_to_linker::<_, HasSelf<_>>(linker, |state| state)?;
    host::add_to_linker::<_, HasSelf<_>>(linker, |state| state)?;
    let mut progress = linker.instance(board::INTERFACE)?;
    progress.func_wrap("share-outcomes", |mut store, (slots,): (WasmList<u64>,)| {
        store.data_mut().share_board(Board::new(slots));
        Ok(())
    })?;
    progress.func_wrap(
        "record-outcome",
        |mut store, (index, outcome): (u32, types::HandlerOutcome)| {
            store.data_mut().record_outcome(index, outcome);
            Ok(())
        },
    )?;
    // The host adapter's (`adapter/`): only a component the host wrapped may import it
    // (`check_imports`), and only the adapter beside the component reaches the import.
    linker
        .root()
        .func_wrap(SHARE_IMPORT, |mut store, (slots,): (WasmList<u64>,)| {
            store.data_mut().share_adapter_board(Board::new(slots));
            Ok(())
        })
}

impl types::Host for HostState {}

impl HostState {
    /// `progress.record-outcome`: record `index`'s outcome, if it is the next one of a
    /// `handle-batch` call that shared no board.
    fn record_outcome(&mut self, index: u32, outcome: types::HandlerOutcome) {
        // Out of order, already reported, past the batch, outside a batch call or with a
        // board: ignored.
        let next = self.outcomes.len();
        if let Some(progress) = &self.progress
            && self.takes_reports
            && self.board.is_none()
            && usize::try_from(index).ok() == Some(next)
            && next < self.expected
        {
            self.outcomes.push(outcome.into());
            progress.reported(next + 1);
        }
    }
}

impl host::Host for HostState {
    fn log(&mut self, line: host::LogLine) -> wasmtime::Result<()> {
        let size = line.message.len()
            + line
                .fields
                .iter()
                .map(|f| f.name.len() + f.value.len())
                .sum::<usize>();
        if !self.budget.spend(size, self.env.policy.log_rate()) {
            return Ok(());
        }
        let mut tagged = self.tag(level(line.level), line.message, line.record);
        tagged.fields = line
            .fields
            .into_iter()
            .map(|field| (field.name, field.value))
            .collect();
        self.env.log.emit(tagged);
        Ok(())
    }

    async fn publish(
        &mut self,
        stream: String,
        partition_key: Option<String>,
        data: Vec<u8>,
        headers: Vec<host::Header>,
    ) -> Result<host::Published, host::PublishError> {
        let record = OutgoingRecord {
            partition_key: partition_key.unwrap_or_else(|| derived_partition_key(&data)),
            payload: data,
            headers: headers
                .into_iter()
                .map(|h| Header::new(h.name.to_ascii_lowercase(), h.value))
                .collect(),
        };
        // The record is handled again (by the lease's next holder) or never counts (a
        // withdrawn version): a publish from here would be a second. The call itself stops
        // at its next check.
        if let Some(stop) = self.cut() {
            return Err(host::PublishError::Unavailable(format!(
                "{}: this call publishes nothing more",
                CallStopped(stop)
            )));
        }
        let noted = self
            .publishes
            .as_ref()
            .map(|_| RecordedPublish::of(&stream, &record));
        let result = match self.admit_publish(&stream, &record) {
            Ok(()) => self.env.publisher.publish(&stream, record).await,
            Err(error) => Err(error),
        };
        if let (Ok(_), Some(log), Some(noted)) = (&result, &self.publishes, noted) {
            log.note(self.record_under_way(), noted);
        }
        match (&result, &self.notes) {
            (Ok(published), Some(notes)) => {
                notes.written(self.delivery_under_way(), &published.sequence_number);
            }
            (Err(error), Some(notes)) => notes.refused(self.delivery_under_way(), &stream, error),
            (_, None) => {}
        }
        result
            .map(|published| host::Published {
                shard_id: published.shard_id,
                sequence_number: published.sequence_number,
            })
            .map_err(|error| self.refused_publish(&stream, error))
    }
}

impl HostState {
    /// The sequence number of the record the call under way is on: the first one not yet
    /// reported (a board is read into the progress on every host call, so it is current).
    fn record_under_way(&self) -> Option<String> {
        let delivery = self.delivery_under_way()?;
        Some(delivery.sequence_number.to_string())
    }

    /// The record the call under way is on (see [`record_under_way`](Self::record_under_way)).
    fn delivery_under_way(&self) -> Option<&Delivery> {
        let under_way = self.index_under_way()?;
        self.call
            .as_ref()?
            .delivery(Some(under_way), under_way as usize)
    }

    /// The index in the call of the record under way: the count reported so far.
    fn index_under_way(&self) -> Option<u32> {
        let index = self
            .progress
            .as_ref()
            .map_or(0, CallProgress::reported_so_far);
        u32::try_from(index).ok()
    }

    /// What a guest publish must pass before anything is sent: the grant, the reserved header
    /// names (the host's, and those readers set on delivery), the record size and the tenant's
    /// write quota.
    fn admit_publish(&self, stream: &str, record: &OutgoingRecord) -> Result<(), PublishError> {
        let policy = &self.env.policy;
        policy.publish_grant().check_publish(stream)?;
        if let Some(reserved) = record.headers.iter().find(|h| refused_on_publish(&h.name)) {
            return Err(PublishError::ReservedHeader(quote(&reserved.name)));
        }
        check_size(record)?;
        policy
            .write_quota()
            .take(self.env.clock.now_ms(), record.stream_size())
            .map_err(|_wait| PublishError::QuotaExceeded(policy.tenant().to_owned()))
    }

    fn refused_publish(&self, stream: &str, error: PublishError) -> host::PublishError {
        let level = match error {
            PublishError::NotPermitted(_) | PublishError::ReservedHeader(_) => Level::Warn,
            _ => Level::Info,
        };
        // About the record the call was on, in a batch too: the guest is not asked to say.
        let record = self.index_under_way();
        let mut line = self.tag(level, format!("publish refused: {error}"), record);
        line.origin = Origin::Runtime;
        line.fields.push(("target_stream".into(), quote(stream)));
        self.host_line("publish-refused", line);
        match error {
            PublishError::StreamNotFound(stream) => host::PublishError::StreamNotFound(stream),
            PublishError::NotPermitted(stream) => host::PublishError::NotPermitted(stream),
            PublishError::RecordTooLarge { size } => host::PublishError::RecordTooLarge(size),
            PublishError::Throttled(_) | PublishError::QuotaExceeded(_) => {
                host::PublishError::Throttled
            }
            PublishError::ReservedHeader(name) => host::PublishError::ReservedHeader(name),
            error @ PublishError::Unavailable { .. } => {
                host::PublishError::Unavailable(one_line(&error))
            }
        }
    }
}

fn level(level: host::Level) -> Level {
    match level {
        host::Level::Trace => Level::Trace,
        host::Level::Debug => Level::Debug,
        host::Level::Info => Level::Info,
        host::Level::Warn => Level::Warn,
        host::Level::Error => Level::Error,
    }
}
