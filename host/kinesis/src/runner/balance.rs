//! Balancing a subscription's leases between its live hosts, the way KCL's lease taker does:
//! the decisions of one round, as pure functions of what that round's listing showed.
//!
//! A host aims at `ceil(shards / live hosts)` leases. Below that, it takes free and expired
//! leases first; then it asks the most loaded other host for one lease when that host holds
//! more than the target, or exactly the target while this host still needs more than one. So
//! 4 shards on 3 hosts settle at 2/1/1 (not 2/2/0), and every move lowers the sum of the
//! squares of the hosts' loads, so moves end: no lease goes back and forth.

use std::collections::BTreeMap;

/// The share of `shards` eligible shards each of `hosts` live hosts aims at: `ceil(shards /
/// hosts)` (a lone host, or none known, takes them all).
pub(crate) fn target(shards: usize, hosts: usize) -> usize {
    shards.div_ceil(hosts.max(1))
}

/// The host a host holding `holding` leases (with requests in flight) asks for a lease this
/// round, given every live host's load (`me` included): the most loaded other host, when it
/// holds more than `target`, or exactly `target` while this host needs more than one. Among
/// equally loaded hosts the first by name, so that takers agree. `None`: nobody.
pub(crate) fn victim<'a>(
    me: &str,
    load: &'a BTreeMap<String, usize>,
    target: usize,
    holding: usize,
) -> Option<&'a str> {
    let needed = target.saturating_sub(holding);
    if needed == 0 {
        return None;
    }
    let (most_loaded, most) = load
        .iter()
        .filter(|(host, _)| host.as_str() != me)
        .max_by(|(a, m), (b, n)| m.cmp(n).then_with(|| b.cmp(a)))?;
    let steal = *most > target || (*most == target && needed > 1);
    steal.then_some(most_loaded.as_str())
}

/// A lease row as one round judged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holding<'a> {
    pub shard_id: &'a str,
    pub owner: &'a str,
    /// Its counter moved within the lease duration (or it was first seen this round).
    pub live: bool,
}

/// The live hosts of a subscription with the eligible shards each holds: this host, the owner
/// of every live lease, and every host whose presence row is live, unless every lease it holds
/// has expired (it died; its presence row has not expired yet only because it was seen later).
pub(crate) fn live_hosts<'a>(
    me: &str,
    present: impl IntoIterator<Item = &'a str>,
    leases: &[Holding<'a>],
) -> BTreeMap<String, Vec<String>> {
    let mut hosts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    hosts.entry(me.to_owned()).or_default();
    for lease in leases.iter().filter(|l| l.live) {
        hosts
            .entry(lease.owner.to_owned())
            .or_default()
            .push(lease.shard_id.to_owned());
    }
    for host in present {
        let holds_only_expired =
            !hosts.contains_key(host) && leases.iter().any(|l| l.owner == host && !l.live);
        if !holds_only_expired {
            hosts.entry(host.to_owned()).or_default();
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(hosts: &[(&str, usize)]) -> BTreeMap<String, usize> {
        hosts.iter().map(|(h, n)| ((*h).to_owned(), *n)).collect()
    }

    #[test]
    fn the_target_is_the_rounded_up_share() {
        assert_eq!(target(4, 3), 2);
        assert_eq!(target(4, 2), 2);
        assert_eq!(target(8, 3), 3);
        assert_eq!(target(2, 3), 1);
        assert_eq!(target(0, 3), 0);
        assert_eq!(target(5, 0), 5, "no host known: take them all");
    }

    #[test]
    fn an_idle_host_takes_from_a_host_at_the_target_when_it_needs_more_than_one() {
        // 2/2/0: c needs two, the most loaded holds exactly the target: c asks for one.
        let hosts = load(&[("a", 2), ("b", 2), ("c", 0)]);
        assert_eq!(victim("c", &hosts, 2, 0), Some("a"), "ties go by name");
        // 2/1/1: nobody needs more than one, so nobody takes from a host at the target.
        let settled = load(&[("a", 2), ("b", 1), ("c", 1)]);
        for me in ["a", "b", "c"] {
            assert_eq!(victim(me, &settled, 2, settled[me]), None, "{me}");
        }
    }

    #[test]
    fn a_host_above_the_target_gives_to_one_that_needs_only_one() {
        let hosts = load(&[("a", 3), ("b", 1)]);
        assert_eq!(victim("b", &hosts, 2, 1), Some("a"));
        assert_eq!(victim("a", &hosts, 2, 3), None, "a needs nothing");
    }

    #[test]
    fn requests_in_flight_count_as_held() {
        let hosts = load(&[("a", 2), ("b", 2), ("c", 0)]);
        assert_eq!(
            victim("c", &hosts, 2, 1),
            None,
            "one asked for, one more needed"
        );
        assert_eq!(victim("c", &hosts, 2, 2), None);
    }

    #[test]
    fn a_host_with_only_expired_leases_is_not_live() {
        let leases = [
            Holding {
                shard_id: "s0",
                owner: "a",
                live: true,
            },
            Holding {
                shard_id: "s1",
                owner: "dead",
                live: false,
            },
            Holding {
                shard_id: "s2",
                owner: "b",
                live: true,
            },
            Holding {
                shard_id: "s3",
                owner: "b",
                live: false,
            },
        ];
        let hosts = live_hosts("me", ["a", "dead", "idle", "b"], &leases);
        let names: Vec<&str> = hosts.keys().map(String::as_str).collect();
        assert_eq!(names, ["a", "b", "idle", "me"]);
        assert_eq!(hosts["b"], ["s2"]);
        assert!(
            hosts["idle"].is_empty(),
            "a present host holding nothing counts"
        );
    }

    /// Hosts taking turns, each doing what one round decides: free leases up to the target,
    /// else one lease from the host [`victim`] names. Returns the loads once a whole turn of
    /// every host changes nothing, and the leases that moved between hosts.
    fn settle(shards: usize, mut loads: Vec<usize>) -> (Vec<usize>, usize) {
        let names: Vec<String> = (0..loads.len()).map(|i| format!("h{i}")).collect();
        let target = target(shards, loads.len());
        let mut moves = 0;
        for _ in 0..1_000 {
            let mut changed = false;
            for me in 0..loads.len() {
                let free = shards - loads.iter().sum::<usize>();
                let take = free.min(target.saturating_sub(loads[me]));
                if take > 0 {
                    loads[me] += take;
                    changed = true;
                    continue;
                }
                let load: BTreeMap<String, usize> =
                    names.iter().cloned().zip(loads.iter().copied()).collect();
                if let Some(victim) = victim(&names[me], &load, target, loads[me]) {
                    let from = names.iter().position(|n| n == victim).expect("a host");
                    loads[from] -= 1;
                    loads[me] += 1;
                    moves += 1;
                    changed = true;
                }
            }
            if !changed {
                return (loads, moves);
            }
        }
        panic!("no settling from {loads:?}");
    }

    #[test]
    fn four_shards_on_three_hosts_settle_at_two_one_one() {
        // The idle host takes from the first of the two at the target.
        assert_eq!(settle(4, vec![2, 2, 0]), (vec![1, 2, 1], 1));
        assert_eq!(settle(4, vec![4, 0, 0]), (vec![2, 1, 1], 2));
        // Free leases first (two each for the first two), then one move.
        assert_eq!(settle(4, vec![0, 0, 0]), (vec![1, 2, 1], 1));
    }

    #[test]
    fn every_start_settles_with_every_host_working_and_no_lease_moving_back() {
        for hosts in 1..=5 {
            for shards in 0..=12 {
                for first in 0..=shards {
                    // One host holds `first`, the rest is free or held by the last host.
                    for split in [0, shards - first] {
                        let mut loads = vec![0; hosts];
                        loads[0] = first;
                        if hosts > 1 {
                            loads[hosts - 1] = split;
                        }
                        let (settled, moves) = settle(shards, loads.clone());
                        let (min, max) = (
                            settled.iter().min().copied().unwrap_or(0),
                            settled.iter().max().copied().unwrap_or(0),
                        );
                        assert_eq!(settled.iter().sum::<usize>(), shards, "{loads:?}");
                        assert!(max <= target(shards, hosts), "{loads:?} -> {settled:?}");
                        assert!(
                            shards < hosts || min >= 1,
                            "an idle host: {loads:?} -> {settled:?}"
                        );
                        // Each move lowers the sum of squares by at least 2, so moves are
                        // few and none undoes another.
                        assert!(moves <= shards, "{loads:?}: {moves} moves");
                        assert!(max - min <= 1, "{loads:?} -> {settled:?}");
                    }
                }
            }
        }
    }
}
