//! A guest call as the compute pool runs it: holding a slot while it runs, metered while it
//! runs, giving the slot up while it is blocked and at the preemption points the scheduler
//! asks for.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::Role;
use super::clock::CallClock;
use super::scheduler::{CpuAccount, Seat};

/// Who a call's CPU is charged to, and the instance's place in the queue and own clock.
#[derive(Clone)]
pub(crate) struct Meter {
    pub(crate) account: Arc<CpuAccount>,
    pub(crate) role: Role,
    pub(crate) seat: Arc<Seat>,
    pub(crate) clock: CallClock,
}

pin_project_lite::pin_project! {
    /// `inner`, run only while holding a slot of `meter`'s account.
    pub(crate) struct Metered<F> {
        #[pin]
        inner: F,
        meter: Meter,
        holding: bool,
    }

    impl<F> PinnedDrop for Metered<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.holding {
                this.meter.account.release();
            } else {
                this.meter.account.leave(this.meter.role, &this.meter.seat);
            }
            if this.meter.clock.is_queued() {
                this.meter.clock.block();
            }
        }
    }
}

impl<F> Metered<F> {
    pub(crate) fn new(inner: F, meter: Meter) -> Self {
        Self {
            inner,
            meter,
            holding: false,
        }
    }
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let meter = &*this.meter;
        if !*this.holding {
            if meter
                .account
                .poll_acquire(meter.role, &meter.seat, cx)
                .is_pending()
            {
                meter.clock.queue();
                return Poll::Pending;
            }
            *this.holding = true;
        }
        let waited = meter.clock.run();
        if !waited.is_zero() {
            meter.account.waited(meter.role, waited);
        }
        let output = this.inner.poll(cx);
        let ran = meter.clock.block();
        meter.account.charge(meter.role, ran);
        match output {
            Poll::Ready(output) => {
                *this.holding = false;
                meter.account.release();
                Poll::Ready(output)
            }
            Poll::Pending => {
                if meter.clock.take_tick_yield() {
                    // A preemption point: the call is ready to go on (the yield woke it), and
                    // keeps its slot unless a call with a better claim waits.
                    if meter.account.preempt(meter.role, &meter.seat) {
                        *this.holding = false;
                        meter.clock.queue();
                    }
                } else {
                    // Blocked in an import: the slot is somebody else's meanwhile.
                    *this.holding = false;
                    meter.account.release();
                }
                Poll::Pending
            }
        }
    }
}
