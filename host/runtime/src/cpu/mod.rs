//! CPU for guest calls: where they run, how tenants share it, and what a deadline is charged.
//!
//! A host runs guest calls on a pool of compute threads of their own ([`Compute::Pool`]),
//! apart from the executor that reads shards, renews leases, writes checkpoints and answers
//! the admin API, so a guest that spins never delays that work: there are no more compute
//! threads than cores, the host's own threads sleep most of the time and win a core when they
//! wake (the kernel's wakeup preemption), and a call that blocks in an import (a publish)
//! waits on the host's executor, not on a compute thread.
//!
//! The pool has a slot per thread, and a call runs only while it holds one:
//!
//! - **Shares by tenant.** Slots go to tenants in proportion to their `cpu_weight` (default
//!   100), whatever their number of shards, subscriptions or shadows, by weighted fair
//!   queuing over the CPU each tenant's calls used (`scheduler`). A running call is preempted
//!   at an epoch tick when a call with a better claim waits.
//! - **Live before shadow.** A shadow version's call gets a slot only when no live call
//!   waits, and gives it up at its next tick when one does; its CPU counts in its tenant's
//!   share.
//! - **Deadlines on the call's own time.** A call's deadline is charged its own CPU (the
//!   compute thread's clock while it runs) and the time it is blocked in imports, never the
//!   time it waits for a slot (`clock`): another tenant's load never traps, copies or
//!   dead-letters a record.
//!
//! [`Compute::Inline`] runs calls on the caller's executor with wall-clock deadlines, as
//! `TestApp` does.

mod clock;
mod metered;
mod scheduler;

pub use scheduler::{CpuAccount, CpuUsage, DEFAULT_CPU_WEIGHT};

pub(crate) use clock::CallClock;
pub(crate) use metered::{Meter, Metered};
pub(crate) use scheduler::Seat;

use std::sync::Arc;

use tracing::Instrument as _;

use scheduler::Scheduler;

/// Whose a call is: the version that settles records, or a shadow compared with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The live version.
    Live,
    /// A shadow version: runs below every live call.
    Shadow,
}

impl Role {
    /// Both, live first.
    pub const ALL: [Self; 2] = [Self::Live, Self::Shadow];

    /// The `role` label of its series.
    pub fn label(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Shadow => "shadow",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Self::Live => 0,
            Self::Shadow => 1,
        }
    }
}

/// Where guest calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// On the caller's executor, timed on the wall clock, with no shares: for in-process
    /// tests (`TestApp` in paused time) and benchmarks of the call itself.
    Inline,
    /// On `threads` compute threads of their own (at least one), shared by tenant.
    Pool {
        /// Compute threads, and so calls running at once.
        threads: usize,
    },
}

impl Compute {
    /// A pool of one thread per core.
    pub fn pool() -> Self {
        Self::Pool {
            threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        }
    }
}

impl Default for Compute {
    /// [`Compute::pool`].
    fn default() -> Self {
        Self::pool()
    }
}

/// The compute threads and the scheduler of their slots.
pub(crate) struct ComputePool {
    /// Taken when the pool is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    scheduler: Arc<Scheduler>,
}

impl ComputePool {
    /// Starts `threads` compute threads.
    pub(crate) fn start(threads: usize) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ruststream-compute")
            .enable_time()
            .build()?;
        Ok(Self {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            scheduler: Scheduler::new(threads),
        })
    }

    /// The account of `tenant`'s calls, shared by all of them.
    pub(crate) fn account(&self, tenant: &str, weight: u32) -> Arc<CpuAccount> {
        self.scheduler.account(tenant, weight)
    }

    /// Calls running at once at most.
    pub(crate) fn slots(&self) -> usize {
        self.scheduler.slots()
    }

    /// Runs `call` on a compute thread, holding a slot of `meter`'s account while it runs, in
    /// the caller's tracing span (so its lines say whose they are). The call is cancelled when
    /// the returned future is dropped.
    ///
    /// # Errors
    /// When the call panicked, or the pool is shutting down.
    pub(crate) async fn run<F>(
        &self,
        meter: Meter,
        call: F,
    ) -> Result<F::Output, tokio::task::JoinError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let call = Metered::new(call.in_current_span(), meter);
        let task = AbortOnDrop(self.handle.spawn(call));
        task.await
    }

    /// What each tenant's calls used so far.
    pub(crate) fn usage(&self) -> Vec<CpuUsage> {
        self.scheduler.usage()
    }
}

impl Drop for ComputePool {
    fn drop(&mut self) {
        // Dropped anywhere, an async context included: never block on the threads.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A task aborted when its handle is dropped: a call nobody waits for any more stops at its
/// next epoch tick instead of running to its deadline.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
