//! Runs a handler's future to completion inside one host call.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` until it is ready.
///
/// A component handles one record at a time, and every host import it may await (logging,
/// publishing) completes within the call, so a handler's future normally finishes on the first
/// poll. A future that waits on something that never wakes it spins until the host's
/// per-call deadline ends the call.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::hint::spin_loop();
    }
}
