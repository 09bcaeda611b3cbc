//! The host's log of what components say and what the runtime decides about their records.
//!
//! Every line goes to `tracing` (target `ruststream::guest` for guest lines,
//! `ruststream::runtime` for the runtime's own), tagged with the component, stream, shard and
//! sequence number it concerns. A [`LogSink`] can also keep the lines in memory, which is how
//! `TestApp` lets tests assert on them.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruststream_common::escape::escape_controls;
use ruststream_common::sync::lock;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Step-by-step detail.
    Trace,
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something is off, nothing is lost.
    Warn,
    /// Something failed.
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
    /// Its severity.
    pub level: Level,
    /// Who wrote it.
    pub origin: Origin,
    /// The tenant owning the component, when the line concerns one.
    pub tenant: Option<String>,
    /// The component it concerns.
    pub component: String,
    /// The stream it concerns, when it concerns one.
    pub stream: Option<String>,
    /// The shard it concerns, when it concerns one.
    pub shard_id: Option<String>,
    /// The record it concerns, when it concerns one.
    pub sequence_number: Option<String>,
    /// What it says.
    pub message: String,
    /// Further named values (`subscriber`, `attempt`, `error`, ...).
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

/// The tags of every line about one component's records: tenant, component, and the stream
/// and shard once known. The one place lines are tagged, for the guest's lines and the
/// runtime's alike.
#[derive(Debug, Clone)]
pub(crate) struct LogTags {
    tenant: Arc<str>,
    component: Arc<str>,
    shard: Option<(Arc<str>, Arc<str>)>,
}

impl LogTags {
    /// Tags of lines about `component`, a component of `tenant`.
    pub(crate) fn new(tenant: impl Into<Arc<str>>, component: impl Into<Arc<str>>) -> Self {
        Self {
            tenant: tenant.into(),
            component: component.into(),
            shard: None,
        }
    }

    /// The same tags, about records of `shard_id` of `stream`.
    #[must_use]
    pub(crate) fn on_shard(mut self, stream: Arc<str>, shard_id: Arc<str>) -> Self {
        self.shard = Some((stream, shard_id));
        self
    }

    /// A line of `origin` at `level`, about the record `sequence_number` when there is one.
    pub(crate) fn line(
        &self,
        level: Level,
        origin: Origin,
        sequence_number: Option<&str>,
        message: String,
    ) -> LogLine {
        LogLine {
            level,
            origin,
            tenant: Some(self.tenant.to_string()),
            component: self.component.to_string(),
            stream: self.shard.as_ref().map(|(stream, _)| stream.to_string()),
            shard_id: self.shard.as_ref().map(|(_, shard)| shard.to_string()),
            sequence_number: sequence_number.map(str::to_owned),
            message,
            fields: Vec::new(),
        }
    }
}

/// Where log lines go: `tracing`, and optionally an in-memory capture.
#[derive(Debug, Clone, Default)]
pub struct LogSink {
    capture: Option<Arc<Mutex<Vec<LogLine>>>>,
    /// Set for a sink that only counts lines.
    silent: Option<Arc<std::sync::atomic::AtomicU64>>,
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
            ..Self::default()
        }
    }

    /// A sink that emits nothing and only counts the lines it is given.
    pub fn silent() -> Self {
        Self {
            silent: Some(Arc::default()),
            ..Self::default()
        }
    }

    /// Lines a [`silent`](Self::silent) sink was given.
    pub fn count(&self) -> u64 {
        self.silent
            .as_ref()
            .map_or(0, |n| n.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The lines kept so far (empty unless capturing).
    pub fn captured(&self) -> Vec<LogLine> {
        self.capture
            .as_ref()
            .map(|lines| lock(lines).clone())
            .unwrap_or_default()
    }

    /// Emits `line`, with every control character in it escaped: a tenant's text never
    /// reaches a terminal or a log file able to rewrite what is shown.
    pub fn emit(&self, line: LogLine) {
        if let Some(count) = &self.silent {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let line = line.escaped();
        emit_tracing(&line);
        if let Some(lines) = &self.capture {
            lock(lines).push(line);
        }
    }
}

impl LogLine {
    fn escaped(mut self) -> Self {
        let clean = |text: &mut String| {
            if let std::borrow::Cow::Owned(escaped) = escape_controls(text) {
                *text = escaped;
            }
        };
        clean(&mut self.message);
        clean(&mut self.component);
        for text in [
            &mut self.tenant,
            &mut self.stream,
            &mut self.shard_id,
            &mut self.sequence_number,
        ]
        .into_iter()
        .flatten()
        {
            clean(text);
        }
        for (name, value) in &mut self.fields {
            clean(name);
            clean(value);
        }
        self
    }
}

/// What the host itself logs because of one tenant (refused publishes, held records, traps,
/// failed copies): at most `per_second` lines of each kind per second. The rest are counted,
/// and one line says how many were dropped once their second is over, so a tenant cannot turn
/// the host's own warnings into a flood.
#[derive(Debug)]
pub(crate) struct HostLineBudget {
    per_second: u32,
    windows: Mutex<HashMap<&'static str, Window>>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    emitted: u32,
    dropped: u64,
    /// The last dropped line, whose tags the summary reuses.
    last: Option<LogLine>,
}

const WINDOW: Duration = Duration::from_secs(1);

impl HostLineBudget {
    /// A budget of `per_second` lines of each kind.
    pub(crate) fn new(per_second: u32) -> Self {
        Self {
            per_second,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Emits `line`, a line of kind `kind`, unless this second's lines of that kind are
    /// spent; then it is only counted.
    pub(crate) fn emit(&self, sink: &LogSink, kind: &'static str, line: LogLine) {
        self.emit_at(Instant::now(), sink, kind, line);
    }

    fn emit_at(&self, now: Instant, sink: &LogSink, kind: &'static str, line: LogLine) {
        let (summary, admitted) = {
            let mut windows = lock(&self.windows);
            let window = windows.entry(kind).or_insert_with(|| Window::new(now));
            let summary = window.roll(now, kind, self.per_second, false);
            let admitted = window.emitted < self.per_second;
            if admitted {
                window.emitted += 1;
            } else {
                window.dropped += 1;
                window.last = Some(line.clone());
            }
            (summary, admitted.then_some(line))
        };
        summary
            .into_iter()
            .chain(admitted)
            .for_each(|l| sink.emit(l));
    }

    /// Says how many lines were dropped in every second that is over.
    pub(crate) fn flush(&self, sink: &LogSink) {
        self.flush_at(Instant::now(), sink, false);
    }

    /// Says how many lines were dropped so far, seconds over or not: for the end of an event
    /// that will not come back (loading a component).
    pub(crate) fn summarise(&self, sink: &LogSink) {
        self.flush_at(Instant::now(), sink, true);
    }

    fn flush_at(&self, now: Instant, sink: &LogSink, whole: bool) {
        let summaries: Vec<LogLine> = lock(&self.windows)
            .iter_mut()
            .filter_map(|(kind, window)| window.roll(now, kind, self.per_second, whole))
            .collect();
        summaries.into_iter().for_each(|l| sink.emit(l));
    }
}

impl Window {
    fn new(now: Instant) -> Self {
        Self {
            started: now,
            emitted: 0,
            dropped: 0,
            last: None,
        }
    }

    /// Starts a new window when this one is over (or `early`); returns the summary of what it
    /// dropped.
    fn roll(&mut self, now: Instant, kind: &str, per_second: u32, early: bool) -> Option<LogLine> {
        if !early && now.duration_since(self.started) < WINDOW {
            return None;
        }
        let over = std::mem::replace(self, Self::new(now));
        let mut line = over.last?;
        let seconds = now.duration_since(over.started).as_secs_f64();
        line.level = Level::Warn;
        line.origin = Origin::Runtime;
        line.sequence_number = None;
        line.message = format!(
            "{} more `{kind}` lines about this tenant were dropped in the last {seconds:.1}s \
             (at most {per_second} a second are logged)",
            over.dropped
        );
        line.fields.retain(|(name, _)| name == "subscriber");
        line.fields
            .push(("dropped".into(), over.dropped.to_string()));
        Some(line)
    }
}

/// A token bucket of log lines per second, shared by a tenant's instances.
#[derive(Debug, Clone)]
pub(crate) struct LogRate {
    inner: Arc<Mutex<Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    per_second: f64,
    tokens: f64,
    refilled: Instant,
}

impl LogRate {
    /// A bucket of `lines_per_second`, full.
    pub(crate) fn new(lines_per_second: u32) -> Self {
        let per_second = f64::from(lines_per_second);
        Self {
            inner: Arc::new(Mutex::new(Bucket {
                per_second,
                tokens: per_second,
                refilled: Instant::now(),
            })),
        }
    }

    /// Takes one line, if there is one left this second.
    pub(crate) fn take(&self) -> bool {
        let mut bucket = lock(&self.inner);
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * bucket.per_second).min(bucket.per_second);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
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
            write_logfmt_key(f, name)?;
            f.write_str("=")?;
            write_logfmt_value(f, value)?;
        }
        Ok(())
    }
}

/// A key as logfmt wants it: anything but `[A-Za-z0-9_.:-]` becomes `_`, so that a reader can
/// split the list again whatever a guest named its fields.
fn write_logfmt_key(f: &mut fmt::Formatter<'_>, key: &str) -> fmt::Result {
    if key.is_empty() {
        return f.write_str("_");
    }
    for c in key.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
        f.write_char(if keep { c } else { '_' })?;
    }
    Ok(())
}

/// A value as logfmt wants it: quoted (with `\\` and `\"` escaped) when it is empty or holds a
/// space, a quote, a backslash or `=`.
fn write_logfmt_value(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    let plain = !value.is_empty() && !value.contains([' ', '"', '\\', '=']);
    if plain {
        return f.write_str(value);
    }
    f.write_char('"')?;
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            f.write_char('\\')?;
        }
        f.write_char(c)?;
    }
    f.write_char('"')
}

/// Splits a field list written by the runtime (`key=value key="quoted value"`) back into
/// pairs: what a log formatter needs to give each field its own key.
pub fn parse_field_list(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if_eq(&' ').is_some() {}
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ' ')).collect();
        if key.is_empty() {
            return pairs;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'=').is_some() {
            if chars.next_if_eq(&'"').is_some() {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
            } else {
                value.extend(std::iter::from_fn(|| chars.next_if(|c| *c != ' ')));
            }
        }
        pairs.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_list_reads_back_whatever_its_values_hold() {
        let fields = vec![
            ("event.id".to_owned(), "7".to_owned()),
            ("note".to_owned(), "a \"b\" = c\\d".to_owned()),
            ("empty".to_owned(), String::new()),
            ("bad key=".to_owned(), "v".to_owned()),
        ];
        let text = FieldList(&fields).to_string();
        assert_eq!(
            text,
            r#"event.id=7 note="a \"b\" = c\\d" empty="" bad_key_=v"#
        );
        let back = parse_field_list(&text);
        assert_eq!(back[..3], fields[..3]);
        assert_eq!(back[3], ("bad_key_".to_owned(), "v".to_owned()));
    }

    fn line(message: &str) -> LogLine {
        LogLine {
            level: Level::Warn,
            origin: Origin::Runtime,
            tenant: Some("evil".into()),
            component: "c".into(),
            stream: Some("s".into()),
            shard_id: None,
            sequence_number: Some("1".into()),
            message: message.into(),
            fields: vec![
                ("subscriber".into(), "book".into()),
                ("x".into(), "y".into()),
            ],
        }
    }

    #[test]
    fn the_rate_bucket_runs_dry() {
        let rate = LogRate::new(3);
        assert!(rate.take() && rate.take() && rate.take());
        assert!(!rate.take());
    }

    #[test]
    fn control_characters_never_reach_the_log() {
        let sink = LogSink::capturing();
        let mut hostile = line("\x1b[2K\rok    fake\x07");
        hostile.fields.push(("k\x1b".into(), "v\r".into()));
        sink.emit(hostile);
        let kept = &sink.captured()[0];
        let text = kept.to_string();
        assert!(!text.chars().any(char::is_control), "{text}");
        assert!(kept.message.contains("ok    fake"));
    }

    #[test]
    fn host_lines_past_the_budget_are_counted_and_summarised() {
        let sink = LogSink::capturing();
        let budget = HostLineBudget::new(2);
        let start = Instant::now();
        for i in 0..5 {
            budget.emit_at(start, &sink, "held", line(&format!("held {i}")));
        }
        budget.emit_at(start, &sink, "trap", line("trap"));
        let kept: Vec<String> = sink.captured().into_iter().map(|l| l.message).collect();
        assert_eq!(kept, ["held 0", "held 1", "trap"]);

        budget.flush_at(start + Duration::from_millis(500), &sink, false);
        assert_eq!(sink.captured().len(), 3, "the second is not over yet");
        budget.flush_at(start + Duration::from_secs(1), &sink, false);
        let summary = sink.captured().pop().expect("a summary");
        assert!(
            summary.message.starts_with("3 more `held` lines"),
            "{summary:?}"
        );
        assert_eq!(summary.field("dropped"), Some("3"));
        assert_eq!(summary.field("subscriber"), Some("book"));
        assert_eq!(summary.tenant.as_deref(), Some("evil"));
        budget.flush_at(start + Duration::from_secs(3), &sink, false);
        assert_eq!(sink.captured().len(), 4, "nothing more was dropped");
        budget.emit_at(start + Duration::from_secs(3), &sink, "held", line("a"));
        budget.emit_at(start + Duration::from_secs(3), &sink, "held", line("b"));
        budget.emit_at(start + Duration::from_secs(3), &sink, "held", line("c"));
        budget.summarise(&sink);
        let summary = sink
            .captured()
            .pop()
            .expect("a summary before the second is over");
        assert!(
            summary.message.starts_with("1 more `held` lines"),
            "{summary:?}"
        );
    }
}
