//! What a host saw of the rows other hosts keep (leases and presence rows): each row's counter
//! and since when it has not moved. Expiry is judged on this host's monotonic clock, never on
//! the wall-clock expiry another host wrote, so hosts whose clocks disagree still agree on
//! who is alive.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

/// Per row key: the counter last seen, and since when it has not moved.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    rows: HashMap<String, (u64, Instant)>,
}

impl Observed {
    /// Notes the counter of every row of one listing, and forgets rows that are gone.
    pub(crate) fn observe<'a>(&mut self, counters: impl IntoIterator<Item = (&'a String, u64)>) {
        let now = Instant::now();
        let mut seen = HashSet::new();
        for (key, counter) in counters {
            seen.insert(key.as_str());
            let entry = self.rows.entry(key.clone()).or_insert((counter, now));
            if entry.0 != counter {
                *entry = (counter, now);
            }
        }
        self.rows.retain(|key, _| seen.contains(key.as_str()));
    }

    /// How long the row `key` has been seen at `counter` (zero once it moved, or when it was
    /// never seen).
    pub(crate) fn unchanged_for(&self, key: &str, counter: u64) -> Duration {
        self.rows
            .get(key)
            .filter(|(seen, _)| *seen == counter)
            .map_or(Duration::ZERO, |(_, since)| since.elapsed())
    }

    /// The counter last seen of `key`, if it was seen.
    #[cfg(test)]
    pub(crate) fn counter(&self, key: &str) -> Option<u64> {
        self.rows.get(key).map(|(counter, _)| *counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_row_is_unchanged_while_its_counter_stands_and_forgotten_when_gone() {
        let mut observed = Observed::default();
        let key = "#host/s/a".to_owned();
        observed.observe([(&key, 1)]);
        tokio::time::sleep(Duration::from_secs(4)).await;
        observed.observe([(&key, 1)]);
        assert_eq!(observed.unchanged_for(&key, 1), Duration::from_secs(4));
        observed.observe([(&key, 2)]);
        assert_eq!(observed.unchanged_for(&key, 2), Duration::ZERO, "it moved");
        assert_eq!(
            observed.unchanged_for(&key, 1),
            Duration::ZERO,
            "an old counter"
        );
        observed.observe([]);
        assert_eq!(observed.counter(&key), None, "gone from the listing");
    }
}
