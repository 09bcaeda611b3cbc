//! Handing the heap a component's load left free back to the system.
//!
//! Loading a component instantiates it for `describe` and drops the instance, which leaves free
//! holes among what stays (the component's metadata, the tenant's state). glibc's allocator
//! returns only the top of each heap by itself, so a host that loaded 1 000 distinct components
//! held ~100 MiB of free heap it would never use again (docs/benchmarks.md, `host_scale --
//! distinct`). Once loads pause for [`QUIET`] (or have gone on for [`LONGEST`]),
//! `malloc_trim` gives back every whole free page: one trim after a start or a deploy, however
//! many components it loads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The pause in loads after which the heap is trimmed.
const QUIET: Duration = Duration::from_secs(1);
/// The longest loads go on before the heap is trimmed anyway.
const LONGEST: Duration = Duration::from_secs(30);

/// Trims the heap once loads pause; cheap to clone, one per runtime.
#[derive(Clone)]
pub(crate) struct HeapTrim {
    inner: Arc<Trims>,
}

struct Trims {
    /// Loads ended so far.
    loads: AtomicU64,
    /// A trim is due.
    scheduled: AtomicBool,
    /// What trims: `malloc_trim`, or a count in tests.
    trim: Box<dyn Fn() + Send + Sync>,
}

impl Default for HeapTrim {
    fn default() -> Self {
        Self::trimming_with(trim)
    }
}

impl HeapTrim {
    fn trimming_with(trim: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            inner: Arc::new(Trims {
                loads: AtomicU64::new(0),
                scheduled: AtomicBool::new(false),
                trim: Box::new(trim),
            }),
        }
    }

    /// Notes that a load ended: the heap is trimmed once loads pause, unless a trim is already
    /// due. Outside a Tokio runtime the heap is trimmed at once.
    pub(crate) fn after_load(&self) {
        self.inner.loads.fetch_add(1, Ordering::AcqRel);
        if self.inner.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let trims = self.inner.clone();
        let Ok(tokio) = tokio::runtime::Handle::try_current() else {
            trims.scheduled.store(false, Ordering::Release);
            (trims.trim)();
            return;
        };
        tokio.spawn(async move {
            let first = Instant::now();
            loop {
                let seen = trims.loads.load(Ordering::Acquire);
                tokio::time::sleep(QUIET).await;
                if trims.loads.load(Ordering::Acquire) == seen || first.elapsed() >= LONGEST {
                    break;
                }
            }
            // Cleared before trimming: a load ending from here on is either covered by this
            // trim or schedules the next.
            trims.scheduled.store(false, Ordering::Release);
            // A trim walks every free chunk of every heap: milliseconds, off the executor.
            let _ = tokio::task::spawn_blocking(move || (trims.trim)()).await;
        });
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` only returns free pages of glibc's own heaps to the system; it
    // touches no memory in use and is safe to call from any thread at any time.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A trim that counts, and what it counted.
    fn counting() -> (HeapTrim, Arc<AtomicUsize>) {
        let trims = Arc::new(AtomicUsize::new(0));
        let counted = trims.clone();
        let heap = HeapTrim::trimming_with(move || {
            counted.fetch_add(1, Ordering::AcqRel);
        });
        (heap, trims)
    }

    /// Waits (in paused time) until `trims` reaches `n`; false if it never does.
    async fn trimmed(trims: &AtomicUsize, n: usize) -> bool {
        for _ in 0..1_000 {
            if trims.load(Ordering::Acquire) >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_loads_is_followed_by_one_trim_once_they_pause() {
        let (heap, trims) = counting();
        for _ in 0..100 {
            heap.after_load();
            tokio::time::sleep(QUIET / 4).await;
        }
        assert_eq!(
            trims.load(Ordering::Acquire),
            0,
            "no trim while loads go on"
        );
        assert!(trimmed(&trims, 1).await, "a trim once they pause");
        tokio::time::sleep(QUIET * 4).await;
        assert_eq!(trims.load(Ordering::Acquire), 1, "one trim for the burst");

        heap.after_load();
        assert!(
            trimmed(&trims, 2).await,
            "a later load is followed by another"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn loads_that_never_pause_are_trimmed_after_the_longest_wait() {
        let (heap, trims) = counting();
        let started = Instant::now();
        while trims.load(Ordering::Acquire) == 0 {
            assert!(
                started.elapsed() <= LONGEST + QUIET * 2,
                "no trim after {LONGEST:?}"
            );
            heap.after_load();
            tokio::time::sleep(QUIET / 2).await;
        }
        assert!(started.elapsed() >= LONGEST, "not before {LONGEST:?}");
    }
}
