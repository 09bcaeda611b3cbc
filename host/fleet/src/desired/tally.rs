//! What each host counts of an app's rollout and shadow, kept beside the app's desired state
//! so that one judge decides a rollout from the whole fleet's calls, and `status` shows the
//! fleet's sum with each host's part.

use serde::{Deserialize, Serialize};

use super::AppId;

/// The new version's calls on one host since it went live there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutCounts {
    /// Calls it made.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// How often the version it replaced failed over its last calls, in thousandths.
    pub replaced_failure_permille: u32,
}

/// A shadow's comparisons on one host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowTally {
    /// The shadow's content hash.
    pub hash: String,
    /// Records handled alike.
    pub agree: u64,
    /// Records handled otherwise.
    pub disagree: u64,
    /// Records the shadow trapped on.
    pub trap: u64,
    /// Records not compared (sampling, a full queue, the memory budget).
    pub skipped: u64,
}

/// One host's counts for one app, as it last wrote them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTally {
    /// The app.
    pub app: AppId,
    /// The host (its owner id).
    pub host: String,
    /// The version the host runs: counts of another version than the one judged are not
    /// summed.
    pub live_hash: String,
    /// The rollout's counts, while one is judged.
    pub rollout: Option<RolloutCounts>,
    /// The shadow's counts, while one runs.
    pub shadow: Option<ShadowTally>,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
}

impl HostTally {
    /// Its item key: `#tally/<tenant>/<app>/<host>` (`#` starts no app's key).
    pub fn key(&self) -> String {
        format!("#tally/{}/{}", self.app, self.host)
    }
}

/// Which version of an app a host runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningVersion {
    /// The app.
    pub app: AppId,
    /// The content hash of the version the host runs.
    pub hash: String,
}

/// What one host runs of the apps the desired state records, as it last reported it: written
/// when it changes, and at least every few minutes, so that a report that stops coming is a
/// host that stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host (its owner id).
    pub host: String,
    /// What it runs.
    pub apps: Vec<RunningVersion>,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
}

impl HostReport {
    /// Its item key: `#host/<host>`.
    pub fn key(&self) -> String {
        format!("#host/{}", self.host)
    }
}

/// The sum over the hosts running `live_hash` of their rollout counts: calls, failures, and
/// the replaced version's failure rate weighted by each host's calls.
pub fn rollout_sum<'a>(
    tallies: impl IntoIterator<Item = &'a HostTally>,
    live_hash: &str,
) -> Option<(RolloutCounts, f64)> {
    let mut sum = RolloutCounts::default();
    let (mut weighted, mut hosts) = (0.0, 0);
    for tally in tallies {
        let Some(counts) = tally.rollout.filter(|_| tally.live_hash == live_hash) else {
            continue;
        };
        sum.calls += counts.calls;
        sum.failures += counts.failures;
        weighted += f64::from(counts.replaced_failure_permille) / 1000.0 * counts.calls as f64;
        hosts += 1;
    }
    if hosts == 0 {
        return None;
    }
    let rate = if sum.calls == 0 {
        0.0
    } else {
        weighted / sum.calls as f64
    };
    sum.replaced_failure_permille = (rate * 1000.0).round() as u32;
    Some((sum, rate))
}

/// The sum of the hosts' comparisons of shadow `hash`.
pub fn shadow_sum<'a>(
    tallies: impl IntoIterator<Item = &'a HostTally>,
    hash: &str,
) -> Option<ShadowTally> {
    let mut sum: Option<ShadowTally> = None;
    for counts in tallies.into_iter().filter_map(|t| t.shadow.as_ref()) {
        if counts.hash != hash {
            continue;
        }
        let sum = sum.get_or_insert_with(|| ShadowTally {
            hash: hash.to_owned(),
            ..ShadowTally::default()
        });
        sum.agree += counts.agree;
        sum.disagree += counts.disagree;
        sum.trap += counts.trap;
        sum.skipped += counts.skipped;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(host: &str, live: &str, calls: u64, failures: u64, permille: u32) -> HostTally {
        HostTally {
            app: AppId::new("acme", "books"),
            host: host.to_owned(),
            live_hash: live.to_owned(),
            rollout: Some(RolloutCounts {
                calls,
                failures,
                replaced_failure_permille: permille,
            }),
            shadow: Some(ShadowTally {
                hash: "s".to_owned(),
                agree: calls,
                disagree: failures,
                trap: 0,
                skipped: 1,
            }),
            at_ms: 0,
        }
    }

    #[test]
    fn the_fleet_sum_counts_only_the_version_judged_and_weighs_the_old_rate_by_calls() {
        let tallies = [
            tally("a", "v2", 30, 3, 100),
            tally("b", "v2", 10, 0, 500),
            tally("c", "v1", 99, 99, 1000),
        ];
        let (sum, rate) = rollout_sum(&tallies, "v2").expect("two hosts run v2");
        assert_eq!((sum.calls, sum.failures), (40, 3));
        assert!((rate - 0.2).abs() < 1e-9, "{rate}");
        assert_eq!(sum.replaced_failure_permille, 200);
        assert_eq!(rollout_sum(&tallies, "v3"), None);
        let shadow = shadow_sum(&tallies, "s").expect("a shadow");
        assert_eq!(
            (shadow.agree, shadow.disagree, shadow.skipped),
            (139, 102, 3)
        );
        assert_eq!(tallies[0].key(), "#tally/acme/books/a");
    }
}
