//! What an operator sets for a subscription over what its component declares: the host's
//! side of Lambda's event source mapping settings. The component's values stay the defaults.

use std::time::Duration;

use ruststream_runtime::app::{MaxRecordAge, StartPosition, SubscriptionSpec};

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
    /// Where records go that are given up on (Lambda's `DestinationConfig.OnFailure`):
    /// spent records, instead of the component's dead-letter stream, where the component
    /// counts attempts (it never turns a hold into copies), and records past their maximum
    /// age. Ignored when it is the subscription's own stream.
    pub on_failure: Option<String>,
    /// Records older than this are given up on (dead-lettered, or retired), held ones
    /// included (Lambda's `MaximumRecordAgeInSeconds`).
    pub max_record_age: Option<Duration>,
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
            max_record_age: None,
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
        let on_failure = match &self.on_failure {
            Some(stream) if *stream == spec.stream => {
                tracing::warn!(subscriber = %spec.name, stream,
                    "on_failure names the subscription's own stream: it is ignored");
                None
            }
            other => other.clone(),
        };
        if let Some(stream) = &on_failure
            && spec.retry.counts_attempts()
        {
            spec.retry.dead_letter = Some(stream.clone());
        }
        spec.max_record_age = self.max_record_age.map(|age| MaxRecordAge {
            age,
            dead_letter: on_failure.or_else(|| spec.retry.dead_letter.clone()),
        });
        spec
    }
}

#[cfg(test)]
mod tests {
    use ruststream_runtime::{Outcome, outcome::RetryPolicy};

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
            max_record_age: None,
        }
    }

    #[test]
    fn the_operator_lowers_and_redirects_but_never_adds_attempts() {
        let settings = OperatorSettings {
            start: Some(StartPosition::Horizon),
            batch_size: Some(10),
            max_attempts: Some(2),
            on_failure: Some("refunds.ops".into()),
            max_record_age: Some(Duration::from_secs(60)),
            enabled: true,
        };
        let spec = settings.apply(&declared());
        assert_eq!(spec.retry.max_attempts, Some(2));
        assert_eq!(spec.retry.dead_letter.as_deref(), Some("refunds.ops"));
        assert_eq!(spec.batch_limit, Some(10));
        assert_eq!(spec.start, Some(StartPosition::Horizon));
        let expiry = MaxRecordAge {
            age: Duration::from_secs(60),
            dead_letter: Some("refunds.ops".into()),
        };
        assert_eq!(spec.max_record_age, Some(expiry));
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
        // A component that holds keeps holding: `on_failure` is only where expired records go.
        let holding = OperatorSettings {
            on_failure: Some("refunds.ops".into()),
            max_record_age: Some(Duration::from_secs(5)),
            ..OperatorSettings::default()
        };
        let spec = holding.apply(&none);
        assert_eq!(spec.retry, RetryPolicy::default());
        let expiry = spec.max_record_age.map(|m| m.dead_letter);
        assert_eq!(expiry, Some(Some("refunds.ops".to_owned())));
    }
}
