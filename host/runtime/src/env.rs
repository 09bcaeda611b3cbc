//! What a component instance and the shard pipeline driving it act on: the tenant's policy, the
//! transport's publisher, the clock and the log.

use std::sync::Arc;

use crate::clock::Clock;
use crate::log::LogSink;
use crate::policy::SandboxPolicy;
use crate::publish::Publisher;

/// The environment a component runs in, shared by its instances and the pipelines that call
/// them.
#[derive(Clone)]
pub struct Env {
    /// The component's name, for log lines.
    pub component: Arc<str>,
    /// Its tenant's resolved policy: limits, publish grant, log budgets, write quota.
    pub policy: Arc<SandboxPolicy>,
    /// Where guest publishes, counted copies and dead letters are written.
    pub publisher: Arc<dyn Publisher>,
    /// Wall-clock time: due times of copies, and the write quota's refills.
    pub clock: Arc<dyn Clock>,
    /// Where component and runtime log lines go.
    pub log: LogSink,
}
