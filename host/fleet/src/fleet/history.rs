//! What the console plots: a bounded ring of samples per series, taken from the host's status
//! every [`SAMPLE_EVERY`]: each shard's lag (ms behind the tip) and each app's records a
//! second (what its shards delivered since the sample before). [`KEEP`] samples a series,
//! [`MAX_SERIES`] series at most: a host of 1 000 shards keeps about 10 MB.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use ruststream_common::sync::lock;

use crate::admin::model::{HistorySeries, HostHistory, HostStatus};

/// How often a sample is taken.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Samples kept a series: ten minutes.
pub(crate) const KEEP: usize = 600;
/// Series kept at most, each kind; a new series past it is not kept.
const MAX_SERIES: usize = 4096;

/// The rings of one host.
#[derive(Debug, Default)]
pub(crate) struct History {
    rings: Mutex<Rings>,
}

#[derive(Debug, Default)]
struct Rings {
    lag: BTreeMap<String, VecDeque<(u64, f64)>>,
    rate: BTreeMap<String, VecDeque<(u64, f64)>>,
    /// Each app's records delivered at the sample before, and when.
    delivered: HashMap<String, (u64, u64)>,
}

impl History {
    /// Takes one sample of `status` at `now_ms`.
    pub(crate) fn sample(&self, status: &HostStatus, now_ms: u64) {
        let mut rings = lock(&self.rings);
        let rings = &mut *rings;
        let mut lags = Vec::new();
        let mut delivered: BTreeMap<String, u64> = BTreeMap::new();
        for tenant in &status.tenants {
            for app in &tenant.apps {
                let app_key = format!("{}/{}", tenant.name, app.name);
                let total = delivered.entry(app_key).or_default();
                for sub in &app.subscriptions {
                    for (shard_id, shard) in &sub.shards {
                        // Only shards this host reads: another host's lag is its own to plot.
                        if shard.owner.as_deref() != Some(status.owner.as_str()) {
                            continue;
                        }
                        *total += shard.delivered;
                        if let Some(behind) = shard.millis_behind_latest {
                            let key = format!(
                                "{}/{}/{}/{shard_id}",
                                tenant.name, app.name, sub.subscriber
                            );
                            lags.push((key, behind.max(0) as f64));
                        }
                    }
                }
            }
        }
        for (key, value) in lags {
            push(&mut rings.lag, key, (now_ms, value));
        }
        for (key, total) in delivered {
            let before = rings.delivered.insert(key.clone(), (now_ms, total));
            let Some((then, was)) = before else { continue };
            let elapsed = now_ms.saturating_sub(then);
            if elapsed == 0 {
                continue;
            }
            // A restarted count (a swap's new workers) is not a negative rate.
            let rate = total.saturating_sub(was) as f64 * 1000.0 / elapsed as f64;
            push(&mut rings.rate, key, (now_ms, rate));
        }
        // A series with no sample in the last KEEP intervals is gone.
        let oldest = now_ms.saturating_sub(KEEP as u64 * SAMPLE_EVERY.as_millis() as u64);
        for series in [&mut rings.lag, &mut rings.rate] {
            series.retain(|_, ring| ring.back().is_some_and(|&(at, _)| at >= oldest));
        }
    }

    /// What is kept, of `tenant` only when given.
    pub(crate) fn read(&self, tenant: Option<&str>) -> HostHistory {
        let rings = lock(&self.rings);
        let keep = |key: &String| tenant.is_none_or(|t| key.split('/').next() == Some(t));
        let series = |map: &BTreeMap<String, VecDeque<(u64, f64)>>| {
            (map.iter())
                .filter(|(key, _)| keep(key))
                .map(|(key, ring)| HistorySeries {
                    key: key.clone(),
                    points: ring.iter().copied().collect(),
                })
                .collect()
        };
        HostHistory {
            interval_ms: SAMPLE_EVERY.as_millis() as u64,
            lag: series(&rings.lag),
            rate: series(&rings.rate),
        }
    }
}

fn push(map: &mut BTreeMap<String, VecDeque<(u64, f64)>>, key: String, point: (u64, f64)) {
    if !map.contains_key(&key) && map.len() >= MAX_SERIES {
        return;
    }
    let ring = map.entry(key).or_default();
    if ring.len() == KEEP {
        ring.pop_front();
    }
    ring.push_back(point);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::fake::sample_status;

    #[test]
    fn each_shard_s_lag_and_each_app_s_rate_are_kept_bounded_and_by_tenant() {
        let history = History::default();
        let mut status = sample_status();
        let owner = status.owner.clone();
        let mut delivered = 0;
        for n in 0..(KEEP as u64 + 5) {
            delivered += 10;
            for tenant in &mut status.tenants {
                for app in &mut tenant.apps {
                    for sub in &mut app.subscriptions {
                        for shard in sub.shards.values_mut() {
                            shard.owner = Some(owner.clone());
                            shard.delivered = delivered;
                            shard.millis_behind_latest = Some(n as i64);
                        }
                    }
                }
            }
            history.sample(&status, 1_000 * (n + 1));
        }
        let all = history.read(None);
        assert!(!all.lag.is_empty() && !all.rate.is_empty(), "{all:?}");
        for series in all.lag.iter().chain(&all.rate) {
            assert_eq!(series.points.len(), KEEP, "{}", series.key);
        }
        let shards = all.lag.len() as f64;
        // Every shard delivered 10 more a second, whichever app it is of.
        let rates: f64 = (all.rate.iter())
            .filter_map(|s| s.points.last())
            .map(|p| p.1)
            .sum();
        assert_eq!(rates, 10.0 * shards);
        assert_eq!(
            all.lag[0].points.last().map(|p| p.1),
            Some((KEEP + 4) as f64)
        );
        assert!(history.read(Some("nobody")).lag.is_empty());
        let tenant = status.tenants[0].name.clone();
        assert_eq!(history.read(Some(&tenant)).lag.len(), all.lag.len());
    }
}
