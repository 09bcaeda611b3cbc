//! A running app: its subscriptions, the version of its component they run, and swaps to a new
//! version (hot-load) with an automatic rollback when the new one fails more than the old.
//!
//! A swap publishes a release to every subscription that both versions declare (same name and
//! stream); their shard workers change over between two calls, keeping leases, checkpoints,
//! held records and pending copies. Subscriptions only the new version declares start;
//! subscriptions it no longer declares stop, flush their checkpoints and release their leases.
//!
//! A subscription with a retry stream (an operator's setting) reads it beside its own stream,
//! with a coordinator of its own whose lease keys always name the subscriber (the retry
//! stream's shards are the subscription's alone): its copies go there and are handled from
//! there, so the stream's other readers never see them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tracing::Instrument as _;

use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;
use ruststream_runtime::{
    LoadedComponent, Tenant,
    app::{StartPosition, SubscriptionSpec},
    rollout::Verdict,
    tenant::TenantError,
};

use super::coordinator;
use super::release::{Release, SubscriptionRelease};
use super::seek::{SeekError, SeekRequest};
use super::settings::{OperatorSettings, admit_settings};
use super::shadow::{ShadowRelease, ShadowStatus};
use super::status::{AppVersions, RolloutStatus, StatusBoard, SubscriptionStatus};
use super::worker::{WorkerContext, short};
use super::{Deployment, Host};
use crate::kinesis::{ReadMode, consumer_name};
use crate::lease::LeaseStore;
use crate::metrics::LeaseMetrics;

/// How often a rollout in progress is judged.
const ROLLOUT_CHECK: Duration = Duration::from_millis(20);

/// Why a new version was not swapped in (or a rollback not done). The running version goes
/// on serving in every case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SwapError {
    /// The new version declares another app name: its checkpoints live under the app's name,
    /// so a rename is a new app, not a new version.
    #[error(
        "component `{component}` declares app `{to}`, but it replaces app `{from}`: an app \
         keeps its name across versions (its checkpoints are kept under it)"
    )]
    Renamed {
        /// The component file or upload.
        component: String,
        /// The running app.
        from: String,
        /// The name the new version declares.
        to: String,
    },
    /// The tenant is not granted a stream the new version reads or dead-letters into.
    #[error(transparent)]
    Refused(#[from] TenantError),
    /// The new version would move a running subscription's leases to other keys: a second
    /// subscription of the app now reads its stream, or the last other one no longer does.
    #[error(
        "subscription `{subscriber}` would change its lease keys: the number of the app's \
         subscriptions reading stream `{stream}` changes between one and several. Keep it, \
         or deploy the new subscription in another app"
    )]
    LeaseKeys {
        /// The running subscription.
        subscriber: String,
        /// Its stream.
        stream: String,
    },
    /// A rollback was asked with no earlier version to return to.
    #[error("app `{app}` has no earlier version to roll back to")]
    NothingToRollBack {
        /// The app.
        app: String,
    },
}

/// What a swap or rollback did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swapped {
    /// Subscriptions that changed over to the new version.
    pub kept: Vec<String>,
    /// Subscriptions the new version added, now starting.
    pub started: Vec<String>,
    /// Subscriptions the new version dropped, now stopping.
    pub stopped: Vec<String>,
}

/// A deployment running on a host.
pub struct RunningApp {
    name: String,
    tenant: Arc<Tenant>,
    core: Arc<Mutex<AppCore>>,
    /// Stops the app's own tasks (the dropped-line reporter, rollout judges).
    shutdown: watch::Sender<bool>,
    /// Set once every task of the app ended after a shutdown: checkpoints flushed, leases
    /// released.
    stopped: watch::Sender<bool>,
}

/// A running subscription: how to reach its coordinator and workers.
struct Subscription {
    stream: String,
    shared_stream: bool,
    /// The enhanced fan-out consumer it reads through, when it reads by fan-out.
    consumer: Option<String>,
    release: watch::Sender<Arc<SubscriptionRelease>>,
    /// The readers of its retry stream, when it has one.
    retry: Option<RetryReaders>,
    stop: watch::Sender<bool>,
    board: StatusBoard,
    seeks: mpsc::Sender<SeekRequest>,
    /// Set once its coordinator ended: every worker flushed and let its lease go.
    ended: watch::Receiver<bool>,
    /// The app's shadow version, as its workers follow it.
    shadow: watch::Sender<Option<Arc<ShadowRelease>>>,
}

/// The readers of a subscription's retry stream: what its coordinator's workers run, and their
/// status (a subscription of its own in [`RunningApp::status`], on the retry stream).
struct RetryReaders {
    stream: String,
    release: watch::Sender<Arc<SubscriptionRelease>>,
    board: StatusBoard,
}

impl Subscription {
    /// Whether `next` reads what this subscription reads: the same stream, the same retry
    /// stream (a version that changes either starts afresh once this one is drained).
    fn reads_as(&self, next: &SubscriptionRelease) -> bool {
        self.stream == next.spec.stream
            && self.retry.as_ref().map(|r| r.stream.as_str()) == next.spec.retry_stream.as_deref()
    }

    /// Hands `next` to its workers, and to its retry stream's.
    fn follow(&self, next: Arc<SubscriptionRelease>) {
        if let Some((retry, next)) = self.retry.as_ref().zip(next.reading_retry_stream()) {
            retry.release.send_replace(next);
        }
        self.release.send_replace(next);
    }

    /// Its status, and its retry stream's.
    fn status(&self) -> impl Iterator<Item = SubscriptionStatus> {
        let retry = self.retry.as_ref().map(|r| r.board.snapshot());
        std::iter::once(self.board.snapshot()).chain(retry)
    }
}

/// The mutable part of a running app, shared with its rollout judge.
struct AppCore {
    host: Host,
    tenant: Arc<Tenant>,
    store: Arc<dyn LeaseStore>,
    subscriptions: BTreeMap<String, Subscription>,
    tasks: JoinSet<()>,
    current: Arc<Release>,
    previous: Option<Arc<Release>>,
    rollout: Option<RolloutStatus>,
    rollbacks: u64,
    /// Bumped by every swap: a rollout judge of an older swap stands down.
    generation: u64,
    /// The generation, for whoever follows the app's version changes (see
    /// [`RunningApp::version_changes`]).
    published: watch::Sender<u64>,
    /// The app's span (tenant, app): parent of its subscriptions' spans.
    span: tracing::Span,
    /// Subscriptions a swap stopped, until their workers are done: one started again by the
    /// same name (a rollback re-adding it) waits for them, so a shard never has two workers
    /// of one subscription.
    draining: HashMap<String, watch::Receiver<bool>>,
    /// The version run beside the current one as a shadow, if any.
    shadow: Option<Arc<ShadowRelease>>,
}

impl RunningApp {
    pub(crate) fn start(host: &Host, deployment: Deployment) -> Result<Self, TenantError> {
        deployment.tenant.admit(&deployment.component)?;
        admit_settings(
            &deployment.tenant,
            &deployment.component,
            &deployment.settings,
        )?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let window = host.config.rollout.calls;
        let name = deployment.component.app().name.clone();
        let current = Arc::new(Release::new(
            host,
            deployment.component,
            &deployment.tenant,
            deployment.settings,
            window,
        ));
        let mut core = AppCore {
            host: host.clone(),
            tenant: deployment.tenant.clone(),
            store: deployment.lease_store,
            subscriptions: BTreeMap::new(),
            tasks: JoinSet::new(),
            current: current.clone(),
            previous: None,
            rollout: None,
            rollbacks: 0,
            generation: 0,
            published: watch::Sender::new(0),
            span: tracing::info_span!(parent: None, "app", tenant = %deployment.tenant.name(), app = %name),
            draining: HashMap::new(),
            shadow: None,
        };
        let specs = &current.component.app().subscriptions;
        for spec in specs.iter().filter(|s| current.enabled(&s.name)) {
            core.start_subscription(spec, shared_stream(specs, &spec.stream));
        }
        core.tasks.spawn(super::report_dropped_lines(
            deployment.tenant.clone(),
            host.log.clone(),
            shutdown_rx,
        ));
        Ok(Self {
            name,
            tenant: deployment.tenant,
            core: Arc::new(Mutex::new(core)),
            shutdown,
            stopped: watch::Sender::new(false),
        })
    }

    /// The app's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tenant running the app: its quarantine status, and `resume`.
    pub fn tenant(&self) -> &Arc<Tenant> {
        &self.tenant
    }

    /// Every running subscription's status; a subscription with a retry stream has a second
    /// one, of the same name, on its retry stream.
    pub fn status(&self) -> Vec<SubscriptionStatus> {
        let core = self.lock();
        core.subscriptions
            .values()
            .flat_map(Subscription::status)
            .collect()
    }

    /// Which versions run, and how the last swap's rollout is going.
    pub fn versions(&self) -> AppVersions {
        let core = self.lock();
        AppVersions {
            current: core.current.info(),
            previous: core.previous.as_ref().map(|p| p.info()),
            rollout: core.rollout.clone(),
            rollbacks: core.rollbacks,
        }
    }

    /// Changes whenever another version becomes the running one (a swap, a rollback by an
    /// operator or by the rollout judge); read [`versions`](Self::versions) then. Ends when
    /// the app is dropped.
    pub fn version_changes(&self) -> watch::Receiver<u64> {
        self.lock().published.subscribe()
    }

    /// The running version's component.
    pub fn component(&self) -> LoadedComponent {
        self.lock().current.component.clone()
    }

    /// Waits until `ready` holds for the status, polling every 50 ms, at most `timeout`.
    /// Returns whether it held.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        ready: impl Fn(&[SubscriptionStatus]) -> bool,
    ) -> bool {
        tokio::time::timeout(timeout, async {
            while !ready(&self.status()) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .is_ok()
    }

    /// Swaps in a new version of the app's component. Checked first (same app name, streams
    /// granted, no lease key moves); then each shard changes over at its next call boundary:
    /// calls in flight finish on the old version, records after them go to the new one, and
    /// checkpoints go on where they stood. The old version is kept for a rollback, and the new
    /// one is judged over its first calls against the old one's last (the host's
    /// [`RolloutPolicy`](ruststream_runtime::rollout::RolloutPolicy)): if it fails more than
    /// the margin allows, the app swaps back by itself. `settings` replace the operator's settings.
    ///
    /// # Errors
    /// [`SwapError`] when the new version is refused; nothing changes then.
    pub fn swap(
        &self,
        component: LoadedComponent,
        settings: HashMap<String, OperatorSettings>,
    ) -> Result<Swapped, SwapError> {
        let mut core = self.lock();
        self.admit(&core, &component, &settings)?;
        let window = core.host.config.rollout.calls;
        let release = Arc::new(Release::new(
            &core.host,
            component,
            &self.tenant,
            settings,
            window,
        ));
        let promoted = core
            .shadow
            .as_ref()
            .is_some_and(|s| s.component.content_hash() == release.component.content_hash());
        if promoted {
            core.set_shadow(None);
        }
        let swapped = core.publish(release, false);
        crate::metrics::swapped(self.tenant.name(), &self.name);
        core.rollout = Some(RolloutStatus {
            calls: 0,
            failures: 0,
            judged_over: window,
            replaced_failure_permille: 0,
            verdict: "pending".to_owned(),
        });
        let judge = judge_rollout(
            Arc::downgrade(&self.core),
            core.generation,
            self.shutdown.subscribe(),
        );
        core.tasks.spawn(judge);
        Ok(swapped)
    }

    /// Runs `component` beside the running version as its shadow, replacing any shadow
    /// before: each shard's worker feeds it what the running version settled (a
    /// `sample_rate` share of the records, in (0, 1]), through a queue it never waits on. The
    /// shadow has no effects: its publishes are answered as accepted and never written, its
    /// outcomes settle nothing, its traps quarantine nobody; each record is compared with the
    /// running version's ([`shadow`](Self::shadow)). Swapping the shadow's build in (a
    /// promotion, through [`swap`](Self::swap)) ends it.
    ///
    /// # Errors
    /// [`SwapError`] when the component could not be swapped in (another app, streams not
    /// granted): a shadow is checked as the swap it is meant to become.
    pub fn start_shadow(
        &self,
        component: LoadedComponent,
        sample_rate: f64,
    ) -> Result<(), SwapError> {
        let mut core = self.lock();
        let settings = core.current.settings.clone();
        self.admit(&core, &component, &settings)?;
        let shadow = ShadowRelease::new(&core.host, component, &self.tenant, sample_rate, settings);
        tracing::info!(tenant = %self.tenant.name(), app = %self.name,
            version = %shadow.component.app().version,
            hash = %short(shadow.component.content_hash()), sample_rate,
            "shadow version started beside the running one");
        core.set_shadow(Some(Arc::new(shadow)));
        Ok(())
    }

    /// Stops the shadow version, if one runs; returns whether one did. Its counts end with it.
    pub fn stop_shadow(&self) -> bool {
        let mut core = self.lock();
        let stopped = core.shadow.is_some();
        if stopped {
            tracing::info!(tenant = %self.tenant.name(), app = %self.name, "shadow version dropped");
        }
        core.set_shadow(None);
        stopped
    }

    /// The shadow version, if one runs: what it is, and how it compares so far.
    pub fn shadow(&self) -> Option<ShadowStatus> {
        self.lock().shadow.as_ref().map(|s| s.status())
    }

    /// The shadow version's component, if one runs (what a promotion swaps in).
    pub fn shadow_component(&self) -> Option<LoadedComponent> {
        self.lock().shadow.as_ref().map(|s| s.component.clone())
    }

    /// Returns to the version the last swap replaced, at once (an operator's decision).
    /// Shards holding records read again from their checkpoint, so the held records reach the
    /// version rolled back to.
    ///
    /// # Errors
    /// [`SwapError::NothingToRollBack`] when no swap happened (or it was rolled back already).
    pub fn roll_back(&self, reason: &str) -> Result<Swapped, SwapError> {
        let swapped = self.lock().roll_back(&self.name, reason)?;
        crate::metrics::rolled_back(self.tenant.name(), &self.name, false);
        Ok(swapped)
    }

    /// Returns to `component`, an earlier version an operator chose (it need not be the one the
    /// last swap replaced): checked as a swap is, then made the running version exactly as
    /// [`roll_back`](Self::roll_back) returns to the previous one (no rollout judge, held
    /// records read again); `settings` replace the operator's settings.
    ///
    /// # Errors
    /// [`SwapError`] when the version is refused; nothing changes then.
    pub fn roll_back_to(
        &self,
        component: LoadedComponent,
        settings: HashMap<String, OperatorSettings>,
        reason: &str,
    ) -> Result<Swapped, SwapError> {
        let mut core = self.lock();
        self.admit(&core, &component, &settings)?;
        let window = core.host.config.rollout.calls;
        let release = Release::new(&core.host, component, &self.tenant, settings, window);
        core.previous = Some(Arc::new(release));
        let swapped = core.roll_back(&self.name, reason)?;
        crate::metrics::rolled_back(self.tenant.name(), &self.name, false);
        Ok(swapped)
    }

    /// Repositions a subscription: every shard this host holds (and shards it takes later
    /// without a checkpoint) for horizon, latest and timestamp; one shard for a sequence.
    /// Each moved shard starts its checkpoint bookkeeping afresh: acks of records delivered
    /// before the seek never move its checkpoint. Returns the shards moved.
    ///
    /// # Errors
    /// [`SeekError::NotOwned`] for a sequence on a shard this host does not hold (the others
    /// keep flowing), and when the subscriber is unknown, stopped, or a shard cannot reopen.
    pub async fn seek(
        &self,
        subscriber: &str,
        position: StartPosition,
    ) -> Result<Vec<String>, SeekError> {
        self.send_seek(subscriber, position, None).await
    }

    /// Carries out fleet seek `mark` (a recorded seek's id; ids only grow): like
    /// [`seek`](Self::seek), but each shard moves once across the fleet. A shard held here
    /// moves unless its lease row says this seek (or a later one) moved it already, and the
    /// new position is stored at once with the mark; a shard taken later whose row's mark is
    /// older moves when it is taken (one with no checkpoint starts there too). So a shard
    /// handed over between two hosts' reads of the seek is moved by whichever holds it.
    /// Returns the shards moved here now. A sequence names one shard; held elsewhere, its
    /// holder moves it, so that is not an error here.
    ///
    /// # Errors
    /// The subscriber is unknown or stopped, or a shard cannot reopen.
    pub async fn seek_marked(
        &self,
        subscriber: &str,
        position: StartPosition,
        mark: u64,
    ) -> Result<Vec<String>, SeekError> {
        self.send_seek(subscriber, position, Some(mark)).await
    }

    /// Whether the app has a subscriber named `subscriber`.
    pub fn has_subscriber(&self, subscriber: &str) -> bool {
        self.lock().subscriptions.contains_key(subscriber)
    }

    async fn send_seek(
        &self,
        subscriber: &str,
        position: StartPosition,
        mark: Option<u64>,
    ) -> Result<Vec<String>, SeekError> {
        let stopped = || SeekError::Stopped(subscriber.to_owned());
        let coordinator = self
            .lock()
            .subscriptions
            .get(subscriber)
            .map(|s| s.seeks.clone())
            .ok_or_else(|| SeekError::UnknownSubscriber(subscriber.to_owned()))?;
        let (reply, answer) = oneshot::channel();
        coordinator
            .send(SeekRequest {
                position,
                mark,
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Graceful shutdown: stop fetching, let in-flight calls finish (bounded by the grace
    /// period), flush checkpoints, release leases; returns once all of it is done. The
    /// stopping runs on a task of its own: a caller that stops waiting (a reload cancelled by
    /// SIGTERM) cancels none of it, and every caller waits for the same end.
    pub async fn shutdown(&self) {
        let first = !self.shutdown.send_replace(true);
        if first {
            let mut tasks = {
                let mut core = self.lock();
                for subscription in core.subscriptions.values() {
                    subscription.stop.send_replace(true);
                }
                // A shadow settles nothing: it gets no part of the grace.
                if let Some(shadow) = &core.shadow {
                    shadow.withdraw();
                }
                std::mem::take(&mut core.tasks)
            };
            let stopped = self.stopped.clone();
            tokio::spawn(async move {
                while tasks.join_next().await.is_some() {}
                stopped.send_replace(true);
            });
        }
        let _ = self.stopped.subscribe().wait_for(|stopped| *stopped).await;
    }

    /// Deregisters the enhanced fan-out consumers of the app's subscriptions, for an app
    /// undeployed for good (never on a restart, a swap or a handoff, which read on through
    /// them). Call it once the app has stopped. A consumer is deregistered only when no other
    /// host runs its subscription, as the app's lease table says: another host's presence row
    /// keeps it (a crashed host's too, until its row is forgotten), and so does a lease table
    /// that cannot be read. What is done, kept or failed is logged, naming the consumer: a
    /// consumer left registered costs until someone deregisters it.
    pub async fn deregister_consumers(&self) {
        let (host, store, consumers) = {
            let core = self.lock();
            let consumers: Vec<(String, String, String)> = (core.subscriptions.iter())
                .filter_map(|(name, subscription)| {
                    let scope = coordinator::lease_key(
                        &subscription.stream,
                        "",
                        name,
                        subscription.shared_stream,
                    )
                    .scope();
                    let consumer = subscription.consumer.clone()?;
                    Some((subscription.stream.clone(), consumer, scope))
                })
                .collect();
            (core.host.clone(), core.store.clone(), consumers)
        };
        if consumers.is_empty() {
            return;
        }
        let owner = &host.config.owner_id;
        let hosts = match store.list_all().await {
            Ok(table) => table.hosts,
            Err(error) => {
                tracing::warn!(app = %self.name(), store = %store.describe(), error = %one_line(&error),
                    "the app's lease table cannot be read: its enhanced fan-out consumers are kept");
                return;
            }
        };
        for (stream, consumer, scope) in consumers {
            let others: Vec<&str> = (hosts.iter())
                .filter(|row| row.scope == scope && row.owner != *owner)
                .map(|row| row.owner.as_str())
                .collect();
            if !others.is_empty() {
                tracing::info!(stream, consumer, hosts = ?others,
                    "the enhanced fan-out consumer is kept: other hosts run the app");
                continue;
            }
            match host
                .consumers
                .deregister(&host.client, &stream, &consumer)
                .await
            {
                Ok(()) => tracing::info!(
                    stream,
                    consumer,
                    "deregistered the app's enhanced fan-out consumer"
                ),
                Err(error) => tracing::warn!(stream, consumer, error = %one_line(&error),
                    "deregistering the app's enhanced fan-out consumer failed; it stays registered"),
            }
        }
    }

    /// Stops everything at once, as a crash would: no flush, no release. Leases expire for
    /// other hosts to take.
    pub fn abort(&self) {
        let mut tasks = std::mem::take(&mut self.lock().tasks);
        tasks.abort_all();
        tasks.detach_all();
    }

    /// Whether `component` may take this app's place with `settings`: the same app, its
    /// streams granted, its settings admitted, no subscription's lease key moved (a swap, a
    /// rollback and a shadow are checked alike).
    fn admit(
        &self,
        core: &AppCore,
        component: &LoadedComponent,
        settings: &HashMap<String, OperatorSettings>,
    ) -> Result<(), SwapError> {
        if component.app().name != self.name {
            return Err(SwapError::Renamed {
                component: component.name().to_owned(),
                from: self.name.clone(),
                to: component.app().name.clone(),
            });
        }
        core.tenant.admit(component)?;
        admit_settings(&core.tenant, component, settings)?;
        core.check_lease_keys(&component.app().subscriptions)
    }

    fn lock(&self) -> MutexGuard<'_, AppCore> {
        lock(&self.core)
    }
}

impl AppCore {
    fn start_subscription(&mut self, spec: &SubscriptionSpec, shared_stream: bool) {
        let release = self.current.for_subscription(spec, self.rollbacks);
        let retry_release = release.reading_retry_stream();
        let (release_tx, release_rx) = watch::channel(release);
        let (stop, stop_rx) = watch::channel(false);
        let board = StatusBoard::new(&spec.name, &spec.stream, self.host.reads.pacing().clone());
        let (seeks, seek_rx) = mpsc::channel(8);
        let (shadow, shadow_rx) = watch::channel(self.shadow.clone());
        let host = &self.host;
        let app = &self.current.component.app().name;
        let read = (self.current.settings.get(&spec.name))
            .and_then(|settings| settings.read)
            .unwrap_or_default();
        let consumer_of_app = consumer_name(
            self.tenant.name(),
            app,
            shared_stream.then_some(spec.name.as_str()),
        );
        let consumer = (read == ReadMode::FanOut).then(|| consumer_of_app.clone());
        let ctx = WorkerContext {
            client: host.client.clone(),
            listings: host.listings.clone(),
            reads: host.reads.clone(),
            read,
            consumer: consumer_of_app,
            consumers: host.consumers.clone(),
            subscriber: spec.name.clone(),
            stream: spec.stream.clone(),
            tenant: self.tenant.clone(),
            clock: host.clock.clone(),
            release: release_rx,
            seek_start: None,
            store: self.store.clone(),
            config: host.config.clone(),
            status: board.clone(),
            shutdown: stop_rx,
            shadow: shadow_rx,
            leases: LeaseMetrics::new(
                self.tenant.name(),
                app,
                &spec.name,
                self.tenant.policy().limits().max_metric_series,
            ),
        };
        // The retry stream's readers: the same subscription on another stream, keyed by
        // subscriber whatever else reads it, started where nothing is checkpointed at its
        // oldest record, and moved by no seek (its copies are owed wherever the stream is).
        let (retry, retry_ctx) = match retry_release {
            Some(retry_release) => {
                let stream = retry_release.spec.stream.clone();
                let board = StatusBoard::new(&spec.name, &stream, host.reads.pacing().clone());
                let (release, release_rx) = watch::channel(retry_release);
                let retry_ctx = WorkerContext {
                    stream: stream.clone(),
                    release: release_rx,
                    status: board.clone(),
                    ..ctx.clone()
                };
                let readers = RetryReaders {
                    stream,
                    release,
                    board,
                };
                (Some(readers), Some(retry_ctx))
            }
            None => (None, None),
        };
        // Every line about the subscription (its shards, leases, calls and the component's own
        // lines) carries tenant, app, subscriber and stream through this span.
        let span = tracing::info_span!(parent: &self.span, "subscription", subscriber = %spec.name, stream = %spec.stream);
        let retry_span = retry.as_ref().map(|r| {
            tracing::info_span!(parent: &self.span, "subscription", subscriber = %spec.name, stream = %r.stream)
        });
        let (ended_tx, ended) = watch::channel(false);
        let before = self.draining.remove(&spec.name);
        self.tasks.spawn(
            async move {
                if let Some(mut before) = before {
                    let _ = before.wait_for(|ended| *ended).await;
                }
                let retries = async move {
                    if let Some((retry_ctx, retry_span)) = retry_ctx.zip(retry_span) {
                        // No seek reaches it: its sender is gone from the start.
                        let (_, no_seeks) = mpsc::channel(1);
                        coordinator::run(retry_ctx, true, no_seeks)
                            .instrument(retry_span)
                            .await;
                    }
                };
                tokio::join!(coordinator::run(ctx, shared_stream, seek_rx), retries);
                ended_tx.send_replace(true);
            }
            .instrument(span),
        );
        let subscription = Subscription {
            stream: spec.stream.clone(),
            shared_stream,
            consumer,
            release: release_tx,
            retry,
            stop,
            board,
            seeks,
            ended,
            shadow,
        };
        self.subscriptions.insert(spec.name.clone(), subscription);
    }

    /// Makes `shadow` the app's shadow (none: no shadow) on every running subscription; the
    /// one it replaces is withdrawn at once (its calls stopped, its queues dropped).
    fn set_shadow(&mut self, shadow: Option<Arc<ShadowRelease>>) {
        for subscription in self.subscriptions.values() {
            subscription.shadow.send_replace(shadow.clone());
        }
        if let Some(old) = std::mem::replace(&mut self.shadow, shadow)
            && !self
                .shadow
                .as_ref()
                .is_some_and(|new| Arc::ptr_eq(new, &old))
        {
            old.withdraw();
        }
    }

    /// Refuses a version under which a running subscription's lease keys would change.
    fn check_lease_keys(&self, specs: &[SubscriptionSpec]) -> Result<(), SwapError> {
        for spec in specs {
            let Some(running) = self.subscriptions.get(&spec.name) else {
                continue;
            };
            if running.stream == spec.stream
                && running.shared_stream != shared_stream(specs, &spec.stream)
            {
                return Err(SwapError::LeaseKeys {
                    subscriber: spec.name.clone(),
                    stream: spec.stream.clone(),
                });
            }
        }
        Ok(())
    }

    /// Makes `release` the running version: subscriptions it shares with the running one
    /// (same name, stream and retry stream) change over, its new ones start, the ones it drops
    /// stop; one whose stream or retry stream changes stops and starts again once drained.
    fn publish(&mut self, release: Arc<Release>, rewind: bool) -> Swapped {
        if rewind {
            self.rollbacks += 1;
        }
        self.generation += 1;
        self.published.send_replace(self.generation);
        let old = std::mem::replace(&mut self.current, release.clone());
        // Its pipelines call it no more once their call in flight ends; its failures from
        // then on quarantine nobody.
        old.calls.retire();
        release.calls.reinstate();
        self.previous = Some(old);
        let specs = &release.component.app().subscriptions;
        let mut swapped = Swapped {
            kept: Vec::new(),
            started: Vec::new(),
            stopped: Vec::new(),
        };
        let enabled: Vec<&SubscriptionSpec> =
            specs.iter().filter(|s| release.enabled(&s.name)).collect();
        let wanted: HashMap<&str, &SubscriptionSpec> =
            enabled.iter().map(|s| (s.name.as_str(), *s)).collect();
        let names: Vec<String> = self.subscriptions.keys().cloned().collect();
        for name in names {
            let keeps = wanted
                .get(name.as_str())
                .map(|spec| release.for_subscription(spec, self.rollbacks))
                .zip(self.subscriptions.get(&name))
                .filter(|(next, running)| running.reads_as(next));
            match keeps {
                Some((next, running)) => {
                    running.follow(next);
                    swapped.kept.push(name);
                }
                None => {
                    if let Some(gone) = self.subscriptions.remove(&name) {
                        gone.stop.send_replace(true);
                        self.draining.insert(name.clone(), gone.ended);
                    }
                    swapped.stopped.push(name);
                }
            }
        }
        for spec in enabled {
            if !self.subscriptions.contains_key(&spec.name) {
                self.start_subscription(spec, shared_stream(specs, &spec.stream));
                swapped.started.push(spec.name.clone());
            }
        }
        swapped
    }

    fn roll_back(&mut self, app: &str, reason: &str) -> Result<Swapped, SwapError> {
        let previous = self
            .previous
            .take()
            .ok_or_else(|| SwapError::NothingToRollBack {
                app: app.to_owned(),
            })?;
        let from = self.current.info();
        let to = previous.info();
        let swapped = self.publish(previous, true);
        // Nothing to return to from here: a rollback is not itself rolled back.
        self.previous = None;
        if let Some(rollout) = &mut self.rollout {
            rollout.verdict = format!("rolled back: {reason}");
        }
        tracing::warn!(tenant = %self.tenant.name(), app, from = %from.version,
            from_hash = %short(&from.content_hash), to = %to.version,
            to_hash = %short(&to.content_hash), %reason, "rolled back to the previous version");
        Ok(swapped)
    }
}

/// Whether several of `specs` read `stream` (their lease keys then name the subscriber).
fn shared_stream(specs: &[SubscriptionSpec], stream: &str) -> bool {
    specs.iter().filter(|s| s.stream == stream).count() > 1
}

/// Judges the rollout of swap `generation` until it has a verdict, the app swaps again, or it
/// stops. A version that gets its tenant quarantined is rolled back too, and the tenant
/// resumed: the quarantine stopped it before its window could fill. Where the policy leaves
/// verdicts to a fleet's judge, it only keeps the counts that judge reads.
async fn judge_rollout(
    core: Weak<Mutex<AppCore>>,
    generation: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(ROLLOUT_CHECK) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let Some(core) = core.upgrade() else { return };
        let mut core = lock(&core);
        if core.generation != generation {
            return;
        }
        let Some(old) = core.previous.clone() else {
            return;
        };
        let new = core.current.calls.clone();
        let policy = core.host.config.rollout;
        let old_rate = old.calls.recent_failure_rate();
        let mut verdict = policy.judge(&new, old_rate);
        let app = core.current.component.app().name.clone();
        // Only a quarantine this app's failures caused judges it; another app's is not its
        // doing, and an operator's pause is not a verdict at all.
        let quarantined = core.tenant.is_quarantined_by(&app);
        if quarantined && new.failures() > 0 && verdict == Verdict::Pending {
            verdict = Verdict::RollBack(format!(
                "its tenant was quarantined after {} failed calls",
                new.failures()
            ));
        }
        if let Some(rollout) = &mut core.rollout {
            rollout.calls = new.calls();
            rollout.failures = new.failures();
            rollout.replaced_failure_permille = (old_rate * 1000.0).round() as u32;
        }
        if !policy.local_verdicts {
            // A fleet's judge decides from every host's counts, these among them; a
            // quarantine here stops this host's share until it does.
            continue;
        }
        match verdict {
            Verdict::Pending => continue,
            Verdict::Keep => {
                if let Some(rollout) = &mut core.rollout {
                    rollout.verdict = "kept".to_owned();
                }
                return;
            }
            Verdict::RollBack(reason) => {
                if core.roll_back(&app, &reason).is_ok() {
                    crate::metrics::rolled_back(core.tenant.name(), &app, true);
                }
                if quarantined {
                    core.tenant.lift_quarantine_of(&app);
                }
                return;
            }
        }
    }
}

impl RolloutStatus {
    /// Whether the rollout has a verdict.
    pub fn is_decided(&self) -> bool {
        self.verdict != "pending"
    }
}
