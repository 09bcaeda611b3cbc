//! What an operator sets for a subscription over what its component declares: the host's
//! side of Lambda's event source mapping settings. The component's values stay the defaults.

use ruststream_runtime::{StartPosition, SubscriptionSpec};

/// An operator's settings for one subscription; `None` keeps what the component declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorSettings {
    /// Where shards without a checkpoint start (Lambda's `StartingPosition`).
    pub start: Option<StartPosition>,
    /// Records per handler call (Lambda's `BatchSize`).
    pub batch_size: Option<u32>,
    /// A ceiling on the deliveries a record gets, counting the first: it lowers what the
    /// component declares, never raises it, and adds nothing where it declares none.
    pub max_attempts: Option<u32>,
    /// Where spent records go (Lambda's `DestinationConfig.OnFailure`), instead of the
    /// component's dead-letter stream. Ignored when it is the subscription's own stream.
    pub on_failure: Option<String>,
    /// Whether the subscription runs at all (Lambda's `Enabled`).
    pub enabled: bool,
}

impl Default for OperatorSettings {
    fn default() -> Self {
        Self {
            start: None,
            batch_size: None,
            max_attempts: None,
            on_failure: None,
            enabled: true,
        }
    }
}

impl OperatorSettings {
    /// `declared` as this host runs it.
    pub fn apply(&self, declared: &SubscriptionSpec) -> SubscriptionSpec {
        let mut spec = declared.clone();
        if let Some(start) = &self.start {
            spec.start = Some(start.clone());
        }
        if let Some(batch) = self.batch_size {
            spec.batch_limit = Some(batch);
        }
        if let Some(ceiling) = self.max_attempts {
            spec.retry.max_attempts = spec.retry.max_attempts.map(|n| n.min(ceiling));
        }
        match &self.on_failure {
            Some(stream) if *stream == spec.stream => tracing::warn!(
                subscriber = %spec.name, stream,
                "on_failure names the subscription's own stream: the component's dead letter stands"
            ),
            Some(stream) => spec.retry.dead_letter = Some(stream.clone()),
            None => {}
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use ruststream_runtime::{Outcome, RetryPolicy};

    use super::*;

    fn declared() -> SubscriptionSpec {
        SubscriptionSpec {
            index: 0,
            name: "reconcile".into(),
            stream: "refunds".into(),
            retry: RetryPolicy {
                max_attempts: Some(5),
                dead_letter: Some("refunds.dead".into()),
            },
            start: None,
            on_trap: Outcome::Retry,
            batch_limit: None,
        }
    }

    #[test]
    fn the_operator_lowers_and_redirects_but_never_adds_attempts() {
        let settings = OperatorSettings {
            start: Some(StartPosition::Horizon),
            batch_size: Some(10),
            max_attempts: Some(2),
            on_failure: Some("refunds.ops".into()),
            enabled: true,
        };
        let spec = settings.apply(&declared());
        assert_eq!(spec.retry.max_attempts, Some(2));
        assert_eq!(spec.retry.dead_letter.as_deref(), Some("refunds.ops"));
        assert_eq!(spec.batch_limit, Some(10));
        assert_eq!(spec.start, Some(StartPosition::Horizon));
        let higher = OperatorSettings {
            max_attempts: Some(9),
            on_failure: Some("refunds".into()),
            ..OperatorSettings::default()
        };
        let spec = higher.apply(&declared());
        assert_eq!(spec.retry.max_attempts, Some(5));
        assert_eq!(spec.retry.dead_letter.as_deref(), Some("refunds.dead"));
        let none = SubscriptionSpec {
            retry: RetryPolicy::default(),
            ..declared()
        };
        assert_eq!(higher.apply(&none).retry.max_attempts, None);
    }
}
