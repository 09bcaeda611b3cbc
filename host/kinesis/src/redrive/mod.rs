//! Dead-letter redrive: the dead letters of a stream written back, each exactly once, to the
//! stream they came from, once the handler that gave up on them is fixed.
//!
//! A dead letter carries its origin in its envelope
//! ([`DeadLetterOrigin`](ruststream_runtime::dead_letter::DeadLetterOrigin)). A redrive reads
//! the dead-letter stream shard by shard, chooses dead letters by its [`RedriveFilter`],
//! refuses those whose origin its tenant may not have records in ([`filter::judge`]), and
//! writes the rest back to their origin stream: the original payload, key and user headers, a
//! fresh attempt count, addressed (as a counted copy is) to the subscription that gave up on
//! it, and tagged with the redrive
//! ([`REDRIVE_HEADER`](ruststream_runtime::envelope::REDRIVE_HEADER): `id/shard/sequence` of
//! the dead letter). Each write draws on its tenant's write quota.
//!
//! **Exactly once.** Progress is kept per dead-letter shard in a lease store
//! ([`progress`]): a lease, fenced like a subscription's, whose checkpoint says up to which
//! dead letter everything is settled. Before a batch is published its intent (its last dead
//! letter, and the time) is stored; after, the checkpoint moves past it and the intent is
//! cleared. A run that finds an intent (its predecessor died between the two) reads each
//! origin stream from the intent's time (less [`CLOCK_MARGIN`]) to the tip, collects the tags
//! of this redrive found there, and writes only the batch's dead letters whose tag is not
//! among them. Only one run holds a shard: another waits for its lease to expire.

pub mod filter;
pub mod progress;
mod stream;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use metrics::Label;
use ruststream_common::sync::lock;
use ruststream_runtime::{Clock, SystemClock};
use serde::{Deserialize, Serialize};

use crate::Cause;
use crate::lease::{LeaseError, LeaseStore};
use filter::{DeadLetter, RedriveFilter, Redriven, SkipReason, Tenants, Verdict, judge};
use progress::{HeldProgress, Intent, ShardProgress, shard_key, start_key};
use stream::{Position, ShardPages, exists, put, tags_in};

/// The DynamoDB table redrives keep their progress in unless told otherwise: a name the
/// default lease table template (`ruststream-{tenant}-{app}`) never makes.
pub const DEFAULT_TABLE: &str = "ruststream.redrives";

/// How far before an intent's time a resuming run looks for what was written: the arrival
/// times Kinesis gives are its own clock's, not this host's.
pub const CLOCK_MARGIN: Duration = Duration::from_secs(300);

/// Dead letters settled per stored checkpoint, at most.
const BATCH: usize = 100;

/// How many refused dead letters a report lists (and a shard's progress keeps).
pub(crate) const LISTED: usize = 20;

/// Why a redrive stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedriveError {
    /// A Kinesis call failed.
    #[error("{operation} on {target} failed")]
    Kinesis {
        /// The call.
        operation: &'static str,
        /// What it was about.
        target: String,
        /// What Kinesis (or the SDK) said.
        #[source]
        source: Cause,
    },
    /// Records were still throttled after several tries.
    #[error("{records} redriven records were not taken by `{stream}` after several tries")]
    NotTaken {
        /// The origin stream.
        stream: String,
        /// How many.
        records: usize,
    },
    /// The lease store failed.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// A progress row is not a redrive's.
    #[error("redrive progress row `{key}` is unreadable: {reason}")]
    Progress {
        /// The row.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Another run took a shard of this redrive over (this one stalled past its lease).
    #[error("another run took over redrive progress `{0}`: this run stops")]
    LeaseLost(String),
    /// The redrive's id was started before with another filter.
    #[error(
        "redrive `{key}` was started with other options ({stored:?}): give the same ones to \
         resume it, or another --id to start another"
    )]
    OtherFilter {
        /// Its start row.
        key: String,
        /// What it was started with.
        stored: Box<RedriveFilter>,
    },
}

/// What to redrive: the dead-letter stream, the filter, and its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedriveSpec {
    /// The dead-letter stream.
    pub stream: String,
    /// Which of its dead letters.
    pub filter: RedriveFilter,
    /// Its id: the one given, else one derived from the stream and filter, so that running
    /// the same command again resumes it.
    pub id: String,
}

impl RedriveSpec {
    /// A redrive of `stream`'s dead letters chosen by `filter`, named `id` or after them.
    pub fn new(stream: &str, filter: RedriveFilter, id: Option<String>) -> Self {
        let id = id.unwrap_or_else(|| derived_id(stream, &filter));
        Self {
            stream: stream.to_owned(),
            filter,
            id,
        }
    }
}

/// `rd-` and 16 hex digits of the FNV-1a hash of the stream and filter: stable across runs
/// and builds.
fn derived_id(stream: &str, filter: &RedriveFilter) -> String {
    let text = format!(
        "{stream}\0{:?}\0{:?}\0{:?}\0{:?}",
        filter.tenant, filter.reason, filter.since_ms, filter.until_ms
    );
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("rd-{hash:016x}")
}

/// Where a redrive stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedriveState {
    /// Being run.
    #[default]
    Running,
    /// Every chosen dead letter is settled.
    Finished,
    /// It stopped on an error; running it again resumes it.
    Failed,
}

/// A refused dead letter, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// Its shard in the dead-letter stream.
    pub shard: String,
    /// Its sequence number there.
    pub sequence: String,
    /// Its origin stream, when it names one.
    pub origin_stream: Option<String>,
    /// Its tenant, when it names one.
    pub tenant: Option<String>,
    /// Why it was refused.
    pub reason: SkipReason,
}

/// Progress of a redrive, for its run's output, the admin route and metrics; kept in the
/// host's state directory once a run the admin API started ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RedriveReport {
    /// Its id.
    pub id: String,
    /// The dead-letter stream.
    pub stream: String,
    /// Where it stands.
    pub state: RedriveState,
    /// Dead letters written back (by earlier runs too).
    pub redriven: u64,
    /// Dead letters written back by this run.
    pub redriven_now: u64,
    /// Dead letters refused, by reason ([`SkipReason::label`]; by earlier runs too).
    pub skipped: BTreeMap<String, u64>,
    /// The first refused dead letters this run met.
    pub refused: Vec<Refused>,
    /// Why it failed.
    pub error: Option<String>,
}

/// One dead letter a dry run would move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Planned {
    /// Its shard in the dead-letter stream.
    pub shard: String,
    /// Its sequence number there.
    pub sequence: String,
    /// Where it goes back to.
    pub origin_stream: String,
    /// Whose.
    pub tenant: String,
    /// The subscription it goes back to.
    pub subscriber: String,
    /// Why it was dead-lettered.
    pub reason: String,
    /// Its partition key.
    pub partition_key: String,
}

/// What a redrive would do, found without writing anything.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DryRun {
    /// The redrive's id.
    pub id: String,
    /// Dead letters that would move, by origin stream, then by the reason they were
    /// dead-lettered.
    pub moves: BTreeMap<String, BTreeMap<String, u64>>,
    /// Dead letters that would be refused, by reason ([`SkipReason::label`]).
    pub refused: BTreeMap<String, u64>,
    /// The first that would move.
    pub first: Vec<Planned>,
}

/// Called after a batch is published and before its checkpoint is stored, with the number of
/// batches this run published: where a test stops the process to prove a resumed run writes
/// nothing twice.
pub type PublishedHook = Arc<dyn Fn(u64) + Send + Sync>;

/// A redrive, ready to run.
pub struct Redrive {
    kinesis: Client,
    store: Arc<dyn LeaseStore>,
    tenants: Tenants,
    spec: RedriveSpec,
    owner: String,
    ttl: Duration,
    report: Arc<Mutex<RedriveReport>>,
    hook: Option<PublishedHook>,
}

impl Redrive {
    /// A redrive of `spec` writing through `kinesis` for `tenants`, its progress in `store`,
    /// held by `owner` for `ttl` between writes.
    pub fn new(
        kinesis: Client,
        store: Arc<dyn LeaseStore>,
        tenants: Tenants,
        spec: RedriveSpec,
        owner: &str,
        ttl: Duration,
    ) -> Self {
        let report = RedriveReport {
            id: spec.id.clone(),
            stream: spec.stream.clone(),
            ..RedriveReport::default()
        };
        Self {
            kinesis,
            store,
            tenants,
            spec,
            owner: owner.to_owned(),
            ttl,
            report: Arc::new(Mutex::new(report)),
            hook: None,
        }
    }

    /// Calls `hook` after each published batch, before its checkpoint.
    pub fn on_published(mut self, hook: PublishedHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Where it stands now (shared with a running [`run`](Self::run)).
    pub fn progress(&self) -> Arc<Mutex<RedriveReport>> {
        Arc::clone(&self.report)
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// Settles every chosen dead letter up to the redrive's `until` (its first start, unless
    /// given), resuming where earlier runs stopped.
    ///
    /// # Errors
    /// A failed call; another run took a shard over. Running it again resumes it.
    pub async fn run(&self) -> Result<RedriveReport, RedriveError> {
        let result = self.run_shards().await;
        let mut report = lock(&self.report);
        match &result {
            Ok(()) => report.state = RedriveState::Finished,
            Err(error) => {
                report.state = RedriveState::Failed;
                report.error = Some(ruststream_common::escape::one_line(error));
            }
        }
        result.map(|()| report.clone())
    }

    async fn run_shards(&self) -> Result<(), RedriveError> {
        let started = progress::start(
            &*self.store,
            &start_key(&self.spec.stream, &self.spec.id),
            &self.spec.filter,
            SystemClock.now_ms(),
        )
        .await?;
        let shards = self.shards().await?;
        let mut run = Run {
            redrive: self,
            filter: started.filter,
            streams: HashMap::new(),
            published: 0,
        };
        for shard in shards {
            run.shard(&shard.shard_id).await?;
        }
        Ok(())
    }

    /// The shards of the dead-letter stream, in the order Kinesis lists them.
    async fn shards(&self) -> Result<Vec<crate::kinesis::ShardInfo>, RedriveError> {
        crate::kinesis::list_shards(&self.kinesis, &self.spec.stream)
            .await
            .map_err(|error| RedriveError::Kinesis {
                operation: "ListShards",
                target: format!("`{}`", self.spec.stream),
                source: Box::new(error),
            })
    }

    /// What [`run`](Self::run) would move and refuse from where the redrive stands, without
    /// writing anything; `first` says how many of the dead letters that would move to list.
    ///
    /// # Errors
    /// A failed call.
    pub async fn dry_run(&self, first: usize) -> Result<DryRun, RedriveError> {
        let stored = self
            .store
            .read(&start_key(&self.spec.stream, &self.spec.id))
            .await?
            .and_then(|row| row.checkpoint);
        let mut filter = self.spec.filter.clone();
        if let Some(start) =
            stored.and_then(|text| serde_json::from_str::<progress::RedriveStart>(&text).ok())
        {
            filter.until_ms = filter.until_ms.or(start.filter.until_ms);
        }
        let mut run = Run {
            redrive: self,
            filter,
            streams: HashMap::new(),
            published: 0,
        };
        let mut plan = DryRun {
            id: self.spec.id.clone(),
            ..DryRun::default()
        };
        let shards = self.shards().await?;
        for shard in shards {
            run.plan_shard(&shard.shard_id, &mut plan, first).await?;
        }
        Ok(plan)
    }
}

/// One run of a redrive: its filter as started, and what it learnt of origin streams.
struct Run<'a> {
    redrive: &'a Redrive,
    filter: RedriveFilter,
    /// Whether each origin stream met exists.
    streams: HashMap<String, bool>,
    /// Batches published by this run.
    published: u64,
}

/// Where walking a shard stops.
enum Bound<'a> {
    /// At the redrive's `until`, or the shard's tip.
    Until,
    /// After this record (a resumed intent's last).
    Through(&'a str),
}

/// Whether sequence number `a` is before `b` (decimal strings of any length).
fn before(a: &str, b: &str) -> bool {
    (a.len(), a) < (b.len(), b)
}

impl Run<'_> {
    fn store(&self) -> &dyn LeaseStore {
        &*self.redrive.store
    }

    async fn shard(&mut self, shard_id: &str) -> Result<(), RedriveError> {
        let spec = &self.redrive.spec;
        let key = shard_key(&spec.stream, shard_id, &spec.id);
        let ttl = self.redrive.ttl;
        let mut held = HeldProgress::take(self.store(), &key, &self.redrive.owner, ttl).await?;
        let stored = held.progress.clone();
        self.account(&stored, &ShardProgress::default(), &stored.refused, false);
        if !held.progress.finished {
            if let Some(intent) = held.progress.intent.clone() {
                self.resume(&mut held, shard_id, &intent).await?;
            }
            self.walk(&mut held, shard_id, Bound::Until, &HashSet::new(), None)
                .await?;
            let mut finished = held.progress.clone();
            finished.finished = true;
            held.store(self.store(), finished, ttl).await?;
        }
        held.release(self.store()).await
    }

    /// Settles the batch a run that died left behind: what it wrote is found by its tag in
    /// the origin streams and counted, the rest written now.
    async fn resume(
        &mut self,
        held: &mut HeldProgress,
        shard_id: &str,
        intent: &Intent,
    ) -> Result<(), RedriveError> {
        let id = self.redrive.spec.id.clone();
        let from_ms = intent
            .from_ms
            .saturating_sub(CLOCK_MARGIN.as_millis() as u64);
        let mut landed = HashSet::new();
        for origin in self.origins_through(held, shard_id, &intent.last).await? {
            if self.stream_exists(&origin).await? {
                landed.extend(tags_in(&self.redrive.kinesis, &origin, &id, from_ms).await?);
            }
        }
        tracing::info!(redrive = %id, shard = shard_id, found = landed.len(),
            "resuming a batch a stopped run left: what it wrote is not written again");
        self.walk(
            held,
            shard_id,
            Bound::Through(&intent.last),
            &landed,
            Some(intent),
        )
        .await
    }

    /// The origin streams of the dead letters after the shard's checkpoint up to `last`.
    async fn origins_through(
        &self,
        held: &HeldProgress,
        shard_id: &str,
        last: &str,
    ) -> Result<HashSet<String>, RedriveError> {
        let mut origins = HashSet::new();
        let mut pages = self.open(shard_id, held.progress.done.as_deref()).await?;
        'pages: while let Some(page) = pages.next_page().await? {
            for letter in page {
                let unwrapped = ruststream_runtime::envelope::unwrap(&letter.data);
                if let Some(origin) =
                    ruststream_runtime::dead_letter::DeadLetterOrigin::from_headers(
                        &unwrapped.headers,
                    )
                {
                    origins.insert(origin.stream);
                }
                if !before(&letter.sequence_number, last) {
                    break 'pages;
                }
            }
        }
        Ok(origins)
    }

    async fn open(&self, shard_id: &str, done: Option<&str>) -> Result<ShardPages, RedriveError> {
        let from = done.map_or(Position::Horizon, Position::After);
        ShardPages::open(
            &self.redrive.kinesis,
            &self.redrive.spec.stream,
            shard_id,
            from,
        )
        .await
    }

    /// Settles the shard's dead letters from its checkpoint to `bound`, in batches; those
    /// whose tag is in `landed` are counted as written, not written again.
    async fn walk(
        &mut self,
        held: &mut HeldProgress,
        shard_id: &str,
        bound: Bound<'_>,
        landed: &HashSet<String>,
        pending: Option<&Intent>,
    ) -> Result<(), RedriveError> {
        let mut pages = self.open(shard_id, held.progress.done.as_deref()).await?;
        let until = self.filter.until_ms.unwrap_or(u64::MAX);
        let mut batch: Vec<(DeadLetter, Verdict)> = Vec::new();
        'pages: while let Some(page) = pages.next_page().await? {
            for letter in page {
                let last = match &bound {
                    Bound::Until if letter.arrival_ms > until => break 'pages,
                    Bound::Until => false,
                    Bound::Through(last) => !before(&letter.sequence_number, last),
                };
                let verdict = self.judge(&letter).await?;
                // Waiting for the quota comes before the batch's intent is stored: a batch
                // is written as soon as it is marked.
                if let Verdict::Redrive(redriven) = &verdict
                    && !landed.contains(&redriven.tag)
                {
                    self.wait_quota(held, redriven).await?;
                }
                batch.push((letter, verdict));
                if batch.len() >= BATCH {
                    self.settle(held, std::mem::take(&mut batch), landed, pending)
                        .await?;
                }
                if last {
                    break 'pages;
                }
            }
        }
        self.settle(held, batch, landed, pending).await
    }

    /// The verdict on `letter`, its origin stream's existence included.
    async fn judge(&mut self, letter: &DeadLetter) -> Result<Verdict, RedriveError> {
        let spec = &self.redrive.spec;
        let verdict = judge(
            &spec.id,
            &self.filter,
            &self.redrive.tenants,
            letter,
            SystemClock.now_ms(),
        );
        if let Verdict::Redrive(redriven) = &verdict
            && !self.stream_exists(&redriven.origin.stream).await?
        {
            return Ok(Verdict::Skip {
                reason: SkipReason::StreamGone,
                origin: Some(Box::new(redriven.origin.clone())),
            });
        }
        Ok(verdict)
    }

    async fn stream_exists(&mut self, stream: &str) -> Result<bool, RedriveError> {
        if let Some(known) = self.streams.get(stream) {
            return Ok(*known);
        }
        let found = exists(&self.redrive.kinesis, stream).await?;
        self.streams.insert(stream.to_owned(), found);
        Ok(found)
    }

    /// Takes `redriven` from its tenant's write quota, waiting until there is room and
    /// renewing the shard's lease meanwhile.
    async fn wait_quota(
        &self,
        held: &mut HeldProgress,
        redriven: &Redriven,
    ) -> Result<(), RedriveError> {
        let policy = redriven.tenant.policy();
        let size = redriven.record.stream_size();
        let mut waited = Duration::ZERO;
        loop {
            match policy.take_write(SystemClock.now_ms(), size) {
                Ok(()) => return Ok(()),
                Err(wait) => {
                    let wait = wait.min(self.redrive.ttl / 4);
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
            }
            if waited >= self.redrive.ttl / 4 {
                let same = held.progress.clone();
                held.store(self.store(), same, self.redrive.ttl).await?;
                waited = Duration::ZERO;
            }
        }
    }

    /// Stores the intent of `batch`, writes it, then moves the checkpoint past it.
    async fn settle(
        &mut self,
        held: &mut HeldProgress,
        batch: Vec<(DeadLetter, Verdict)>,
        landed: &HashSet<String>,
        pending: Option<&Intent>,
    ) -> Result<(), RedriveError> {
        let Some((last_letter, _)) = batch.last() else {
            return Ok(());
        };
        let last = last_letter.sequence_number.clone();
        let ttl = self.redrive.ttl;
        // A resumed intent stands until the checkpoint passes its last record: what its run
        // wrote beyond this batch is only known from the tags collected for it.
        let still_pending = pending.filter(|p| before(&last, &p.last)).cloned();
        let intent = still_pending.clone().unwrap_or_else(|| Intent {
            last: last.clone(),
            from_ms: pending.map_or_else(|| SystemClock.now_ms(), |p| p.from_ms),
        });
        let mut by_stream: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        for (_, verdict) in &batch {
            if let Verdict::Redrive(r) = verdict
                && !landed.contains(&r.tag)
            {
                by_stream
                    .entry(r.origin.stream.as_str())
                    .or_default()
                    .push(r.record.clone());
            }
        }
        let before_batch = held.progress.clone();
        if !by_stream.is_empty() {
            let mut marked = before_batch.clone();
            marked.intent = Some(intent);
            held.store(self.store(), marked, ttl).await?;
            for (stream, records) in &by_stream {
                for chunk in records.chunks(stream::PUT_LIMIT) {
                    put(&self.redrive.kinesis, stream, chunk, ttl / 2).await?;
                }
            }
            self.published += 1;
            if let Some(hook) = &self.redrive.hook {
                hook(self.published);
            }
        }
        let mut after = before_batch.clone();
        after.done = Some(last);
        after.intent = still_pending;
        let mut refused: Vec<Refused> = Vec::new();
        for (letter, verdict) in &batch {
            match verdict {
                Verdict::Passed => {}
                Verdict::Redrive(_) => after.redriven += 1,
                Verdict::Skip { reason, origin } => {
                    *after.skipped.entry(reason.label().to_owned()).or_default() += 1;
                    refused.push(Refused {
                        shard: letter.shard_id.clone(),
                        sequence: letter.sequence_number.clone(),
                        origin_stream: origin.as_ref().map(|o| o.stream.clone()),
                        tenant: origin.as_ref().map(|o| o.tenant.clone()),
                        reason: *reason,
                    });
                }
            }
        }
        let room = LISTED.saturating_sub(after.refused.len());
        after.refused.extend(refused.iter().take(room).cloned());
        held.store(self.store(), after.clone(), ttl).await?;
        self.account(&after, &before_batch, &refused, true);
        Ok(())
    }

    /// Adds what moved from `before` to `now` to the report; when this run settled it
    /// (`settled`), to the metrics and the run's own count too.
    fn account(
        &self,
        now: &ShardProgress,
        before: &ShardProgress,
        refused: &[Refused],
        settled: bool,
    ) {
        let id = &self.redrive.spec.id;
        let counter = |outcome: &'static str, reason: String| {
            metrics::counter!(
                crate::metrics::REDRIVE_RECORDS,
                vec![
                    Label::new("redrive", id.clone()),
                    Label::new("outcome", outcome),
                    Label::new("reason", reason),
                ]
            )
        };
        let redriven = now.redriven.saturating_sub(before.redriven);
        let mut report = lock(&self.redrive.report);
        report.redriven += redriven;
        for (reason, count) in &now.skipped {
            let added = count.saturating_sub(before.skipped.get(reason).copied().unwrap_or(0));
            *report.skipped.entry(reason.clone()).or_default() += added;
            if settled {
                counter("skipped", reason.clone()).increment(added);
            }
        }
        if settled {
            report.redriven_now += redriven;
            counter("redriven", String::new()).increment(redriven);
        }
        let room = LISTED.saturating_sub(report.refused.len());
        report.refused.extend(refused.iter().take(room).cloned());
    }

    /// Adds what the shard would do to `plan`.
    async fn plan_shard(
        &mut self,
        shard_id: &str,
        plan: &mut DryRun,
        first: usize,
    ) -> Result<(), RedriveError> {
        let spec = &self.redrive.spec;
        let key = shard_key(&spec.stream, shard_id, &spec.id);
        let stored = self
            .store()
            .read(&key)
            .await?
            .and_then(|row| row.checkpoint);
        let progress = ShardProgress::parse(&key, stored.as_deref())?;
        if progress.finished {
            return Ok(());
        }
        let mut pages = self.open(shard_id, progress.done.as_deref()).await?;
        let until = self.filter.until_ms.unwrap_or(u64::MAX);
        'pages: while let Some(page) = pages.next_page().await? {
            for letter in page {
                if letter.arrival_ms > until {
                    break 'pages;
                }
                match self.judge(&letter).await? {
                    Verdict::Passed => {}
                    Verdict::Skip { reason, .. } => {
                        *plan.refused.entry(reason.label().to_owned()).or_default() += 1;
                    }
                    Verdict::Redrive(r) => {
                        let origin = &r.origin;
                        *plan
                            .moves
                            .entry(origin.stream.clone())
                            .or_default()
                            .entry(origin.reason.clone())
                            .or_default() += 1;
                        if plan.first.len() < first {
                            plan.first.push(Planned {
                                shard: letter.shard_id.clone(),
                                sequence: letter.sequence_number.clone(),
                                origin_stream: origin.stream.clone(),
                                tenant: origin.tenant.clone(),
                                subscriber: origin.subscriber.clone(),
                                reason: origin.reason.clone(),
                                partition_key: letter.partition_key.clone(),
                            });
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_derived_from_the_stream_and_filter_alone() {
        let filter = RedriveFilter {
            tenant: Some("acme".into()),
            ..RedriveFilter::default()
        };
        let a = RedriveSpec::new("orders.dead", filter.clone(), None);
        assert_eq!(a, RedriveSpec::new("orders.dead", filter.clone(), None));
        assert_ne!(a.id, RedriveSpec::new("refunds.dead", filter, None).id);
        assert!(a.id.starts_with("rd-") && a.id.len() == 19, "{}", a.id);
        assert_eq!(
            RedriveSpec::new("s", RedriveFilter::default(), Some("mine".into())).id,
            "mine"
        );
        assert!(before("99", "100") && before("100", "101") && !before("101", "101"));
    }
}
