//! Forwards the guest's `tracing` events to the host's log.
//!
//! Each event becomes one `log` call carrying its level, message and fields, plus the index of
//! the batch record being handled, from which the host tags the line with the component,
//! stream, shard and sequence number. Spans are not forwarded (their fields are not attached to
//! events); `trace`-level events are dropped in the guest, since a crossing per event would be
//! the dominant cost of a chatty handler.

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Level, LevelFilter, Metadata, Subscriber};

use crate::bindings::ruststream::handler::host;

thread_local! {
    static CURRENT_RECORD: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Marks which batch record the following log lines belong to.
pub(crate) fn set_current_record(index: Option<u32>) {
    CURRENT_RECORD.with(|current| current.set(index));
}

/// Installs the forwarding subscriber as the global default (once; later calls do nothing).
pub(crate) fn install() {
    // Fails only when a default is already set, which is then this same subscriber.
    let _ = tracing::subscriber::set_global_default(HostLog::default());
}

#[derive(Default)]
struct HostLog {
    next_span: AtomicU64,
}

impl Subscriber for HostLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::DEBUG
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::DEBUG)
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = LineBuilder::default();
        event.record(&mut line);
        host::log(&host::LogLine {
            level: level(event.metadata().level()),
            message: line.message,
            fields: line.fields,
            record: CURRENT_RECORD.with(Cell::get),
        });
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

fn level(level: &Level) -> host::Level {
    match *level {
        Level::ERROR => host::Level::Error,
        Level::WARN => host::Level::Warn,
        Level::INFO => host::Level::Info,
        Level::DEBUG => host::Level::Debug,
        _ => host::Level::Trace,
    }
}

#[derive(Default)]
struct LineBuilder {
    message: String,
    fields: Vec<host::Field>,
}

impl LineBuilder {
    fn push(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push(host::Field {
                name: field.name().to_owned(),
                value,
            });
        }
    }
}

impl Visit for LineBuilder {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.push(field, text);
    }
}
