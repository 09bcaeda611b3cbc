//! Exponential backoff with full jitter, for retries against Kinesis.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// Pauses that double from `first` up to `max`, each drawn uniformly from `[pause/2, pause]` so
/// readers throttled together do not retry together.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            failures: 0,
        }
    }

    /// The pause before the next attempt; each call lengthens the following one.
    pub fn next_pause(&mut self) -> Duration {
        let ceiling = self
            .first
            .saturating_mul(1 << self.failures.min(16))
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        let half = ceiling / 2;
        half + half.mul_f64(unit_random())
    }

    /// Consecutive failures since the last [`reset`](Self::reset).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// A uniformly distributed value in [0, 1), from the process's random hash keys.
fn unit_random() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_within_their_jitter_band_up_to_the_cap() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let bands = [
            (50, 100),
            (100, 200),
            (200, 400),
            (400, 800),
            (500, 1000),
            (500, 1000),
        ];
        for (low, high) in bands {
            let pause = backoff.next_pause();
            assert!(
                pause >= Duration::from_millis(low) && pause <= Duration::from_millis(high),
                "{pause:?} outside {low}..={high} ms"
            );
        }
        assert_eq!(backoff.failures(), 6);
        backoff.reset();
        assert!(backoff.next_pause() <= Duration::from_millis(100));
    }
}
