//! The per-instance host state and the host's imports: `log` and `publish`.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::ruststream::handler::{host, types};
use super::instance::InstanceEnv;
use super::output::{LogBudget, OutputCapture};
use super::trap::{MemoryLimitExceeded, TableLimitExceeded};
use crate::log::{Level, LogLine, Origin};
use crate::publish::{PublishError, check_size, derived_partition_key};
use crate::record::{Delivery, Header, OutgoingRecord};

/// What a call is about, so the host can tag what the guest logs.
pub(crate) struct CallTags {
    pub stream: Arc<str>,
    pub shard_id: Arc<str>,
    pub deliveries: Arc<[Delivery]>,
}

/// Everything a component instance's store holds.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) env: InstanceEnv,
    pub(crate) call: Option<CallTags>,
    /// When the current call must end; read by the epoch callback.
    pub(crate) deadline: Option<Instant>,
    pub(crate) limiter: InstanceLimiter,
    budget: LogBudget,
    stdout: OutputCapture,
    stderr: OutputCapture,
}

impl HostState {
    pub(crate) fn new(env: InstanceEnv) -> Self {
        let limits = env.tenant.call_limits();
        let limiter = InstanceLimiter {
            memory_bytes: limits.memory_bytes,
            table_elements: limits.max_table_elements,
            counts: wasmtime::StoreLimitsBuilder::new()
                .tables(limits.max_tables)
                .memories(limits.max_memories)
                .instances(limits.max_instances)
                .build(),
        };
        let stdout = OutputCapture::default();
        let stderr = OutputCapture::default();
        Self {
            // No preopened directories, no environment, no arguments, no network; stdout and
            // stderr become log lines. Clocks and randomness are the only ambient capabilities.
            wasi: WasiCtx::builder()
                .stdout(stdout.clone())
                .stderr(stderr.clone())
                .build(),
            table: ResourceTable::new(),
            env,
            call: None,
            deadline: None,
            limiter,
            budget: LogBudget::default(),
            stdout,
            stderr,
        }
    }

    /// Prepares a call of `records` records: its tags, deadline and log budget.
    pub(crate) fn begin_call(&mut self, tags: CallTags, deadline: Instant) {
        let records = tags.deliveries.len();
        let limits = &self.env.tenant.call_limits().log;
        self.budget = LogBudget::for_call(limits, records);
        let cap = limits.bytes_per_record.saturating_mul(records.max(1));
        self.stdout.start_call(cap);
        self.stderr.start_call(cap);
        self.call = Some(tags);
        self.deadline = Some(deadline);
    }

    /// Ends a call: what it wrote to stdout/stderr becomes log lines (within the budget), and
    /// one warning reports what the caps dropped.
    pub(crate) fn end_call(&mut self) {
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
            self.env.log.emit(line);
        }
        self.call = None;
        self.deadline = None;
    }

    fn flush_output(&mut self, fd: &str, level: Level) {
        let capture = if fd == "stdout" {
            &self.stdout
        } else {
            &self.stderr
        };
        let (bytes, dropped) = capture.take();
        self.budget.dropped_bytes += dropped;
        if dropped > 0 {
            self.budget.dropped_lines += 1;
        }
        let text = String::from_utf8_lossy(&bytes);
        // A call of one record knows whose output it is.
        let record = self
            .call
            .as_ref()
            .filter(|c| c.deliveries.len() == 1)
            .map(|_| 0);
        for message in text.lines().filter(|l| !l.trim().is_empty()) {
            if !self.budget.spend(message.len(), self.env.tenant.log_rate()) {
                continue;
            }
            let mut line = self.tag(level, message.to_owned(), record);
            line.fields.push(("fd".into(), fd.to_owned()));
            self.env.log.emit(line);
        }
    }

    fn tag(&self, level: Level, message: String, record: Option<u32>) -> LogLine {
        let call = self.call.as_ref();
        let delivery = record.and_then(|i| call?.deliveries.get(i as usize));
        LogLine {
            level,
            origin: Origin::Guest,
            tenant: Some(self.env.tenant.name().to_owned()),
            component: self.env.component.to_string(),
            stream: call.map(|c| c.stream.to_string()),
            shard_id: call.map(|c| c.shard_id.to_string()),
            sequence_number: delivery.map(|d| d.sequence_number.clone()),
            message,
            fields: Vec::new(),
        }
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

/// Caps linear memory and tables with errors that say so, rather than a failed `memory.grow`
/// or `table.grow` the guest turns into an indistinguishable abort. Counts of instances,
/// tables and memories are wasmtime's own checks (an untyped "resource limit exceeded" error).
pub(crate) struct InstanceLimiter {
    memory_bytes: usize,
    table_elements: usize,
    counts: StoreLimits,
}

impl ResourceLimiter for InstanceLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                desired,
                limit: self.memory_bytes,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Err(wasmtime::Error::new(TableLimitExceeded {
                desired,
                limit: self.table_elements,
            }));
        }
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

pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    super::bindings::SubscriberApp::add_to_linker::<_, HasSelf<_>>(linker, |state| state)
}

impl types::Host for HostState {}

impl host::Host for HostState {
    fn log(&mut self, line: host::LogLine) -> wasmtime::Result<()> {
        let size = line.message.len()
            + line
                .fields
                .iter()
                .map(|f| f.name.len() + f.value.len())
                .sum::<usize>();
        if !self.budget.spend(size, self.env.tenant.log_rate()) {
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
        let result = match self.env.tenant.publish_grant().check_publish(&stream) {
            Ok(()) => match check_size(&record) {
                Ok(()) => self.env.publisher.publish(&stream, record).await,
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        result
            .map(|published| host::Published {
                shard_id: published.shard_id,
                sequence_number: published.sequence_number,
            })
            .map_err(|error| self.refused_publish(&stream, error))
    }
}

impl HostState {
    fn refused_publish(&self, stream: &str, error: PublishError) -> host::PublishError {
        let level = match error {
            PublishError::NotPermitted(_) => Level::Warn,
            _ => Level::Info,
        };
        let mut line = self.tag(level, format!("publish refused: {error}"), None);
        line.origin = Origin::Runtime;
        line.fields
            .push(("target_stream".into(), stream.to_owned()));
        self.env.log.emit(line);
        match error {
            PublishError::StreamNotFound(stream) => host::PublishError::StreamNotFound(stream),
            PublishError::NotPermitted(stream) => host::PublishError::NotPermitted(stream),
            PublishError::RecordTooLarge { size } => host::PublishError::RecordTooLarge(size),
            PublishError::Throttled(_) => host::PublishError::Throttled,
            PublishError::Unavailable { reason, .. } => host::PublishError::Unavailable(reason),
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
