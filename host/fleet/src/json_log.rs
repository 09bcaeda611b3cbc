//! `--log-format json`: one JSON object per line, for log pipelines.
//!
//! Each line has `timestamp` (RFC 3339, UTC), `level`, `target` and `message`, then the fields
//! of every span it was emitted in, outermost first (`tenant` and `app`, `subscriber` and
//! `stream`, `shard`, `records` of a call), then its own fields. A line a component or the
//! runtime wrote about one carries the component's own fields as the object `fields`, one key
//! each, instead of the one string the text format shows: tenants' fields stay queryable.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Targets whose `fields` field is a field list written by the runtime.
const FIELD_LIST_TARGETS: [&str; 2] = ["ruststream::guest", "ruststream::runtime"];

/// The layer writing JSON lines to what `make_writer` returns, once per line.
pub struct JsonLayer<W> {
    make_writer: W,
}

impl<W> JsonLayer<W>
where
    W: Fn() -> Box<dyn Write> + Send + Sync + 'static,
{
    /// A layer writing each event as one JSON object on a line of `make_writer()`.
    pub fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

/// A span's fields, kept in its extensions.
struct SpanFields(Map<String, Value>);

impl<S, W> Layer<S> for JsonLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: Fn() -> Box<dyn Write> + Send + Sync + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(Map::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.0));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            let mut more = Fields(std::mem::take(&mut fields.0));
            values.record(&mut more);
            fields.0 = more.0;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            Value::String(timestamp(SystemTime::now())),
        );
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("target".into(), metadata.target().into());
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    line.extend(fields.0.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut own = fields.0;
        if FIELD_LIST_TARGETS.contains(&metadata.target())
            && let Some(Value::String(list)) = own.remove("fields")
        {
            let pairs = ruststream_runtime::log::parse_field_list(&list);
            let object = pairs.into_iter().map(|(k, v)| (k, Value::String(v)));
            own.insert("fields".into(), Value::Object(object.collect()));
        }
        // An empty tag (a line about no stream) is left out rather than shown as "".
        own.retain(|_, value| value.as_str() != Some(""));
        line.extend(own);
        let Ok(mut text) = serde_json::to_vec(&Value::Object(line)) else {
            return;
        };
        text.push(b'\n');
        // One write per line, so lines of concurrent tasks never interleave.
        let _ = (self.make_writer)().write_all(&text);
    }
}

/// Collects fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}

/// `2026-12-01T20:47:40.123Z`: RFC 3339 in UTC, with milliseconds.
pub(crate) fn timestamp(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_component_line_carries_its_spans_and_its_own_fields() -> anyhow::Result<()> {
        let lines = Lines::default();
        let out = lines.clone();
        let layer = JsonLayer::new(move || Box::new(out.clone()) as Box<dyn Write>);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let app = tracing::info_span!("app", tenant = "acme", app = "ledger");
            let subscription =
                tracing::info_span!(parent: &app, "subscription", subscriber = "book");
            let _in = subscription.enter();
            let shard = tracing::info_span!("shard", shard = "shardId-000000000001");
            let _in = shard.enter();
            tracing::info!(target: "ruststream::guest", stream = "", fields = r#"entry.id=7 note="a b""#, "booked");
        });
        let text = String::from_utf8(
            lines
                .0
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .clone(),
        )?;
        let line: Value = serde_json::from_str(text.trim_end())?;
        assert_eq!(line["tenant"], "acme");
        assert_eq!(line["app"], "ledger");
        assert_eq!(line["subscriber"], "book");
        assert_eq!(line["shard"], "shardId-000000000001");
        assert_eq!(line["message"], "booked");
        assert_eq!(line["fields"]["entry.id"], "7");
        assert_eq!(line["fields"]["note"], "a b");
        assert!(line.get("stream").is_none(), "{line}");
        assert_eq!(text.lines().count(), 1);
        Ok(())
    }

    #[test]
    fn timestamps_are_rfc_3339_in_utc() {
        let at = UNIX_EPOCH + Duration::from_millis(1_796_157_260_123);
        assert_eq!(timestamp(at), "2026-12-01T20:34:20.123Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(timestamp(leap), "2000-02-29T00:00:00.000Z");
    }
}
