//! Exponential backoff with jitter: the one used for every retry, of reads, copies and writes.

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
    /// A backoff whose first pause is at most `first`, doubling up to `max`.
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
        half + half.mul_f64(fastrand::f64())
    }

    /// Consecutive failures since the last [`reset`](Self::reset).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Starts again from the first pause (after a success).
    pub fn reset(&mut self) {
        self.failures = 0;
    }
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
