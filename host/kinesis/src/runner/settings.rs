//! What an operator sets for a subscription over what its component declares: the host's
//! side of Lambda's event source mapping settings. The component's values stay the defaults.

use std::collections::HashMap;
use std::time::Duration;

use ruststream_runtime::app::{MaxRecordAge, StartPosition, SubscriptionSpec};

use crate::kinesis::ReadMode;
use ruststream_runtime::{LoadedComponent, Tenant, tenant::TenantError};

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
    /// Where the subscription's counted copies go, and are read back from, instead of the
    /// stream it reads: a stream of its own, so that the stream's other readers (native
    /// services among them) never see its copies. Checked by [`admit_settings`].
    pub retry_stream: Option<String>,
    /// How the subscription reads its shards (default polling); a change takes effect when
    /// the subscription's shards are opened again (a restart of the app, a handoff).
    pub read: Option<ReadMode>,
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
            retry_stream: None,
            read: None,
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
        spec.retry_stream.clone_from(&self.retry_stream);
        spec
    }

    /// Whether `tenant` may run `declared` (a subscription of component `component`) with these
    /// settings: a retry stream must be one the tenant may publish to, and a stream of the
    /// subscription's own: neither the stream it reads (its copies would reach that stream's
    /// other readers) nor a dead-letter stream it declares or the operator names (it would read
    /// the records it gave up on back as new ones).
    ///
    /// # Errors
    /// [`TenantError::RetryStreamNotGranted`] or [`TenantError::RetryStreamNotOwn`].
    pub fn admit(
        &self,
        tenant: &Tenant,
        component: &str,
        declared: &SubscriptionSpec,
    ) -> Result<(), TenantError> {
        let Some(retry_stream) = &self.retry_stream else {
            return Ok(());
        };
        let clash = if *retry_stream == declared.stream {
            Some("the stream it reads, whose other readers would get its copies")
        } else if [&declared.retry.dead_letter, &self.on_failure]
            .into_iter()
            .any(|dead| dead.as_ref() == Some(retry_stream))
        {
            Some("where its records given up on go: it would read them back as new records")
        } else {
            None
        };
        if let Some(clash) = clash {
            return Err(TenantError::RetryStreamNotOwn {
                tenant: tenant.name().to_owned(),
                component: component.to_owned(),
                subscriber: declared.name.clone(),
                stream: retry_stream.clone(),
                clash,
            });
        }
        if !tenant.policy().publish_grant().allows(retry_stream) {
            return Err(TenantError::RetryStreamNotGranted {
                tenant: tenant.name().to_owned(),
                component: component.to_owned(),
                subscriber: declared.name.clone(),
                stream: retry_stream.clone(),
            });
        }
        Ok(())
    }
}

/// Whether `tenant` may run every subscription of `component` with `settings` (by subscriber
/// name; one without settings runs as declared): [`OperatorSettings::admit`] for each.
///
/// # Errors
/// The first subscription refused.
pub fn admit_settings(
    tenant: &Tenant,
    component: &LoadedComponent,
    settings: &HashMap<String, OperatorSettings>,
) -> Result<(), TenantError> {
    for declared in &component.app().subscriptions {
        if let Some(settings) = settings.get(&declared.name) {
            settings.admit(tenant, component.name(), declared)?;
        }
    }
    Ok(())
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
            retry_stream: None,
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
            retry_stream: Some("refunds.retry".into()),
            read: Some(ReadMode::FanOut),
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
        assert_eq!(spec.retry_stream.as_deref(), Some("refunds.retry"));
        assert_eq!(spec.copy_stream(), "refunds.retry");
        let retry_reader = spec.reading_retry_stream();
        assert_eq!(
            retry_reader
                .as_ref()
                .map(|r| (r.stream.as_str(), r.copy_stream(), r.start.clone())),
            Some((
                "refunds.retry",
                "refunds.retry",
                Some(StartPosition::Horizon)
            )),
            "the retry stream is read from its oldest record, its copies go back to it"
        );
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

    #[test]
    fn a_retry_stream_is_granted_and_the_subscription_s_own() {
        use ruststream_runtime::policy::StreamGrant;

        let tenant = Tenant::new("acme").publish(StreamGrant::only(["refunds.dead", "r"]));
        let retry = |stream: &str, on_failure: Option<&str>| OperatorSettings {
            retry_stream: Some(stream.into()),
            on_failure: on_failure.map(str::to_owned),
            ..OperatorSettings::default()
        };
        let admit =
            |settings: OperatorSettings| settings.admit(&tenant, "ledger.wasm", &declared());
        assert_eq!(admit(OperatorSettings::default()), Ok(()));
        assert_eq!(admit(retry("r", None)), Ok(()));
        let refused = admit(retry("elsewhere", None)).map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(
                "tenant `acme`, component `ledger.wasm`: subscriber `reconcile` writes its \
                 counted copies to retry stream `elsewhere`, which the tenant may not publish \
                 to (add it to the tenant's `publish` list)"
                    .to_owned()
            )
        );
        for (settings, says) in [
            (retry("refunds", None), "is the stream it reads"),
            (
                retry("refunds.dead", None),
                "where its records given up on go",
            ),
            (retry("r", Some("r")), "where its records given up on go"),
        ] {
            let refused = admit(settings).map_err(|e| e.to_string());
            assert!(
                refused.as_ref().is_err_and(|e| e.contains(says)),
                "{refused:?}"
            );
        }
    }
}
