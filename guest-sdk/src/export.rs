//! The glue `#[service]` expands to: the component's exported functions.
//!
//! Not part of the public API; the items are public only so the macro can name them.

use std::cell::OnceCell;

use crate::app::RustStream;
use crate::batch::{Batch, RecordView};
pub use crate::bindings::exports::ruststream::handler::batch::Guest as BatchGuest;
use crate::bindings::exports::ruststream::handler::handler as wit;
pub use crate::bindings::exports::ruststream::handler::handler::{App, CallInfo, Guest, Record};
pub use crate::bindings::ruststream::handler::types::HandlerOutcome as WitOutcome;
use crate::board;
use crate::context::Context;
use crate::log;
use crate::stream::KinesisBroker;

/// The signature of a service function.
pub type ServiceFn = fn(KinesisBroker) -> RustStream;

thread_local! {
    static SERVICE: OnceCell<RustStream> = const { OnceCell::new() };
}

fn with_service<R>(build: ServiceFn, f: impl FnOnce(&RustStream) -> R) -> R {
    SERVICE.with(|cell| {
        let service = cell.get_or_init(|| {
            log::install();
            build(KinesisBroker::new())
        });
        f(service)
    })
}

/// `describe`: the app and its subscriptions.
pub fn describe(build: ServiceFn) -> wit::App {
    with_service(build, |service| wit::App {
        info: wit::AppInfo {
            name: service.info.name().to_owned(),
            version: service.info.version().to_owned(),
        },
        subscriptions: service
            .subscribers
            .iter()
            .map(|subscriber| {
                let r = &subscriber.registration;
                wit::Subscription {
                    name: r.name.clone(),
                    stream: r.stream.clone(),
                    max_attempts: r.max_attempts,
                    dead_letter: r.dead_letter.clone(),
                    start: r.start.as_ref().map(|position| position.to_wit()),
                    on_trap: r.on_failure.panic.to_wit(),
                    batch_limit: r.batch,
                }
            })
            .collect(),
    })
}

/// `handle`: one record, its outcome returned. The host calls it only for a component without
/// the batch fast path; an SDK component has both, and gets `handle-batch`.
pub fn handle(build: ServiceFn, info: wit::CallInfo, record: wit::Record) -> WitOutcome {
    with_service(build, |service| {
        let mut decided = WitOutcome::Retry;
        let view = RecordView::Record(&record);
        dispatch(service, &info, std::iter::once(view), |_, outcome| {
            decided = outcome;
        });
        decided
    })
}

/// `handle-batch`: records in order, read from the batch's buffers, each outcome written on
/// the call's board as soon as it is decided (the host then gives the next record a fresh
/// deadline, and never runs a reported record again should a later one trap).
pub fn handle_batch(
    build: ServiceFn,
    info: wit::CallInfo,
    arena: Vec<u8>,
    records: Vec<u8>,
    headers: Vec<u8>,
) {
    with_service(build, |service| {
        let batch = Batch::new(&arena, &records, &headers);
        board::with_board(batch.len(), |board| {
            dispatch(service, &info, batch.records(), |index, outcome| {
                board.write(index, outcome)
            });
        });
    })
}

/// Runs each record through its subscriber and hands `report` the record's index and outcome.
fn dispatch<'a>(
    service: &RustStream,
    info: &wit::CallInfo,
    records: impl Iterator<Item = RecordView<'a>>,
    mut report: impl FnMut(u32, WitOutcome),
) {
    let Some(subscriber) = service.subscribers.get(info.subscription as usize) else {
        tracing::error!(
            subscription = info.subscription,
            "the host named a subscription this component does not have; records dropped"
        );
        (0u32..)
            .zip(records)
            .for_each(|(index, _)| report(index, WitOutcome::Drop));
        return;
    };
    for (index, record) in (0u32..).zip(records) {
        log::set_current_record(Some(index));
        let mut ctx = Context::new(&subscriber.registration.name, info, record);
        let outcome = subscriber
            .dispatch
            .dispatch(&mut ctx, &subscriber.registration)
            .to_wit();
        report(index, outcome);
    }
    log::set_current_record(None);
}
