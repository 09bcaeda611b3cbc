//! Turns to read a shard, shared by every reader of it in a host that calls Kinesis with one
//! client.
//!
//! Kinesis serves at most five GetRecords a second per shard to all its readers together;
//! past that it throttles. Each reader already keeps its own reads 200 ms apart, but several
//! apps reading one shard would together read it several times as often, be throttled and back
//! off in bursts. Here a reader takes a turn before each read: turns on one shard are 200 ms
//! apart whoever takes them, in the order the readers became ready. Reads of different shards
//! do not wait for each other.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use ruststream_runtime::internals::lock;

/// Least time between two turns on one shard: Kinesis serves 5 GetRecords a second per shard.
pub const MIN_READ_INTERVAL: Duration = Duration::from_millis(200);

/// The next free turn of each shard, by (stream, shard).
#[derive(Debug, Default)]
pub struct ReadPacing {
    next_turn: Mutex<HashMap<(String, String), Instant>>,
}

impl ReadPacing {
    /// No turn taken yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for the next free turn to read `shard` of `stream`, and takes it: returns at once
    /// when the last turn was 200 ms ago or more.
    pub async fn turn(&self, stream: &str, shard: &str) {
        let now = Instant::now();
        let turn = {
            let mut next_turn = lock(&self.next_turn);
            let next = next_turn
                .entry((stream.to_owned(), shard.to_owned()))
                .or_insert(now);
            let turn = (*next).max(now);
            *next = turn + MIN_READ_INTERVAL;
            turn
        };
        tokio::time::sleep_until(turn).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn turns_on_one_shard_are_spaced_and_other_shards_do_not_wait() {
        let pacing = ReadPacing::new();
        let start = Instant::now();
        for expected in [0, 200, 400] {
            pacing.turn("s", "shard-0").await;
            assert_eq!(start.elapsed().as_millis(), expected);
        }
        pacing.turn("s", "shard-1").await;
        assert_eq!(
            start.elapsed().as_millis(),
            400,
            "another shard reads at once"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let rested = Instant::now();
        pacing.turn("s", "shard-0").await;
        assert_eq!(
            rested.elapsed().as_millis(),
            0,
            "a rested shard reads at once"
        );
    }
}
