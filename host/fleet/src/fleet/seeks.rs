//! Seeks for the fleet: a seek through any host is recorded in the desired state, carried out
//! there at once and by every other host at its next poll, each shard moved once (its lease row
//! keeps the seek's id, see `ruststream_kinesis::runner::RunningApp::seek_marked`).

use std::sync::atomic::{AtomicU64, Ordering};

use ruststream_common::escape::one_line;
use ruststream_kinesis::runner::SeekError;
use ruststream_runtime::{Clock as _, SystemClock};

use super::Fleet;
use super::control::{seek_refused, start_position};
use super::deploys::FleetDeploys;
use crate::admin::control::ControlError;
use crate::admin::model::SeekPosition;
use crate::desired::{AppDesired, AppId, FleetSeek, SeekTarget};

impl Fleet {
    /// Moves `subscriber` of `tenant`'s `app` to `position`. When deploys are the fleet's,
    /// the seek is recorded first (the tip as the time now, so that every host moves to the
    /// same place), then carried out here; every host carries it out at its next poll, and
    /// each shard moves once (its lease row keeps the seek's id): also one handed over
    /// between two hosts' polls, or left by a host that died before it polled. A sequence on
    /// a shard another host holds is then not refused: its holder moves it. Returns the
    /// shards moved here.
    ///
    /// # Errors
    /// The subscriber is unknown, a shard cannot reopen here, or (on one host) the shard is
    /// not held here; [`ControlError::Desired`] when the seek cannot be recorded.
    pub(crate) async fn seek_for_fleet(
        &self,
        tenant: &str,
        app: &str,
        subscriber: &str,
        position: SeekPosition,
    ) -> Result<Vec<String>, ControlError> {
        let running = self.app(tenant, app)?;
        let refused = |error| seek_refused(tenant, app, subscriber, error);
        let fleet = self.inner.deploys.get().and_then(|shared| {
            let component = self.component_of(tenant, &running)?;
            Some((shared, component))
        });
        let Some((shared, component)) = fleet else {
            let moved = running.seek(subscriber, start_position(position)).await;
            return moved.map_err(refused);
        };
        if !running.has_subscriber(subscriber) {
            return Err(refused(SeekError::UnknownSubscriber(subscriber.to_owned())));
        }
        let recorded = match position {
            SeekPosition::Horizon => SeekTarget::Horizon,
            SeekPosition::Latest => SeekTarget::Timestamp {
                ms: SystemClock.now_ms(),
            },
            SeekPosition::Timestamp { ms } => SeekTarget::Timestamp { ms },
            SeekPosition::Sequence { shard, sequence } => SeekTarget::Sequence { shard, sequence },
        };
        let app_id = AppId::new(tenant, app);
        let id = AtomicU64::new(0);
        self.change_app_for_fleet(shared, tenant, &component, |state| {
            let next = state.next_seek_id(SystemClock.now_ms());
            id.store(next, Ordering::Relaxed);
            // Carried out here next: marked before it is recorded, so that this host's poll
            // does not carry it out too.
            shared.seek_done(&app_id, subscriber, next);
            let seek = FleetSeek {
                id: next,
                position: recorded.clone(),
            };
            state.seeks.insert(subscriber.to_owned(), seek);
        })
        .await?;
        let id = id.load(Ordering::Relaxed);
        running
            .seek_marked(subscriber, recorded.start(), id)
            .await
            .map_err(|error| {
                ControlError::Seek(format!(
                    "recorded for the fleet (every host moves the shards it holds), but not \
                     carried out here: {}",
                    one_line(&error)
                ))
            })
    }

    /// Carries out each seek recorded since this host started that it has not yet: on the
    /// shards it holds of the subscription that no host moved for it yet (their lease rows
    /// say), and on those it takes later. A sequence seek of a shard it does not hold is its
    /// holder's. Each seek is given to the app once.
    pub(super) async fn converge_seeks(&self, shared: &FleetDeploys, states: &[AppDesired]) {
        for state in states {
            for (subscriber, seek) in &state.seeks {
                if shared.is_seek_done(&state.app, subscriber, seek.id) {
                    continue;
                }
                let Ok(app) = self.app(&state.app.tenant, &state.app.app) else {
                    continue;
                };
                shared.seek_done(&state.app, subscriber, seek.id);
                match app
                    .seek_marked(subscriber, seek.position.start(), seek.id)
                    .await
                {
                    Ok(moved) => {
                        tracing::info!(app = %state.app, subscriber, position = ?seek.position,
                        ?moved, mark = seek.id, "the fleet's seek carried out here")
                    }
                    Err(error) => tracing::error!(app = %state.app, subscriber,
                        position = ?seek.position, error = %one_line(&error),
                        "cannot carry out the fleet's seek here"),
                }
            }
        }
    }
}
