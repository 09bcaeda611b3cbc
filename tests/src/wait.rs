//! Waiting for a condition in tests: poll it every 25 ms until it holds or a timeout passes.
//!
//! Tests wait on conditions, never on a guess of how long something takes. Every wait of the
//! tests crate goes through here, so they all poll the same way:
//!
//! - [`eventually`]: a plain condition, `true` once it held;
//! - [`eventually_async`]: the same for a condition that must await (a store read, say);
//! - [`poll_for`]: a probe that yields a value once it succeeds (a row, a result, an error that
//!   ends the wait early).
//!
//! A fixed sleep that checks that nothing more happens, or a loop that does something
//! periodically (produce, sample, kill), is not a wait and does not belong here.

use std::time::Duration;

/// How long a wait sleeps between two checks of its condition.
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// Waits until `condition` holds, checking every 25 ms, for at most `timeout`. Returns whether
/// it held: tests wait on conditions, never on a guess of how long something takes.
pub async fn eventually(timeout: Duration, condition: impl Fn() -> bool) -> bool {
    eventually_async(timeout, async || condition()).await
}

/// [`eventually`] for a condition that must await (a store read, say).
pub async fn eventually_async(timeout: Duration, condition: impl AsyncFn() -> bool) -> bool {
    poll_for(timeout, async || condition().await.then_some(()))
        .await
        .is_some()
}

/// Calls `probe` until it returns `Some`, sleeping 25 ms between calls, for at most `timeout`
/// in all (a call still running when the timeout passes is abandoned). Returns the first
/// `Some` value, or `None` when the timeout passed first.
///
/// The probe may keep state between calls (the last status seen, for an error message). To
/// end the wait early on a failure, make `T` a `Result` and return `Some(Err(..))`.
pub async fn poll_for<T>(
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    tokio::time::timeout(timeout, async {
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    })
    .await
    .ok()
}
