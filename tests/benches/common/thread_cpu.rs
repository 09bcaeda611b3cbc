//! The CPU time of the bench's own thread, for the benches that run a guest on it
//! (`Compute::Inline`) and report what it costs.

use std::time::Duration;

/// This thread's CPU time so far.
pub(crate) fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; the call writes nothing else.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(read, 0, "this thread's CPU clock is readable on Linux");
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(now.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}
