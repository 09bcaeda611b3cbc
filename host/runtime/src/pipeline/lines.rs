//! What the pipeline says about a tenant's records: lines tagged with tenant, component,
//! stream, shard, subscriber and record, within the tenant's host-line budget.

use std::sync::Arc;

use crate::env::Env;
use crate::log::{Level, LogLine, LogTags, Origin};
use crate::record::Delivery;

/// The runtime's voice on one shard of one subscription.
pub(super) struct RuntimeLog {
    tags: LogTags,
    subscriber: String,
    env: Env,
}

impl RuntimeLog {
    pub(super) fn new(env: &Env, subscriber: &str, stream: Arc<str>, shard_id: Arc<str>) -> Self {
        Self {
            tags: LogTags::new(env.policy.tenant(), env.component.clone())
                .on_shard(stream, shard_id),
            subscriber: subscriber.to_owned(),
            env: env.clone(),
        }
    }

    /// A line about `delivery` (its sequence number and attempt), or about the shard.
    pub(super) fn line(
        &self,
        level: Level,
        delivery: Option<&Delivery>,
        message: String,
    ) -> LogLine {
        let sequence = delivery.map(|d| d.sequence_number.as_str());
        let mut line = self.about(level, sequence, message);
        if let Some(delivery) = delivery {
            line.fields
                .push(("attempt".to_owned(), delivery.attempt().to_string()));
        }
        line
    }

    /// A line about the record `sequence_number` when there is one.
    pub(super) fn about(
        &self,
        level: Level,
        sequence_number: Option<&str>,
        message: String,
    ) -> LogLine {
        let mut line = self
            .tags
            .line(level, Origin::Runtime, sequence_number, message);
        line.fields
            .push(("subscriber".to_owned(), self.subscriber.clone()));
        line
    }

    /// Emits `line`, a line of kind `kind`, unless the tenant's lines of that kind are spent
    /// for this second.
    pub(super) fn emit(&self, kind: &'static str, line: LogLine) {
        self.env.policy.host_lines().emit(&self.env.log, kind, line);
    }

    /// Emits a line of kind `kind` about `delivery`.
    pub(super) fn say(
        &self,
        kind: &'static str,
        level: Level,
        delivery: Option<&Delivery>,
        message: String,
    ) {
        self.emit(kind, self.line(level, delivery, message));
    }

    /// Says how many lines were dropped in seconds that are over.
    pub(super) fn flush(&self) {
        self.env.policy.host_lines().flush(&self.env.log);
    }
}
