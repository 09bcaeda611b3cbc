//! The host's recent warnings and errors, kept in memory for the console and
//! `GET /v1/errors`: a tracing layer beside the log's, so whatever the host logs at `WARN` or
//! `ERROR` is also kept, whoever it is about.
//!
//! Each event is kept in the ring of the tenant it is about (the `tenant` field of the event or
//! of a span it was emitted in), else in the host's own ring. A ring holds the last
//! [`PER_RING`] events, so a tenant whose component warns on every record pushes out its own
//! past, never another tenant's or the host's; at most [`RINGS`] rings are kept (the ring
//! written longest ago goes first), and a message is cut at [`MESSAGE_CHARS`] characters. A
//! tenant's token reads its own ring only; the operator's reads every ring, merged.
//!
//! ```
//! use ruststream_fleet::recent_errors::RecentErrors;
//! use tracing_subscriber::layer::SubscriberExt as _;
//!
//! let recent = RecentErrors::new();
//! let subscriber = tracing_subscriber::registry().with(recent.layer());
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!("app", tenant = "acme", app = "books");
//!     span.in_scope(|| tracing::warn!("a component trapped"));
//!     tracing::info!("not kept: below WARN");
//! });
//! let kept = recent.read(Some("acme"), 0, 10);
//! assert_eq!(kept.len(), 1);
//! assert_eq!(kept[0].app.as_deref(), Some("books"));
//! assert!(recent.read(Some("globex"), 0, 10).is_empty());
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_common::sync::lock;
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The events kept per tenant (and for the host).
pub const PER_RING: usize = 200;
/// The most rings kept: tenants past it lose their ring, the least recently written first.
pub const RINGS: usize = 2_000;
/// The longest message kept, in characters; a longer one is cut and ends in `…`.
pub const MESSAGE_CHARS: usize = 1_000;

/// The span and event fields that say whom an event is about.
const SCOPE_FIELDS: [&str; 5] = ["tenant", "app", "subscriber", "stream", "shard"];

/// One kept warning or error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// Its place among every event the host kept: later ones have higher numbers.
    pub seq: u64,
    /// When it was logged, in ms since the epoch.
    pub at_ms: u64,
    /// The same time, RFC 3339 in UTC (as the JSON log writes it).
    pub at: String,
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The module that logged it.
    pub target: String,
    /// The tenant it is about; `None` for the host's own.
    pub tenant: Option<String>,
    /// The app it is about.
    pub app: Option<String>,
    /// The subscription it is about.
    pub subscriber: Option<String>,
    /// The stream it is about.
    pub stream: Option<String>,
    /// The shard it is about.
    pub shard: Option<String>,
    /// What it says: its message, then its other fields as `key=value`.
    pub message: String,
}

/// The recent warnings and errors of one host, by tenant; cheap to clone (one shared store).
#[derive(Debug, Clone, Default)]
pub struct RecentErrors {
    rings: Arc<Mutex<Rings>>,
}

#[derive(Debug, Default)]
struct Rings {
    /// By tenant (`None`: the host's own), each with the `seq` it was last written at.
    by_tenant: HashMap<Option<String>, (u64, VecDeque<ErrorEvent>)>,
    next_seq: u64,
}

impl RecentErrors {
    /// An empty store; events reach it through [`layer`](Self::layer).
    pub fn new() -> Self {
        Self::default()
    }

    /// The tracing layer that keeps every `WARN` and `ERROR` event in this store.
    pub fn layer(&self) -> RecentErrorsLayer {
        RecentErrorsLayer {
            recent: self.clone(),
        }
    }

    /// The last `limit` events logged at or after `since_ms` (ms since the epoch), newest
    /// first: `tenant`'s own when given (a tenant's token), else every ring's, merged (the
    /// operator's).
    pub fn read(&self, tenant: Option<&str>, since_ms: u64, limit: usize) -> Vec<ErrorEvent> {
        let rings = lock(&self.rings);
        let mut events: Vec<ErrorEvent> = match tenant {
            Some(tenant) => rings
                .by_tenant
                .get(&Some(tenant.to_owned()))
                .map(|(_, ring)| ring.iter().cloned().collect())
                .unwrap_or_default(),
            None => rings
                .by_tenant
                .values()
                .flat_map(|(_, ring)| ring.iter().cloned())
                .collect(),
        };
        events.retain(|event| event.at_ms >= since_ms);
        events.sort_unstable_by_key(|event| std::cmp::Reverse(event.seq));
        events.truncate(limit);
        events
    }

    fn keep(&self, mut event: ErrorEvent) {
        let mut rings = lock(&self.rings);
        let seq = rings.next_seq;
        rings.next_seq += 1;
        event.seq = seq;
        let key = event.tenant.clone();
        if !rings.by_tenant.contains_key(&key) && rings.by_tenant.len() >= RINGS {
            let oldest = rings
                .by_tenant
                .iter()
                .min_by_key(|(_, (last, _))| *last)
                .map(|(tenant, _)| tenant.clone());
            if let Some(oldest) = oldest {
                rings.by_tenant.remove(&oldest);
            }
        }
        let (last, ring) = rings.by_tenant.entry(key).or_default();
        *last = seq;
        if ring.len() == PER_RING {
            ring.pop_front();
        }
        ring.push_back(event);
    }
}

/// Keeps `WARN` and `ERROR` events in a [`RecentErrors`]; see [`RecentErrors::layer`].
#[derive(Debug)]
pub struct RecentErrorsLayer {
    recent: RecentErrors,
}

/// The scope fields a span was made with, kept in its extensions.
#[derive(Debug, Default, Clone)]
struct SpanScope([Option<String>; SCOPE_FIELDS.len()]);

impl<S> Layer<S> for RecentErrorsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // Most spans (one per call) name none of the scope fields: nothing is kept for them.
        let fields = attrs.metadata().fields();
        if !SCOPE_FIELDS.iter().any(|name| fields.field(name).is_some()) {
            return;
        }
        let mut scope = ScopeVisitor::default();
        attrs.record(&mut scope);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(scope.scope);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(scope) = span.extensions_mut().get_mut::<SpanScope>()
        {
            let mut more = ScopeVisitor {
                scope: scope.clone(),
                ..ScopeVisitor::default()
            };
            values.record(&mut more);
            *scope = more.scope;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if *metadata.level() > Level::WARN {
            return;
        }
        let mut scope = SpanScope::default();
        if let Some(spans) = ctx.event_scope(event) {
            for span in spans.from_root() {
                if let Some(kept) = span.extensions().get::<SpanScope>() {
                    for (mine, theirs) in scope.0.iter_mut().zip(&kept.0) {
                        if theirs.is_some() {
                            mine.clone_from(theirs);
                        }
                    }
                }
            }
        }
        let mut own = ScopeVisitor {
            scope,
            ..ScopeVisitor::default()
        };
        event.record(&mut own);
        let [tenant, app, subscriber, stream, shard] = own.scope.0;
        let now = SystemTime::now();
        let at_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        self.recent.keep(ErrorEvent {
            seq: 0,
            at_ms,
            at: crate::json_log::timestamp(now),
            level: metadata.level().as_str().to_owned(),
            target: metadata.target().to_owned(),
            tenant,
            app,
            subscriber,
            stream,
            shard,
            message: cut(own.message),
        });
    }
}

/// `message` cut at [`MESSAGE_CHARS`] characters.
fn cut(mut message: String) -> String {
    if let Some((at, _)) = message.char_indices().nth(MESSAGE_CHARS) {
        message.truncate(at);
        message.push('…');
    }
    message
}

/// Reads the scope fields into a [`SpanScope`], and the message and every other field into one
/// line.
#[derive(Default)]
struct ScopeVisitor {
    scope: SpanScope,
    message: String,
}

impl ScopeVisitor {
    fn field(&mut self, field: &Field, value: String) {
        if let Some(at) = SCOPE_FIELDS.iter().position(|name| *name == field.name()) {
            // An empty tag (a line about no stream) says nothing.
            if !value.is_empty() {
                self.scope.0[at] = Some(value);
            }
            return;
        }
        if self.message.len() > MESSAGE_CHARS * 4 {
            return;
        }
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.message);
            self.message = value;
            if !rest.is_empty() {
                self.message.push(' ');
                self.message.push_str(&rest);
            }
        } else {
            if !self.message.is_empty() {
                self.message.push(' ');
            }
            let _ = write!(self.message, "{}={value}", field.name());
        }
    }
}

impl Visit for ScopeVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.field(field, format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, value.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    fn with_layer(recent: &RecentErrors, body: impl FnOnce()) {
        let subscriber = tracing_subscriber::registry().with(recent.layer());
        tracing::subscriber::with_default(subscriber, body);
    }

    #[test]
    fn an_event_is_kept_with_whom_it_is_about_from_its_spans_and_its_own_fields() {
        let recent = RecentErrors::new();
        with_layer(&recent, || {
            let app = tracing::info_span!("app", tenant = "acme", app = "books");
            let _app = app.enter();
            let sub = tracing::info_span!("subscription", subscriber = "audit", stream = "ledger");
            let _sub = sub.enter();
            tracing::warn!(shard = "shardId-1", error = "boom", "a worker failed");
            tracing::error!(tenant = "globex", "said about another tenant");
        });
        let acme = recent.read(Some("acme"), 0, 10);
        assert_eq!(acme.len(), 1, "{acme:?}");
        let event = &acme[0];
        assert_eq!(
            (
                event.level.as_str(),
                event.app.as_deref(),
                event.subscriber.as_deref(),
                event.stream.as_deref(),
                event.shard.as_deref(),
                event.message.as_str()
            ),
            (
                "WARN",
                Some("books"),
                Some("audit"),
                Some("ledger"),
                Some("shardId-1"),
                "a worker failed error=boom"
            )
        );
        let globex = recent.read(Some("globex"), 0, 10);
        assert_eq!(globex.len(), 1, "an event's own tenant field wins");
        assert_eq!(globex[0].level, "ERROR");
        let all = recent.read(None, 0, 10);
        assert_eq!(all.len(), 2);
        assert!(all[0].seq > all[1].seq, "newest first");
    }

    #[test]
    fn a_noisy_tenant_pushes_out_its_own_past_only() {
        let recent = RecentErrors::new();
        with_layer(&recent, || {
            tracing::warn!("the host's own");
            tracing::warn!(tenant = "quiet", "once");
            for n in 0..PER_RING * 3 {
                tracing::warn!(tenant = "noisy", n, "again");
            }
            tracing::info!(tenant = "quiet", "below WARN: not kept");
        });
        assert_eq!(recent.read(Some("noisy"), 0, usize::MAX).len(), PER_RING);
        assert_eq!(recent.read(Some("noisy"), 0, 5).len(), 5);
        assert_eq!(recent.read(Some("quiet"), 0, usize::MAX).len(), 1);
        let all = recent.read(None, 0, usize::MAX);
        assert_eq!(all.len(), PER_RING + 2);
        assert!(
            all.iter().any(|e| e.tenant.is_none()),
            "the host's own kept"
        );
        let newest = &recent.read(Some("noisy"), 0, 1)[0];
        assert!(newest.message.ends_with(&format!("n={}", PER_RING * 3 - 1)));
    }

    #[test]
    fn rings_past_the_bound_go_least_recently_written_first_and_long_messages_are_cut() {
        let recent = RecentErrors::new();
        with_layer(&recent, || {
            for n in 0..=RINGS {
                tracing::warn!(tenant = format!("t{n}").as_str(), "x");
            }
            tracing::warn!(tenant = "long", "{}", "é".repeat(MESSAGE_CHARS * 2));
        });
        assert!(
            recent.read(Some("t0"), 0, 1).is_empty(),
            "the oldest ring went"
        );
        assert!(recent.read(Some("t1"), 0, 1).is_empty(), "then the next");
        assert_eq!(recent.read(Some(&format!("t{RINGS}")), 0, 1).len(), 1);
        let long = &recent.read(Some("long"), 0, 1)[0].message;
        assert_eq!(long.chars().count(), MESSAGE_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}
