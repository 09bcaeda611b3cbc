//! Small concurrency helpers every layer of the host shares: a lock that survives a
//! panicked holder, and a sleep until an instant that may not be set.

use std::sync::{Mutex, MutexGuard};

use tokio::time::Instant;

/// Locks `mutex`, whatever a holder that panicked left in it: the data behind our locks
/// (counters, buffers, status) stays meaningful after a panic elsewhere.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sleeps until `at`, or forever when there is no `at`: for a `select!` branch whose timer may
/// be unset.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
