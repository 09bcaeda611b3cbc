//! A live instance of a component, called once per batch (or once per record through
//! `handle`: `handle.rs`), replaced after a trap.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wasmtime::{AsContext as _, CallHook, Store, UpdateDeadline};

use super::Runtime;
use super::batch::BatchLayout;
use super::bindings::exports::ruststream::handler::handler as wit;
use super::exports::{CallForm, Exports, HandlerPre};
use super::phase::LoadPhase;
use super::progress::CallProgress;
use super::state::{CallKind, CallScope, HostState, board_outcomes, sync_progress};
use super::trap::{CallStopped, DeadlineExceeded, TrapKind, classify};
use crate::cpu::{CallClock, Meter, Seat};
use crate::env::Env;
use crate::outcome::Outcome;
use crate::publish::{InstanceNotes, PublishLog};
use crate::record::Deliveries;
use crate::stop::{Stop, cutting};
use ruststream_common::escape::one_line;

/// One batch of one shard, as handed to a component.
pub struct BatchCall<'a> {
    /// Index of the subscription in the component's declaration.
    pub subscription: u32,
    /// The stream the records were read from.
    pub stream: &'a Arc<str>,
    /// The shard they were read from.
    pub shard_id: &'a Arc<str>,
    /// The records, in shard order.
    pub deliveries: Deliveries,
    /// The lease keeper's signal: once it says the lease is lost, the call stops at its next
    /// deadline check or host call, and publishes nothing more.
    pub stop: Option<&'a watch::Receiver<Option<Stop>>>,
}

/// A batch call that did not finish: the outcomes the guest reported before it failed (they
/// stand, in order from the batch's first record), and how the record after them failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {} of the batch failed", settled.len())]
pub struct BatchFailure {
    /// The outcomes of the batch's first records, as the guest reported them: they stand.
    pub settled: Vec<Outcome>,
    /// How the call failed on record `settled.len()`.
    #[source]
    pub failure: CallFailure,
}

/// A call that did not return outcomes: how it failed, and wasmtime's account of it (one
/// line, control characters escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// How it failed: what the record's log line and the tenant's quarantine reason name.
    pub kind: TrapKind,
    /// What happened: wasmtime's error chain (a backtrace's first frames included), or the
    /// host's account of a deadline or a missing outcome.
    pub message: String,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.kind.to_string();
        if self.message.starts_with(&kind) {
            f.write_str(&self.message)
        } else {
            write!(f, "{kind}: {}", self.message)
        }
    }
}

impl std::error::Error for CallFailure {}

/// A component instance owned by one shard pipeline.
///
/// After any failed call the instance is poisoned (wasmtime refuses to enter it again), so it
/// is dropped and the next call runs in a fresh one (≈10-25 µs).
///
/// On a runtime with a compute pool ([`Compute::Pool`](crate::cpu::Compute::Pool)) each call
/// runs on a compute thread, in its tenant's share, its deadline charged its own time (see
/// [`cpu`](crate::cpu)); the caller's executor only waits for it.
pub struct HandlerInstance {
    runtime: Runtime,
    pre: HandlerPre,
    env: Env,
    live: Option<Live>,
    replacements: u64,
    /// The last batch's buffers, reused by the next.
    layout: BatchLayout,
    /// Where accepted publishes are noted, kept across replacements.
    publishes: Option<PublishLog>,
    /// The calls' own time, which their deadlines are charged.
    clock: CallClock,
    /// Whose compute slots its calls take, on a runtime with a compute pool.
    meter: Option<Meter>,
    /// Where publishes (refused, and written) are noted, kept across replacements.
    notes: Option<InstanceNotes>,
    /// A stand-in left behind by a call whose future was dropped while its compute task ran:
    /// that task may still hold the clock and the seat until it is dropped in turn, so the
    /// next call takes fresh ones.
    orphaned: bool,
}

/// A [`BatchCall`] that owns what it refers to, to be moved onto a compute thread: every
/// field a reference count, nothing copied.
struct OwnedCall {
    subscription: u32,
    stream: Arc<str>,
    shard_id: Arc<str>,
    deliveries: Deliveries,
    stop: Option<watch::Receiver<Option<Stop>>>,
}

impl OwnedCall {
    fn of(call: &BatchCall<'_>) -> Self {
        Self {
            subscription: call.subscription,
            stream: call.stream.clone(),
            shard_id: call.shard_id.clone(),
            deliveries: call.deliveries.clone(),
            stop: call.stop.cloned(),
        }
    }

    fn call(&self) -> BatchCall<'_> {
        BatchCall {
            subscription: self.subscription,
            stream: &self.stream,
            shard_id: &self.shard_id,
            deliveries: self.deliveries.clone(),
            stop: self.stop.as_ref(),
        }
    }
}

pub(super) struct Live {
    pub(super) store: Store<HostState>,
    pub(super) exports: Exports,
}

impl HandlerInstance {
    pub(crate) fn new(runtime: Runtime, pre: HandlerPre, env: Env) -> Self {
        let clock = CallClock::new();
        let meter = meter_of(&runtime, &env, &clock);
        Self {
            runtime,
            pre,
            env,
            live: None,
            replacements: 0,
            layout: BatchLayout::default(),
            publishes: None,
            clock,
            meter,
            notes: None,
            orphaned: false,
        }
    }

    /// A stand-in, with nothing live, while the instance runs a call on a compute thread.
    fn stand_in(&self) -> Self {
        Self {
            runtime: self.runtime.clone(),
            pre: self.pre.clone(),
            env: self.env.clone(),
            live: None,
            replacements: self.replacements,
            layout: BatchLayout::default(),
            publishes: self.publishes.clone(),
            clock: self.clock.clone(),
            meter: self.meter.clone(),
            notes: self.notes.clone(),
            orphaned: true,
        }
    }

    /// After a call whose compute task outlived it: a clock and a seat of its own, so the
    /// task ending later can neither charge this instance's calls nor take their place in
    /// the queue.
    fn adopt(&mut self) {
        if !std::mem::take(&mut self.orphaned) {
            return;
        }
        self.clock = CallClock::new();
        self.meter = meter_of(&self.runtime, &self.env, &self.clock);
    }

    /// Notes every publish the stream accepts from now on in `log`, by the record it was made
    /// for (this instance and the ones replacing it after a trap), or stops noting them.
    pub fn note_publishes(&mut self, log: Option<PublishLog>) {
        if let Some(live) = &mut self.live {
            live.store.data_mut().publishes = log.clone();
        }
        self.publishes = log;
    }

    /// Notes every publish from now on, refused or written (this instance and the ones
    /// replacing it after a trap), or stops noting them.
    pub(crate) fn keep_publish_notes(&mut self, notes: Option<InstanceNotes>) {
        if let Some(live) = &mut self.live {
            live.store.data_mut().notes = notes.clone();
        }
        self.notes = notes;
    }

    /// How many times a failed instance was replaced.
    pub fn replacements(&self) -> u64 {
        self.replacements
    }

    /// Hands every delivery of `call` to the component, in order: in one `handle-batch` call
    /// if it has the batch fast path, otherwise one `handle` call per record. One outcome per
    /// delivery, in order.
    ///
    /// Each record has the tenant's deadline (and fuel): counted from when the record before it
    /// was reported in a batch (a batch of slow but healthy records never runs out of time),
    /// from the start of its own call through `handle`.
    ///
    /// # Errors
    /// When a call traps (panic, deadline, memory limit, stack overflow, ...) or a batch call
    /// returns without reporting every record: the outcomes settled before that, which stand,
    /// and the failure of the record after them. The instance is replaced before the next call.
    pub async fn handle_batch(
        &mut self,
        call: &BatchCall<'_>,
    ) -> Result<Vec<Outcome>, BatchFailure> {
        self.adopt();
        let runtime = self.runtime.clone();
        let (Some(pool), Some(meter)) = (runtime.compute(), self.meter.clone()) else {
            return self.handle_here(call).await;
        };
        let owned = OwnedCall::of(call);
        let mut this = std::mem::replace(self, self.stand_in());
        let ran = pool
            .run(meter, async move {
                let result = this.handle_here(&owned.call()).await;
                (this, result)
            })
            .await;
        match ran {
            Ok((this, result)) => {
                *self = this;
                result
            }
            Err(error) => {
                // The stand-in has no live instance: the next call makes a fresh one.
                self.replacements += 1;
                Err(BatchFailure {
                    settled: Vec::new(),
                    failure: CallFailure {
                        kind: TrapKind::Other,
                        message: format!("the call's compute task failed: {error}"),
                    },
                })
            }
        }
    }

    /// [`handle_batch`](Self::handle_batch) on the caller's executor.
    async fn handle_here(&mut self, call: &BatchCall<'_>) -> Result<Vec<Outcome>, BatchFailure> {
        match self.pre.form() {
            CallForm::Batch => self.call_batch(call).await,
            CallForm::Handle if self.pre.adapted() => self.call_records(call).await,
            CallForm::Handle => self.handle_each(call).await,
        }
    }

    /// [`handle_batch`](Self::handle_batch) through `handle-batch`.
    async fn call_batch(&mut self, call: &BatchCall<'_>) -> Result<Vec<Outcome>, BatchFailure> {
        let info = call_info(call);
        self.call_laid_out(call, CallKind::Batch, async |live, layout| {
            let Some(batch) = &live.exports.batch else {
                return Err(wasmtime::Error::msg("the component exports no batch"));
            };
            batch
                .call_handle_batch(
                    &mut live.store,
                    info,
                    &layout.arena,
                    &layout.records,
                    &layout.headers,
                )
                .await
        })
        .await
    }

    /// [`handle_batch`](Self::handle_batch) through `handle`, called once per record by the
    /// host's adapter inside the component (`adapter/`).
    pub(super) async fn call_records(
        &mut self,
        call: &BatchCall<'_>,
    ) -> Result<Vec<Outcome>, BatchFailure> {
        self.call_laid_out(call, CallKind::Records, async |live, layout| {
            let Some(records) = live.exports.records else {
                return Err(wasmtime::Error::msg("the host adapter is missing"));
            };
            let params = (
                call.subscription,
                &call.stream[..],
                &call.shard_id[..],
                &layout.arena[..],
                &layout.records[..],
                &layout.headers[..],
            );
            records.typed().call_async(&mut live.store, params).await
        })
        .await
    }

    /// Lays `call`'s records out as `handle-batch` takes them and runs `body`, a call of
    /// `kind` reporting on a board, with them.
    async fn call_laid_out(
        &mut self,
        call: &BatchCall<'_>,
        kind: CallKind,
        body: impl AsyncFnOnce(&mut Live, &BatchLayout) -> wasmtime::Result<()>,
    ) -> Result<Vec<Outcome>, BatchFailure> {
        let mut layout = std::mem::take(&mut self.layout);
        layout.fill(&call.deliveries);
        let expected = call.deliveries.len();
        let (result, reported) = self
            .call(
                kind,
                call,
                call.deliveries.clone(),
                async |live: &mut Live| body(live, &layout).await,
            )
            .await;
        layout.trim();
        self.layout = layout;
        let failure = match result {
            Ok(()) if reported.len() == expected => return Ok(reported),
            Ok(()) => {
                self.discard();
                CallFailure {
                    kind: TrapKind::Other,
                    message: format!(
                        "{kind} returned without reporting an outcome for record {} of {expected}",
                        reported.len()
                    ),
                }
            }
            Err(failure) => failure,
        };
        Err(BatchFailure {
            settled: reported,
            failure,
        })
    }

    /// Runs `body`, a call of `kind` handing the component `deliveries` (of `call`), under a
    /// deadline and fuel per record, and the log budget of that many records. Returns how the
    /// call went, and the outcomes the guest reported meanwhile (in a batch call).
    pub(super) async fn call<R>(
        &mut self,
        kind: CallKind,
        call: &BatchCall<'_>,
        deliveries: Deliveries,
        body: impl AsyncFnOnce(&mut Live) -> wasmtime::Result<R>,
    ) -> (Result<R, CallFailure>, Vec<Outcome>) {
        let deadline = self.env.policy.limits().call_deadline;
        let records = deliveries.len();
        let fuel = (self.fuel_per_record()).map(|fuel| fuel.saturating_mul(records.max(1) as u64));
        let live = match self.live().await {
            Ok(live) => live,
            Err(failure) => return (Err(failure), Vec::new()),
        };
        let scope = CallScope {
            stream: call.stream.clone(),
            shard_id: call.shard_id.clone(),
            deliveries,
        };
        let stop = call.stop.cloned();
        let progress =
            live.store
                .data_mut()
                .begin_call(kind, Some(scope), records, deadline, stop.clone());
        if let Some(fuel) = fuel
            && let Err(error) = live.store.set_fuel(fuel)
        {
            let failure = self.fail(TrapKind::Other, format!("cannot set fuel: {error}"));
            return (Err(failure), Vec::new());
        }
        let result = within_deadline(&progress, stop, body(live)).await;
        let from_board = board_outcomes(live.store.as_context());
        let reported = live.store.data_mut().end_call(from_board);
        let result = settle_call(result, deadline);
        if result.is_err() {
            self.discard();
        }
        (result, reported)
    }

    /// The fuel each record gets, when the runtime meters fuel.
    pub(super) fn fuel_per_record(&self) -> Option<u64> {
        let limits = self.env.policy.limits();
        (self.runtime.config().fuel).then(|| limits.fuel.unwrap_or(u64::MAX))
    }

    fn fail(&mut self, kind: TrapKind, message: String) -> CallFailure {
        self.discard();
        CallFailure { kind, message }
    }

    fn discard(&mut self) {
        if self.live.take().is_some() {
            self.replacements += 1;
        }
    }

    async fn live(&mut self) -> Result<&mut Live, CallFailure> {
        if self.live.is_none() {
            let pending = instantiate(
                self.runtime.clone(),
                self.pre.clone(),
                self.env.clone(),
                self.clock.clone(),
                self.notes.clone(),
            );
            let mut live = pending.await.map_err(|mut failure| {
                failure.message = format!("instantiation failed: {}", failure.message);
                failure
            })?;
            live.store.data_mut().publishes = self.publishes.clone();
            self.live = Some(live);
        }
        self.live.as_mut().ok_or_else(|| CallFailure {
            kind: TrapKind::Other,
            message: "no live instance".into(),
        })
    }
}

/// Runs `call` until it ends, its deadline passes or `stop` says the lease is lost. The epoch
/// callback ends a spinning guest at the deadline (or the loss); this timer also covers time
/// spent blocked in host imports (a publish, a WASI sleep), where no epoch check runs. It wakes
/// at least every check interval to see records reported meanwhile, and at once when the lease
/// is lost. The slack lets the epoch's trap, which carries a wasm backtrace, win for a
/// spinning guest.
async fn within_deadline<R>(
    progress: &CallProgress,
    mut stop: Option<watch::Receiver<Option<Stop>>>,
    call: impl Future<Output = wasmtime::Result<R>>,
) -> Result<wasmtime::Result<R>, Cut> {
    let mut call = std::pin::pin!(call);
    loop {
        if let Some(stop) = cutting(stop.as_ref()) {
            return Err(Cut::Stopped(stop));
        }
        // Own time passes no faster than wall time, so waking after what is left of it (at
        // most a check interval) never wakes too late.
        let left = progress.left(IMPORT_SLACK);
        let wake = Instant::now() + left.min(progress.check_interval());
        let stopped = async {
            match stop.as_mut() {
                Some(stop) => {
                    if stop.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = &mut call => return Ok(result),
            () = stopped => {}
            () = tokio::time::sleep_until(wake.into()) => {
                if progress.left(IMPORT_SLACK).is_zero() {
                    return Err(Cut::Elapsed);
                }
            }
        }
    }
}

const IMPORT_SLACK: Duration = Duration::from_millis(100);

/// Why a call was cut short outside the guest.
enum Cut {
    /// It ran past its deadline while blocked outside the guest.
    Elapsed,
    /// The host stopped it: the lease was lost, the host is shutting down, the version was
    /// withdrawn.
    Stopped(Stop),
}

/// A call's result, or the failure it came to.
fn settle_call<R>(
    result: Result<wasmtime::Result<R>, Cut>,
    deadline: Duration,
) -> Result<R, CallFailure> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(CallFailure {
            kind: classify(&error),
            message: one_line(&*error),
        }),
        Err(Cut::Elapsed) => Err(CallFailure {
            kind: TrapKind::Deadline,
            message: DeadlineExceeded(deadline).to_string(),
        }),
        Err(Cut::Stopped(stop)) => {
            let stopped = CallStopped(stop);
            Err(CallFailure {
                kind: stopped.kind(),
                message: stopped.to_string(),
            })
        }
    }
}

/// A fresh instance, under the tenant's limits: the start functions and constructors that run
/// while instantiating get the call deadline (blocked imports included), memory caps and fuel.
/// Its publishes, from the start functions on, are noted in `notes`; its calls' deadlines are
/// charged `clock`. Takes its inputs by value: a `HandlerInstance` is not `Sync`, so the
/// future must not borrow one.
async fn instantiate(
    runtime: Runtime,
    pre: HandlerPre,
    env: Env,
    clock: CallClock,
    notes: Option<InstanceNotes>,
) -> Result<Live, CallFailure> {
    let limits = env.policy.limits().clone();
    let deadline = limits.call_deadline;
    let mut state = HostState::new(env, clock, pre.adapter());
    state.notes = notes;
    let mut store = Store::new(runtime.engine(), state);
    let failed = |message: String| CallFailure {
        kind: TrapKind::Other,
        message,
    };
    if runtime.config().fuel {
        store
            .set_fuel(limits.fuel.unwrap_or(u64::MAX))
            .map_err(|error| failed(format!("cannot set fuel: {error}")))?;
    }
    store.limiter(|state| &mut state.limiter);
    if runtime.config().deadlines {
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |ctx| {
            sync_progress(&ctx);
            if let Some(stop) = ctx.data().cut() {
                return Err(wasmtime::Error::new(CallStopped(stop)));
            }
            if ctx.data().past_deadline() {
                return Err(wasmtime::Error::new(DeadlineExceeded(deadline)));
            }
            // Every tick yields, so the call's own timer and the stop signal are looked at;
            // on a compute pool it is also where the scheduler may preempt the call.
            ctx.data().clock().note_tick_yield();
            Ok(UpdateDeadline::Yield(1))
        });
    }
    // A guest blocked in an import is timed from outside, which cannot read its board: what
    // the board shows is read on the way in. Only a `handle-batch` call and the host
    // adapter's share a board: a component called from the host through `handle` is spared
    // the hook, which wasmtime runs at every entry to and exit from wasm (each of the six
    // reallocs that lower a record, the call, its post-return).
    if pre.form() == CallForm::Batch || pre.adapted() {
        store.call_hook(|ctx, hook| {
            if matches!(hook, CallHook::CallingHost) {
                sync_progress(&ctx);
            }
            Ok(())
        });
    }
    let progress = store
        .data_mut()
        .begin_call(CallKind::Load, None, 1, deadline, None);
    let result = within_deadline(&progress, None, pre.pre.instantiate_async(&mut store)).await;
    store.data_mut().end_call(None);
    let instance = settle_call(result, deadline)?;
    let exports = pre
        .exports(&mut store, &instance)
        .map_err(|error| failed(one_line(&*error)))?;
    Ok(Live { store, exports })
}

/// Instantiates `pre` once and asks the component to describe itself, each phase under the
/// tenant's limits; the publishes refused meanwhile are noted in `notes`.
///
/// # Errors
/// The phase (instantiation or `describe`) and how it failed.
pub(crate) async fn describe(
    runtime: &Runtime,
    pre: &HandlerPre,
    env: Env,
    notes: Option<InstanceNotes>,
) -> Result<wit::App, (LoadPhase, CallFailure)> {
    let clock = CallClock::new();
    let meter = meter_of(runtime, &env, &clock);
    let describing = describe_here(runtime.clone(), pre.clone(), env, clock, notes);
    let (Some(pool), Some(meter)) = (runtime.compute(), meter) else {
        return describing.await;
    };
    pool.run(meter, describing).await.unwrap_or_else(|error| {
        Err((
            LoadPhase::Instantiate,
            CallFailure {
                kind: TrapKind::Other,
                message: format!("the compute task failed: {error}"),
            },
        ))
    })
}

/// [`describe`] on the caller's executor.
async fn describe_here(
    runtime: Runtime,
    pre: HandlerPre,
    env: Env,
    clock: CallClock,
    notes: Option<InstanceNotes>,
) -> Result<wit::App, (LoadPhase, CallFailure)> {
    let deadline = env.policy.limits().call_deadline;
    let mut live = instantiate(runtime, pre, env, clock, notes)
        .await
        .map_err(|failure| (LoadPhase::Instantiate, failure))?;
    let progress = live
        .store
        .data_mut()
        .begin_call(CallKind::Load, None, 1, deadline, None);
    let describing = live.exports.handler.call_describe(&mut live.store);
    let result = within_deadline(&progress, None, describing).await;
    live.store.data_mut().end_call(None);
    settle_call(result, deadline).map_err(|failure| (LoadPhase::Describe, failure))
}

/// Where `call`'s records come from, as the contract says it.
pub(super) fn call_info<'a>(call: &'a BatchCall<'_>) -> wit::CallInfo<'a> {
    wit::CallInfo {
        subscription: call.subscription,
        stream: call.stream,
        shard_id: call.shard_id,
    }
}

/// Whose compute slots `env`'s calls take on `runtime`, if it has a compute pool: its
/// tenant's account, in the role its policy gives it.
fn meter_of(runtime: &Runtime, env: &Env, clock: &CallClock) -> Option<Meter> {
    let pool = runtime.compute()?;
    let policy = &env.policy;
    Some(Meter {
        account: pool.account(policy.tenant(), policy.limits().cpu_weight),
        role: policy.role(),
        seat: Arc::new(Seat::default()),
        clock: clock.clone(),
    })
}
