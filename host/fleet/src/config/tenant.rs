//! One `[[tenants]]` entry of the tenants file: its components, grants and limits, and the
//! operator's settings of its subscriptions (in Lambda's names).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ruststream_common::escape::quote;
use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::runner::OperatorSettings;
use ruststream_runtime::app::{MAX_BATCH_LIMIT, StartPosition, SubscriptionSpec, valid_name};
use serde::Deserialize;

use super::limits::LimitOverrides;
use super::place::{ComponentSource, KeyPath, Mistake};
use crate::identity::Role;
use crate::settings::DurationSetting;

/// One `[[tenants]]` entry: the tenant's components, grants, limits and operator settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSection {
    pub(crate) name: String,
    pub(crate) components: Vec<PathBuf>,
    /// Where each of `components` is named, and how it is written there (set by
    /// [`Config::load`]; empty for a section not read from a file).
    #[serde(skip)]
    pub(crate) sources: Vec<ComponentSource>,
    #[serde(default)]
    pub(crate) subscribe: Vec<String>,
    #[serde(default)]
    pub(crate) publish: Vec<String>,
    pub(crate) quarantine_after: Option<u32>,
    #[serde(default)]
    pub(crate) limits: LimitOverrides,
    /// The IAM role the tenant's AWS calls assume (default: the host's own credentials).
    pub(crate) role_arn: Option<String>,
    /// The external id the role's trust policy asks for.
    pub(crate) external_id: Option<String>,
    /// Operator settings for every subscription of the tenant (Lambda's names).
    pub(crate) starting_position: Option<StartingPosition>,
    pub(crate) starting_position_timestamp_ms: Option<u64>,
    pub(crate) batch_size: Option<u32>,
    pub(crate) maximum_retry_attempts: Option<u32>,
    pub(crate) on_failure: Option<String>,
    pub(crate) maximum_record_age: Option<DurationSetting>,
    pub(crate) retry_stream: Option<String>,
    /// How its subscriptions read: `"polling"` (default) or `"fan-out"`.
    pub(crate) read: Option<ReadMode>,
    pub(crate) enabled: Option<bool>,
    /// The same settings for one subscription, by subscriber name; they win over the tenant's.
    #[serde(default)]
    pub(crate) subscriptions: BTreeMap<String, MappingSettings>,
}

impl TenantSection {
    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Each of its component files (resolved against the tenants file's folder), with where
    /// the file names it.
    pub fn components(&self) -> impl Iterator<Item = (&Path, &ComponentSource)> {
        self.components
            .iter()
            .map(PathBuf::as_path)
            .zip(&self.sources)
    }
}

/// Lambda's `StartingPosition`, in our spelling or in Lambda's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StartingPosition {
    #[serde(alias = "TRIM_HORIZON")]
    TrimHorizon,
    #[serde(alias = "LATEST")]
    Latest,
    #[serde(alias = "AT_TIMESTAMP")]
    AtTimestamp,
}

/// An operator's settings for a subscription, as Lambda's Kinesis event source mapping names
/// them; unset keys keep what the tenant section (then the component) says.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MappingSettings {
    pub starting_position: Option<StartingPosition>,
    /// With `starting_position = "at_timestamp"`: ms since the epoch.
    pub starting_position_timestamp_ms: Option<u64>,
    /// Records per handler call.
    pub batch_size: Option<u32>,
    /// Retries after the first delivery: at most this + 1 deliveries, a ceiling on the
    /// component's `max_attempts`.
    pub maximum_retry_attempts: Option<u32>,
    /// The stream spent records go to, instead of the component's dead letter.
    pub on_failure: Option<String>,
    /// Records older than this (`"1h"`, `"30s"`) are given up on, held ones included.
    pub maximum_record_age: Option<DurationSetting>,
    /// The stream the subscription's counted copies go to (and are read back from) instead
    /// of the stream it reads.
    pub retry_stream: Option<String>,
    /// `"polling"` or `"fan-out"`.
    pub read: Option<ReadMode>,
    pub enabled: Option<bool>,
}

impl MappingSettings {
    /// `self` where set, else `base`.
    pub(super) fn or(&self, base: &Self) -> Self {
        Self {
            starting_position: self.starting_position.or(base.starting_position),
            starting_position_timestamp_ms: self
                .starting_position_timestamp_ms
                .or(base.starting_position_timestamp_ms),
            batch_size: self.batch_size.or(base.batch_size),
            maximum_retry_attempts: self.maximum_retry_attempts.or(base.maximum_retry_attempts),
            on_failure: self.on_failure.clone().or_else(|| base.on_failure.clone()),
            maximum_record_age: self.maximum_record_age.or(base.maximum_record_age),
            retry_stream: (self.retry_stream.clone()).or_else(|| base.retry_stream.clone()),
            read: self.read.or(base.read),
            enabled: self.enabled.or(base.enabled),
        }
    }

    /// The host's form of these settings (checked by [`check`](Self::check) before).
    pub(super) fn operator(&self) -> OperatorSettings {
        let start = self.starting_position.map(|position| match position {
            StartingPosition::TrimHorizon => StartPosition::Horizon,
            StartingPosition::Latest => StartPosition::Latest,
            StartingPosition::AtTimestamp => {
                StartPosition::AtTimestamp(self.starting_position_timestamp_ms.unwrap_or(0))
            }
        });
        OperatorSettings {
            start,
            batch_size: self.batch_size,
            max_attempts: self.maximum_retry_attempts.map(|n| n.saturating_add(1)),
            on_failure: self.on_failure.clone(),
            max_record_age: self.maximum_record_age.map(DurationSetting::get),
            retry_stream: self.retry_stream.clone(),
            read: self.read,
            enabled: self.enabled.unwrap_or(true),
        }
    }

    pub(super) fn check(&self, at: &KeyPath, publish: &[String]) -> Result<(), Mistake> {
        if self.starting_position == Some(StartingPosition::AtTimestamp)
            && self.starting_position_timestamp_ms.is_none()
        {
            return Err(Mistake::new(
                at.clone().key("starting_position"),
                "`at_timestamp` needs `starting_position_timestamp_ms`",
            ));
        }
        if let Some(batch) = self
            .batch_size
            .filter(|b| !(1..=MAX_BATCH_LIMIT).contains(b))
        {
            return Err(Mistake::new(
                at.clone().key("batch_size"),
                format!("`batch_size = {batch}`: give 1 to {MAX_BATCH_LIMIT}"),
            ));
        }
        if let Some(retries) = self
            .maximum_retry_attempts
            .filter(|n| *n > MAX_RETRY_ATTEMPTS)
        {
            return Err(Mistake::new(
                at.clone().key("maximum_retry_attempts"),
                format!("`maximum_retry_attempts = {retries}`: at most {MAX_RETRY_ATTEMPTS}"),
            ));
        }
        if let Some(age) = self.maximum_record_age.filter(|age| age.is_zero()) {
            return Err(Mistake::new(
                at.clone().key("maximum_record_age"),
                format!("`\"{age}\"` would give up on every record at once"),
            ));
        }
        if let Some(stream) = &self.on_failure
            && !(valid_name(stream, 128) && publish.contains(stream))
        {
            return Err(Mistake::new(
                at.clone().key("on_failure"),
                format!(
                    "`{}` must be a stream the tenant may publish to (its `publish` list)",
                    quote(stream)
                ),
            ));
        }
        if let Some(stream) = &self.retry_stream {
            if !(valid_name(stream, 128) && publish.contains(stream)) {
                return Err(Mistake::new(
                    at.clone().key("retry_stream"),
                    format!(
                        "`{}` must be a stream the tenant may publish to (its `publish` list): \
                         the subscription's counted copies are written there",
                        quote(stream)
                    ),
                ));
            }
            if self.on_failure.as_ref() == Some(stream) {
                return Err(Mistake::new(
                    at.clone().key("retry_stream"),
                    format!(
                        "`{}` is also `on_failure`: the subscription would read the records it \
                         gave up on back as new ones; give its copies a stream of their own",
                        quote(stream)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The most retries `maximum_retry_attempts` may ask for (Lambda's own maximum).
pub(super) const MAX_RETRY_ATTEMPTS: u32 = 10_000;

impl TenantSection {
    /// The role its AWS calls assume, if it names one.
    pub(crate) fn role(&self) -> Option<Role> {
        self.role_arn.as_ref().map(|arn| Role {
            arn: arn.clone(),
            external_id: self.external_id.clone(),
        })
    }

    /// `role_arn` names an IAM role; `external_id` comes only with it.
    pub(super) fn check_role(&self, at: &KeyPath) -> Result<(), Mistake> {
        if let Some(arn) = &self.role_arn
            && !is_role_arn(arn)
        {
            return Err(Mistake::new(
                at.clone().key("role_arn"),
                format!(
                    "`{}` is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)",
                    quote(arn)
                ),
            ));
        }
        if self.external_id.is_some() && self.role_arn.is_none() {
            return Err(Mistake::new(
                at.clone().key("external_id"),
                "`external_id` is only used to assume a `role_arn`, and none is set",
            ));
        }
        Ok(())
    }

    /// The tenant-wide operator settings.
    pub(super) fn mapping(&self) -> MappingSettings {
        MappingSettings {
            starting_position: self.starting_position,
            starting_position_timestamp_ms: self.starting_position_timestamp_ms,
            batch_size: self.batch_size,
            maximum_retry_attempts: self.maximum_retry_attempts,
            on_failure: self.on_failure.clone(),
            maximum_record_age: self.maximum_record_age,
            retry_stream: self.retry_stream.clone(),
            read: self.read,
            enabled: self.enabled,
        }
    }

    /// The operator's settings of every subscriber the file names, over the tenant's own; and
    /// the tenant's own for any other subscriber.
    pub fn operator_settings(&self) -> OperatorConfig {
        let tenant = self.mapping();
        OperatorConfig {
            by_subscriber: self
                .subscriptions
                .iter()
                .map(|(name, s)| (name.clone(), s.or(&tenant).operator()))
                .collect(),
            others: tenant.operator(),
        }
    }
}

/// A tenant's operator settings, ready for its components' subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorConfig {
    by_subscriber: BTreeMap<String, OperatorSettings>,
    others: OperatorSettings,
}

impl OperatorConfig {
    /// The settings of each of `subscriptions`.
    pub fn for_subscriptions(
        &self,
        subscriptions: &[SubscriptionSpec],
    ) -> HashMap<String, OperatorSettings> {
        subscriptions
            .iter()
            .map(|s| {
                let settings = self.by_subscriber.get(&s.name).unwrap_or(&self.others);
                (s.name.clone(), settings.clone())
            })
            .collect()
    }
}

/// `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME`, as IAM writes it.
pub(super) fn is_role_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts[..] else {
        return false;
    };
    prefix == "arn"
        && partition.starts_with("aws")
        && service == "iam"
        && region.is_empty()
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && resource
            .strip_prefix("role/")
            .is_some_and(|name| !name.is_empty() && !name.ends_with('/'))
}
