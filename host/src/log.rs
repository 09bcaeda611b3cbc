//! The host's log of what components say and what the runtime decides about their records.
//!
//! Every line goes to `tracing` (target `ruststream::guest` for guest lines,
//! `ruststream::runtime` for the runtime's own), tagged with the component, stream, shard and
//! sequence number it concerns. A [`LogSink`] can also keep the lines in memory, which is how
//! [`TestApp`](crate::testapp::TestApp) lets tests assert on them.

use std::fmt;
use std::sync::{Arc, Mutex};

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Who wrote a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The component, through its `log` import (or its stdout/stderr).
    Guest,
    /// The runtime, about a component's records.
    Runtime,
}

/// One log line with its tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: Level,
    pub origin: Origin,
    /// The tenant owning the component, when the line concerns one.
    pub tenant: Option<String>,
    pub component: String,
    pub stream: Option<String>,
    pub shard_id: Option<String>,
    pub sequence_number: Option<String>,
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl LogLine {
    /// The value of field `name`, if the line has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

impl fmt::Display for LogLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} [", self.level)?;
        if let Some(tenant) = &self.tenant {
            write!(f, "{tenant}/")?;
        }
        write!(f, "{}", self.component)?;
        for tag in [&self.stream, &self.shard_id, &self.sequence_number]
            .into_iter()
            .flatten()
        {
            write!(f, " {tag}")?;
        }
        write!(f, "] {}", self.message)?;
        for (name, value) in &self.fields {
            write!(f, " {name}={value}")?;
        }
        Ok(())
    }
}

/// Where log lines go: `tracing`, and optionally an in-memory capture.
#[derive(Debug, Clone, Default)]
pub struct LogSink {
    capture: Option<Arc<Mutex<Vec<LogLine>>>>,
}

impl LogSink {
    /// A sink that only emits `tracing` events.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink that also keeps every line; read them with [`captured`](Self::captured).
    pub fn capturing() -> Self {
        Self {
            capture: Some(Arc::default()),
        }
    }

    /// The lines kept so far (empty unless capturing).
    pub fn captured(&self) -> Vec<LogLine> {
        self.capture
            .as_ref()
            .map(|lines| lines.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default()
    }

    /// Emits `line`.
    pub fn emit(&self, line: LogLine) {
        emit_tracing(&line);
        if let Some(lines) = &self.capture {
            lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }
}

fn emit_tracing(line: &LogLine) {
    let fields = FieldList(&line.fields);
    let stream = line.stream.as_deref().unwrap_or("");
    let shard = line.shard_id.as_deref().unwrap_or("");
    let sequence = line.sequence_number.as_deref().unwrap_or("");
    macro_rules! event {
        ($level:expr, $target:literal) => {
            tracing::event!(
                target: $target,
                $level,
                tenant = line.tenant.as_deref().unwrap_or(""),
                component = %line.component,
                stream,
                shard,
                sequence,
                fields = %fields,
                "{}",
                line.message
            )
        };
    }
    macro_rules! by_origin {
        ($level:expr) => {
            match line.origin {
                Origin::Guest => event!($level, "ruststream::guest"),
                Origin::Runtime => event!($level, "ruststream::runtime"),
            }
        };
    }
    match line.level {
        Level::Trace => by_origin!(tracing::Level::TRACE),
        Level::Debug => by_origin!(tracing::Level::DEBUG),
        Level::Info => by_origin!(tracing::Level::INFO),
        Level::Warn => by_origin!(tracing::Level::WARN),
        Level::Error => by_origin!(tracing::Level::ERROR),
    }
}

struct FieldList<'a>(&'a [(String, String)]);

impl fmt::Display for FieldList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={value}")?;
        }
        Ok(())
    }
}
