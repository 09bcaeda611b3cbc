//! Wall-clock time for due times of delayed copies: the [`Clock`] a pipeline reads, the
//! system's ([`SystemClock`]) in production and a manual one (`testing::ManualClock`) in tests.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch. Due times of `retry_after` copies travel between hosts in
/// the record envelope, so they are wall-clock times, not monotonic instants.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// `duration` in whole milliseconds, saturating: what due times and pauses are counted in.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64)
    }
}
