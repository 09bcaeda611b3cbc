//! A call's own time: what its deadline is charged.
//!
//! A call's own time runs while it runs on a compute thread (that thread's CPU clock, so time
//! the operating system gave to other threads is not its) and while it is blocked in a host
//! import (wall time: a publish stuck on the network, a WASI sleep). It stands still while the
//! call waits for a compute slot, which is other tenants' time. A clock that is never metered
//! runs on wall time from its start: a call outside the compute pool is timed as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const BLOCKED: u8 = 0;
const RUNNING: u8 = 1;
const QUEUED: u8 = 2;

/// The own time of the calls of one instance, shared by the compute pool's wrapper, the
/// store's epoch callback and the timer that bounds a call from outside.
#[derive(Clone)]
pub(crate) struct CallClock(Arc<State>);

struct State {
    origin: Instant,
    /// Own time up to the start of the current phase, in ns.
    own: AtomicU64,
    phase: AtomicU8,
    /// When the current phase started: wall ns since `origin` while blocked or queued, the
    /// running thread's CPU clock in ns while running.
    since: AtomicU64,
    /// The epoch callback asked the call to yield: its next pending is a preemption point.
    tick_yield: AtomicBool,
}

impl Default for CallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl CallClock {
    /// A clock starting now, blocked (running on wall time) until a wrapper meters it.
    pub(crate) fn new() -> Self {
        Self(Arc::new(State {
            origin: Instant::now(),
            own: AtomicU64::new(0),
            phase: AtomicU8::new(BLOCKED),
            since: AtomicU64::new(0),
            tick_yield: AtomicBool::new(false),
        }))
    }

    fn wall_ns(&self) -> u64 {
        nanos(self.0.origin.elapsed())
    }

    /// Own time so far. While running it reads this thread's CPU clock: call it only from
    /// the thread polling the call (the epoch callback, the call's own timer).
    pub(crate) fn now(&self) -> Duration {
        let own = self.0.own.load(Ordering::Relaxed);
        let since = self.0.since.load(Ordering::Relaxed);
        let current = match self.0.phase.load(Ordering::Relaxed) {
            RUNNING => thread_cpu_ns().saturating_sub(since),
            QUEUED => 0,
            _ => self.wall_ns().saturating_sub(since),
        };
        Duration::from_nanos(own.saturating_add(current))
    }

    /// The call starts (or goes on) running on this thread. Returns how long it had waited
    /// for a slot, when it was queued.
    pub(crate) fn run(&self) -> Duration {
        let waited = self.close_phase();
        self.enter(RUNNING, thread_cpu_ns());
        waited
    }

    /// The call stopped running (it returned, yielded or blocked). Returns the CPU it ran.
    pub(crate) fn block(&self) -> Duration {
        let ran = self.close_phase();
        self.enter(BLOCKED, self.wall_ns());
        ran
    }

    /// The call waits for a slot: its own time stands still.
    pub(crate) fn queue(&self) {
        if self.0.phase.load(Ordering::Relaxed) == QUEUED {
            return;
        }
        self.close_phase();
        self.enter(QUEUED, self.wall_ns());
    }

    /// Whether it waits for a slot now.
    pub(crate) fn is_queued(&self) -> bool {
        self.0.phase.load(Ordering::Relaxed) == QUEUED
    }

    /// Marks the yield the epoch callback asks for as a preemption point.
    pub(crate) fn note_tick_yield(&self) {
        self.0.tick_yield.store(true, Ordering::Relaxed);
    }

    /// Whether the last pending was the epoch callback's yield (and forgets it).
    pub(crate) fn take_tick_yield(&self) -> bool {
        self.0.tick_yield.swap(false, Ordering::Relaxed)
    }

    /// Adds the phase that ends to the own time; returns its length (the CPU run, the wall
    /// time queued or blocked).
    fn close_phase(&self) -> Duration {
        let since = self.0.since.load(Ordering::Relaxed);
        match self.0.phase.load(Ordering::Relaxed) {
            RUNNING => {
                let ran = thread_cpu_ns().saturating_sub(since);
                self.0.own.fetch_add(ran, Ordering::Relaxed);
                Duration::from_nanos(ran)
            }
            QUEUED => Duration::from_nanos(self.wall_ns().saturating_sub(since)),
            _ => {
                let blocked = self.wall_ns().saturating_sub(since);
                self.0.own.fetch_add(blocked, Ordering::Relaxed);
                Duration::from_nanos(blocked)
            }
        }
    }

    fn enter(&self, phase: u8, since: u64) {
        self.0.since.store(since, Ordering::Relaxed);
        self.0.phase.store(phase, Ordering::Relaxed);
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The calling thread's CPU clock, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec, and CLOCK_THREAD_CPUTIME_ID is a clock id
    // every supported target (Linux, macOS) knows; the call only writes through the pointer.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0;
    if failed {
        // No per-thread clock: wall time since the first call stands in, which charges a call
        // for preemption by other threads but never less than its own CPU.
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        return nanos(START.get_or_init(Instant::now).elapsed());
    }
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(for_cpu: Duration) {
        let start = thread_cpu_ns();
        let mut x = 0_u64;
        while thread_cpu_ns() - start < nanos(for_cpu) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn an_unmetered_clock_runs_on_wall_time() {
        let clock = CallClock::new();
        std::thread::sleep(Duration::from_millis(30));
        assert!(clock.now() >= Duration::from_millis(30));
    }

    #[test]
    fn queued_time_is_not_the_calls_and_blocked_time_is() {
        let clock = CallClock::new();
        clock.queue();
        let frozen = clock.now();
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(clock.now(), frozen, "waiting for a slot costs no own time");
        let waited = clock.run();
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        spin(Duration::from_millis(20));
        let ran = clock.block();
        assert!(ran >= Duration::from_millis(20), "{ran:?}");
        std::thread::sleep(Duration::from_millis(30));
        let own = clock.now();
        assert!(own >= frozen + Duration::from_millis(50), "{own:?}");
        assert!(
            own < frozen + Duration::from_millis(40 + 50),
            "queued time leaked: {own:?}"
        );
    }

    #[test]
    fn a_running_call_is_charged_its_cpu_not_the_wall_time() {
        let clock = CallClock::new();
        clock.queue();
        let before = clock.now();
        clock.run();
        // Asleep while "running": this thread uses no CPU, so no own time passes.
        std::thread::sleep(Duration::from_millis(50));
        let during = clock.now() - before;
        assert!(during < Duration::from_millis(25), "{during:?}");
    }
}
