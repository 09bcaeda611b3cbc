//! The fleet's rollout judge. With fleet deploys, no host acts on its own verdict: each
//! writes its counts of the rollout (and of a shadow) beside the app's desired state while
//! one is under way, and the one host holding the judge's lease (an item of the
//! desired-state table, renewed while a rollout is recorded, taken over when it lapses) sums
//! every host's counts of the new version and records the verdict once: kept, or the version
//! it replaced live again, which every host then runs.

use std::time::Duration;

use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;
use ruststream_runtime::rollout::Verdict;
use ruststream_runtime::{Clock as _, SystemClock};

use super::Fleet;
use super::deploys::FleetDeploys;
use crate::admin::model::VersionOrigin;
use crate::desired::{
    AppDesired, HostTally, LiveVersion, RolloutCounts, ShadowTally, Snapshot, rollout_sum,
};

/// How long the judge's lease lasts unrenewed: a judge that died is replaced within this. Its
/// holder renews it once half of it has gone by (every third poll or so), and only while a
/// rollout is recorded.
pub(crate) const JUDGE_TTL: Duration = Duration::from_secs(10);

impl Fleet {
    /// Writes this host's counts of each app whose rollout or shadow the desired state
    /// records and this host runs; only counts that changed since it last wrote them, so a
    /// fleet at rest writes nothing.
    pub(super) async fn publish_tallies(&self, shared: &FleetDeploys, snapshot: &Snapshot) {
        for state in &snapshot.apps {
            if state.rollout.is_none() && state.shadow.is_none() {
                continue;
            }
            let Some(tally) = self.tally_of(shared, state) else {
                continue;
            };
            let key = tally.key();
            let unchanged = lock(&shared.published).get(&key).is_some_and(|before| {
                HostTally {
                    at_ms: 0,
                    ..before.clone()
                } == tally
            });
            if unchanged {
                continue;
            }
            let tally = HostTally {
                at_ms: SystemClock.now_ms(),
                ..tally
            };
            match shared.table.put_tally(&tally).await {
                Ok(()) => {
                    lock(&shared.published).insert(key, HostTally { at_ms: 0, ..tally });
                }
                Err(error) => tracing::warn!(app = %state.app, error = %one_line(&error),
                    "cannot write this host's counts for the fleet's judge; trying at the next poll"),
            }
        }
    }

    /// This host's counts of `state`'s rollout and shadow, with `at_ms` 0; `None` when it
    /// runs neither.
    fn tally_of(&self, shared: &FleetDeploys, state: &AppDesired) -> Option<HostTally> {
        let app = self.app(&state.app.tenant, &state.app.app).ok()?;
        let versions = app.versions();
        let live_hash = versions.current.content_hash;
        let rollout = (state.rollout.as_ref())
            .filter(|rollout| rollout.to == live_hash)
            .and(versions.rollout)
            .map(|rollout| RolloutCounts {
                calls: rollout.calls,
                failures: rollout.failures,
                replaced_failure_permille: rollout.replaced_failure_permille,
            });
        let shadow = state
            .shadow
            .as_ref()
            .and(app.shadow())
            .map(|s| ShadowTally {
                hash: s.version.content_hash,
                agree: s.counts.agree,
                disagree: s.counts.disagree,
                trap: s.counts.trap,
                skipped: s.counts.skipped,
            });
        if rollout.is_none() && shadow.is_none() {
            return None;
        }
        Some(HostTally {
            app: state.app.clone(),
            host: shared.owner.clone(),
            live_hash,
            rollout,
            shadow,
            at_ms: 0,
        })
    }

    /// While the desired state records a rollout, takes or renews the judge's lease and, when
    /// this host holds it, decides each rollout from every host's counts since it began.
    pub(super) async fn judge_for_fleet(&self, shared: &FleetDeploys, snapshot: &Snapshot) {
        let judged: Vec<&AppDesired> = (snapshot.apps.iter())
            .filter(|state| state.rollout.is_some())
            .collect();
        if judged.is_empty() {
            return;
        }
        // The lease is read with the desired state: a host that sees another's lease running
        // makes no call for it, and the judge renews it once half of it has gone by.
        let now = SystemClock.now_ms();
        let ttl = u64::try_from(JUDGE_TTL.as_millis()).unwrap_or(u64::MAX);
        let claim = match &snapshot.judge {
            Some((owner, expires)) if *expires > now => {
                if *owner != shared.owner {
                    return;
                }
                expires - now <= ttl / 2
            }
            _ => true,
        };
        if claim {
            match shared.table.claim_judge(&shared.owner, JUDGE_TTL).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    tracing::warn!(error = %one_line(&error), "cannot take the fleet judge's lease");
                    return;
                }
            }
        }
        let policy = self.host().config().rollout;
        for state in judged {
            let Some(rollout) = &state.rollout else {
                continue;
            };
            let counted: Vec<&HostTally> = (snapshot.tallies.iter())
                .filter(|tally| tally.app == state.app && tally.at_ms >= rollout.started_ms)
                .collect();
            let Some((sum, old_rate)) = rollout_sum(counted.iter().copied(), &rollout.to) else {
                continue;
            };
            let hosts = counted.len();
            let verdict = policy.judge_counts(sum.calls, sum.failures, old_rate);
            let from = (state.kept.iter())
                .find(|kept| kept.hash == rollout.from)
                .cloned()
                .unwrap_or_else(|| LiveVersion::new(&rollout.from, ""))
                .came(VersionOrigin::Rollback, SystemClock.now_ms());
            let keep = shared.keep;
            let change = match &verdict {
                Verdict::Pending => continue,
                Verdict::Keep => {
                    let kept = |state: &mut AppDesired| state.rollout = None;
                    shared.change(&state.app, Some(state.revision), kept).await
                }
                Verdict::RollBack(_) => {
                    let rolled_back = |state: &mut AppDesired| {
                        state.go_live(from.clone(), keep);
                        state.rollout = None;
                    };
                    shared
                        .change(&state.app, Some(state.revision), rolled_back)
                        .await
                }
            };
            match (change, verdict) {
                (Ok(recorded), Verdict::RollBack(reason)) => tracing::warn!(app = %state.app,
                    from = %rollout.to, to = %from.hash, %reason, calls = sum.calls,
                    failures = sum.failures, hosts, revision = recorded.revision,
                    "the fleet's judge rolled back the new version on every host"),
                (Ok(recorded), _) => tracing::info!(app = %state.app, hash = %rollout.to,
                    calls = sum.calls, failures = sum.failures, hosts,
                    revision = recorded.revision, "the fleet's judge kept the new version"),
                // Changed meanwhile (a deploy, an operator's rollback): judged again from
                // what is recorded at the next poll.
                (Err(error), _) => tracing::info!(app = %state.app, error = %one_line(&error),
                    "the fleet's judge's verdict was not recorded"),
            }
        }
    }
}
