//! A tenant's write quota: the records and bytes per second the host writes for it.
//!
//! Everything written on a tenant's behalf draws from one quota: what its handlers publish,
//! and the counted copies and dead letters the host makes of its records. Past the quota a
//! guest publish is refused as `throttled` and a copy waits; nothing is lost, and a handler
//! that answers `retry_after(0)` forever cannot turn a subscribe-only grant into an unbounded
//! writer.

use std::sync::Mutex;
use std::time::Duration;

use crate::cpu::Role;
use crate::limits::WriteLimits;
use crate::publish::MAX_RECORD_BYTES;
use ruststream_common::sync::lock;

/// Two token buckets (records, bytes) refilled on the caller's clock, so paused time in
/// `TestApp` refills them as it moves.
#[derive(Debug)]
pub(crate) struct WriteQuota {
    records_per_ms: f64,
    bytes_per_ms: f64,
    /// One second's worth, and never less than one record of the largest size.
    record_capacity: f64,
    byte_capacity: f64,
    state: Mutex<Buckets>,
    throttles: metrics::Counter,
}

#[derive(Debug)]
struct Buckets {
    records: f64,
    bytes: f64,
    refilled_ms: Option<u64>,
}

impl WriteQuota {
    /// The quota of `tenant`'s calls of `role` (which label its throttle count).
    pub(crate) fn new(limits: &WriteLimits, tenant: &str, role: Role) -> Self {
        let records = f64::from(limits.records_per_second.max(1));
        let bytes = limits.bytes_per_second.max(1) as f64;
        let byte_capacity = bytes.max(MAX_RECORD_BYTES as f64);
        Self {
            records_per_ms: records / 1000.0,
            bytes_per_ms: bytes / 1000.0,
            record_capacity: records,
            byte_capacity,
            state: Mutex::new(Buckets {
                records,
                bytes: byte_capacity,
                refilled_ms: None,
            }),
            throttles: metrics::counter!(
                crate::metrics::PUBLISH_THROTTLES,
                crate::metrics::label::TENANT => tenant.to_owned(),
                crate::metrics::label::ROLE => role.label()
            ),
        }
    }

    /// Takes one record of `bytes` bytes at `now_ms` (ms since the epoch).
    ///
    /// # Errors
    /// How long until the record would fit, when the quota is spent for now; nothing is taken.
    pub(crate) fn take(&self, now_ms: u64, bytes: u64) -> Result<(), Duration> {
        let mut state = lock(&self.state);
        let elapsed = state
            .refilled_ms
            .map_or(0.0, |then| now_ms.saturating_sub(then) as f64);
        state.refilled_ms = Some(now_ms.max(state.refilled_ms.unwrap_or(0)));
        state.records = (state.records + elapsed * self.records_per_ms).min(self.record_capacity);
        state.bytes = (state.bytes + elapsed * self.bytes_per_ms).min(self.byte_capacity);
        let bytes = (bytes as f64).min(self.byte_capacity);
        if state.records >= 1.0 && state.bytes >= bytes {
            state.records -= 1.0;
            state.bytes -= bytes;
            return Ok(());
        }
        self.throttles.increment(1);
        let records_wait = (1.0 - state.records).max(0.0) / self.records_per_ms;
        let bytes_wait = (bytes - state.bytes).max(0.0) / self.bytes_per_ms;
        Err(Duration::from_millis(
            records_wait.max(bytes_wait).ceil() as u64 + 1,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_past_the_quota_wait_for_it_to_refill() {
        let quota = WriteQuota::new(
            &WriteLimits {
                records_per_second: 10,
                bytes_per_second: 1 << 20,
            },
            "acme",
            Role::Live,
        );
        for _ in 0..10 {
            assert_eq!(quota.take(1_000, 100), Ok(()));
        }
        let wait = quota
            .take(1_000, 100)
            .expect_err("the second's records are spent");
        assert!(wait <= Duration::from_millis(101), "{wait:?}");
        assert!(quota.take(1_000 + wait.as_millis() as u64, 100).is_ok());
        assert!(quota.take(1_000 + wait.as_millis() as u64, 100).is_err());
    }

    #[test]
    fn bytes_count_too_and_the_largest_record_always_fits_eventually() {
        let quota = WriteQuota::new(
            &WriteLimits {
                records_per_second: 1_000,
                bytes_per_second: 1_000,
            },
            "acme",
            Role::Live,
        );
        assert!(quota.take(0, MAX_RECORD_BYTES).is_ok());
        let wait = quota.take(0, 10_000).expect_err("bytes are spent");
        assert!(wait >= Duration::from_secs(9), "{wait:?}");
        assert!(quota.take(wait.as_millis() as u64, 10_000).is_ok());
    }
}
