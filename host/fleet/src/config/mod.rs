//! The host's configuration file: tenants, their components, grants and limits.
//!
//! ```toml
//! [host]
//! lease_store = "dynamodb"              # or "memory" (the default)
//! lease_table = "ruststream-{tenant}-{app}"
//! create_lease_table = true
//! compile_timeout_ms = 30000            # also compile_cpu_seconds, their growth per MiB
//!                                       # (compile_timeout_ms_per_mib,
//!                                       # compile_cpu_seconds_per_mib) and ceilings
//!                                       # (compile_timeout_max_ms, compile_cpu_max_seconds),
//!                                       # compile_memory_mib, compile_max_bytes,
//!                                       # compile_max_functions,
//!                                       # compile_max_function_bytes, compile_cache
//! state_dir = "/var/lib/ruststream"     # deploys, kept versions, the admin token
//! keep_versions = 10                    # versions kept per app
//! component_bucket = "acme-ruststream"  # fleet deploys: component bytes in S3, what runs
//! desired_table = "ruststream.desired"  # in this DynamoDB table (needs DynamoDB leases)
//!
//! [defaults]                            # limits every tenant gets unless it says otherwise
//! call_deadline_ms = 5000
//! memory_mib = 64                       # all memories and tables of an instance together
//! memory_budget_mib = 1024              # all instances of a tenant on a host, live and
//!                                       # shadow (none by default); a shadow must fit
//! max_delay_ms = 900000                 # see `LimitOverrides` for every key
//!
//! [[tenants]]
//! name = "acme"
//! components = ["acme/ledger.wasm"]     # relative to this file
//! subscribe = ["ledger"]
//! publish = ["ledger.dead"]
//! quarantine_after = 10
//! limits = { call_deadline_ms = 1000 }
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::lease::{TableTemplate, TemplateError};
use ruststream_kinesis::runner::OperatorSettings;
use ruststream_runtime::{
    Tenant,
    app::{MAX_BATCH_LIMIT, StartPosition, SubscriptionSpec, valid_name},
    component::compile::CompileLimits,
    escape::{escape_controls, quote},
    policy::StreamGrant,
    tenant::Limits,
};
use serde::Deserialize;

pub mod component_file;
mod parse_error;

use crate::identity::Role;

/// Where leases and checkpoints live (`[host] lease_store`, `--lease-store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseStoreKind {
    /// In memory: checkpoints are forgotten on restart (shards reopen at their start position).
    Memory,
    /// A DynamoDB table per app: checkpoints survive restarts, hosts share shards.
    Dynamodb,
}

/// A tenants file, read and checked ([`Config::load`]): what `run` loads, and what `check
/// --config` and `redrive` read of it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub(crate) host: HostSection,
    #[serde(default)]
    pub(crate) defaults: LimitOverrides,
    pub(crate) tenants: Vec<TenantSection>,
}

/// The file's `[host]` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    pub(crate) lease_store: Option<LeaseStoreKind>,
    /// `{tenant}` and `{app}` are replaced.
    pub(crate) lease_table: Option<String>,
    pub(crate) create_lease_table: Option<bool>,
    /// Where compiled components are cached (relative to this file).
    pub(crate) compile_cache: Option<PathBuf>,
    pub(crate) compile_timeout_ms: Option<u64>,
    pub(crate) compile_cpu_seconds: Option<u64>,
    /// What each MiB of a component past the first adds to the compile budget.
    pub(crate) compile_timeout_ms_per_mib: Option<u64>,
    pub(crate) compile_cpu_seconds_per_mib: Option<u64>,
    /// The compile budget's ceilings, whatever the component's size.
    pub(crate) compile_timeout_max_ms: Option<u64>,
    pub(crate) compile_cpu_max_seconds: Option<u64>,
    pub(crate) compile_memory_mib: Option<u64>,
    pub(crate) compile_max_bytes: Option<usize>,
    pub(crate) compile_max_functions: Option<usize>,
    pub(crate) compile_max_function_bytes: Option<usize>,
    /// Host timings, as durations (`"10s"`); a flag or its environment variable wins.
    pub(crate) lease_ttl: Option<String>,
    pub(crate) renew_interval: Option<String>,
    pub(crate) shard_sync_interval: Option<String>,
    pub(crate) shutdown_grace: Option<String>,
    pub(crate) checkpoint_interval: Option<String>,
    pub(crate) poll_interval: Option<String>,
    /// Most records per GetRecords (1-10000).
    pub(crate) get_records_limit: Option<i32>,
    /// Threads that run guest calls (1-1024; default one per core).
    pub(crate) compute_threads: Option<u16>,
    /// Where the host keeps its state (relative to this file); `--state-dir` wins.
    pub(crate) state_dir: Option<PathBuf>,
    /// How many versions of each app the state directory keeps (at least 1).
    pub(crate) keep_versions: Option<usize>,
    /// The S3 bucket of the fleet's component bytes: set, deploys are the fleet's (recorded
    /// in the desired-state table, run by every host); unset, each host's own.
    pub(crate) component_bucket: Option<String>,
    /// The fleet's desired-state table (default `ruststream.desired`).
    pub(crate) desired_table: Option<String>,
}

impl HostSection {
    /// The lease table template (`lease_table`), if the file sets one.
    pub fn lease_table(&self) -> Option<&str> {
        self.lease_table.as_deref()
    }

    /// Where compiled components are cached (`compile_cache`), if the file says.
    pub fn compile_cache(&self) -> Option<&PathBuf> {
        self.compile_cache.as_ref()
    }

    /// The compile bounds, over the built-in defaults.
    pub fn compile_limits(&self) -> CompileLimits {
        let mut limits = CompileLimits::default();
        if let Some(ms) = self.compile_timeout_ms {
            limits.timeout = Duration::from_millis(ms);
        }
        if let Some(seconds) = self.compile_cpu_seconds {
            limits.cpu = Duration::from_secs(seconds);
        }
        if let Some(ms) = self.compile_timeout_ms_per_mib {
            limits.timeout_per_mib = Duration::from_millis(ms);
        }
        if let Some(seconds) = self.compile_cpu_seconds_per_mib {
            limits.cpu_per_mib = Duration::from_secs(seconds);
        }
        if let Some(ms) = self.compile_timeout_max_ms {
            limits.timeout_ceiling = Duration::from_millis(ms);
        }
        if let Some(seconds) = self.compile_cpu_max_seconds {
            limits.cpu_ceiling = Duration::from_secs(seconds);
        }
        if let Some(mib) = self.compile_memory_mib {
            limits.memory_bytes = mib << 20;
        }
        limits.max_bytes = self.compile_max_bytes.unwrap_or(limits.max_bytes);
        limits.max_functions = self.compile_max_functions.unwrap_or(limits.max_functions);
        limits.max_function_bytes = self
            .compile_max_function_bytes
            .unwrap_or(limits.max_function_bytes);
        limits
    }

    fn check(&self) -> Result<(), Mistake> {
        let zero = [
            ("compile_timeout_ms", self.compile_timeout_ms == Some(0)),
            ("compile_cpu_seconds", self.compile_cpu_seconds == Some(0)),
            (
                "compile_timeout_max_ms",
                self.compile_timeout_max_ms == Some(0),
            ),
            (
                "compile_cpu_max_seconds",
                self.compile_cpu_max_seconds == Some(0),
            ),
            ("compile_memory_mib", self.compile_memory_mib == Some(0)),
            ("compile_max_bytes", self.compile_max_bytes == Some(0)),
            (
                "compile_max_functions",
                self.compile_max_functions == Some(0),
            ),
            (
                "compile_max_function_bytes",
                self.compile_max_function_bytes == Some(0),
            ),
        ];
        let at = KeyPath::root().key("host");
        refuse_zero(at.clone(), &zero)?;
        if self.keep_versions == Some(0) {
            return Err(Mistake::new(
                at.key("keep_versions"),
                "`keep_versions = 0` would not keep even the live version: give 1 or more \
                 (a rollback needs 2)",
            ));
        }
        let timings = [
            ("lease_ttl", &self.lease_ttl),
            ("renew_interval", &self.renew_interval),
            ("shard_sync_interval", &self.shard_sync_interval),
            ("shutdown_grace", &self.shutdown_grace),
            ("checkpoint_interval", &self.checkpoint_interval),
            ("poll_interval", &self.poll_interval),
        ];
        for (key, text) in timings {
            if let Some(Err(reason)) = text.as_deref().map(parse_duration) {
                return Err(Mistake::new(at.clone().key(key), reason));
            }
        }
        if let Some(threads) = self.compute_threads
            && !(1..=1024).contains(&threads)
        {
            return Err(Mistake::new(
                at.key("compute_threads"),
                format!("`compute_threads = {threads}`: give 1 to 1024"),
            ));
        }
        match self.get_records_limit {
            Some(limit) if !(1..=10_000).contains(&limit) => Err(Mistake::new(
                at.key("get_records_limit"),
                format!("`get_records_limit = {limit}`: give 1 to 10000"),
            )),
            _ => Ok(()),
        }
    }

    /// A timing key's value, once [`check`](Self::check) passed.
    pub(crate) fn timing(&self, value: &Option<String>) -> Option<Duration> {
        value.as_deref().and_then(|text| parse_duration(text).ok())
    }
}

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
    pub(crate) maximum_record_age: Option<String>,
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
    pub maximum_record_age: Option<String>,
    /// The stream the subscription's counted copies go to (and are read back from) instead
    /// of the stream it reads.
    pub retry_stream: Option<String>,
    /// `"polling"` or `"fan-out"`.
    pub read: Option<ReadMode>,
    pub enabled: Option<bool>,
}

impl MappingSettings {
    /// `self` where set, else `base`.
    fn or(&self, base: &Self) -> Self {
        Self {
            starting_position: self.starting_position.or(base.starting_position),
            starting_position_timestamp_ms: self
                .starting_position_timestamp_ms
                .or(base.starting_position_timestamp_ms),
            batch_size: self.batch_size.or(base.batch_size),
            maximum_retry_attempts: self.maximum_retry_attempts.or(base.maximum_retry_attempts),
            on_failure: self.on_failure.clone().or_else(|| base.on_failure.clone()),
            maximum_record_age: (self.maximum_record_age.clone())
                .or_else(|| base.maximum_record_age.clone()),
            retry_stream: (self.retry_stream.clone()).or_else(|| base.retry_stream.clone()),
            read: self.read.or(base.read),
            enabled: self.enabled.or(base.enabled),
        }
    }

    /// The host's form of these settings (checked by [`check`](Self::check) before).
    fn operator(&self) -> OperatorSettings {
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
            max_record_age: (self.maximum_record_age.as_deref())
                .and_then(|text| parse_duration(text).ok()),
            retry_stream: self.retry_stream.clone(),
            read: self.read,
            enabled: self.enabled.unwrap_or(true),
        }
    }

    fn check(&self, at: &KeyPath, publish: &[String]) -> Result<(), Mistake> {
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
        if let Some(Err(reason)) = self.maximum_record_age.as_deref().map(parse_duration) {
            return Err(Mistake::new(at.clone().key("maximum_record_age"), reason));
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

/// A duration as the file writes it: a whole number and a unit, `ms`, `s`, `m`, `h` or `d`
/// (`"500ms"`, `"30s"`, `"7d"`); never zero.
///
/// # Errors
/// What is wrong with `text`, as a message for the file's reader.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let bad = || {
        format!(
            "`{}` is not a duration: write e.g. \"500ms\", \"30s\", \"5m\", \"1h\" or \"7d\"",
            quote(text)
        )
    };
    let n: u64 = number.parse().map_err(|_| bad())?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        "d" => Duration::from_secs(n.saturating_mul(86_400)),
        _ => return Err(bad()),
    };
    if duration.is_zero() {
        return Err(format!(
            "`{}` would give up on every record at once",
            quote(text)
        ));
    }
    Ok(duration)
}

/// The most retries `maximum_retry_attempts` may ask for (Lambda's own maximum).
const MAX_RETRY_ATTEMPTS: u32 = 10_000;

impl TenantSection {
    /// The role its AWS calls assume, if it names one.
    pub(crate) fn role(&self) -> Option<Role> {
        self.role_arn.as_ref().map(|arn| Role {
            arn: arn.clone(),
            external_id: self.external_id.clone(),
        })
    }

    /// `role_arn` names an IAM role; `external_id` comes only with it.
    fn check_role(&self, at: &KeyPath) -> Result<(), Mistake> {
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
    fn mapping(&self) -> MappingSettings {
        MappingSettings {
            starting_position: self.starting_position,
            starting_position_timestamp_ms: self.starting_position_timestamp_ms,
            batch_size: self.batch_size,
            maximum_retry_attempts: self.maximum_retry_attempts,
            on_failure: self.on_failure.clone(),
            maximum_record_age: self.maximum_record_age.clone(),
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

/// Limits as written in the file; absent values fall back to `[defaults]`, then the built-in
/// defaults (see `docs/sandbox.md`, "Defaults, and why", for each one and why).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub(crate) call_deadline_ms: Option<u64>,
    pub(crate) memory_mib: Option<usize>,
    pub(crate) memory_budget_mib: Option<usize>,
    pub(crate) cpu_weight: Option<u32>,
    pub(crate) fuel: Option<u64>,
    pub(crate) max_tables: Option<usize>,
    pub(crate) max_memories: Option<usize>,
    pub(crate) max_table_elements: Option<usize>,
    pub(crate) max_instances: Option<usize>,
    pub(crate) max_host_resources: Option<usize>,
    pub(crate) max_subscriptions: Option<usize>,
    pub(crate) max_metric_series: Option<usize>,
    pub(crate) log_lines_per_record: Option<u32>,
    pub(crate) log_bytes_per_record: Option<usize>,
    pub(crate) log_lines_per_call: Option<u32>,
    pub(crate) log_bytes_per_call: Option<usize>,
    pub(crate) log_lines_per_second: Option<u32>,
    pub(crate) host_log_lines_per_second: Option<u32>,
    pub(crate) max_delay_ms: Option<u64>,
    pub(crate) min_copy_delay_ms: Option<u64>,
    pub(crate) max_hold_ms: Option<u64>,
    pub(crate) write_records_per_second: Option<u32>,
    pub(crate) write_bytes_per_second: Option<u64>,
}

impl LimitOverrides {
    fn apply(&self, mut limits: Limits) -> Limits {
        let set = |value: Option<usize>, field: &mut usize| *field = value.unwrap_or(*field);
        let millis = |value: Option<u64>, field: &mut Duration| {
            if let Some(ms) = value {
                *field = Duration::from_millis(ms);
            }
        };
        millis(self.call_deadline_ms, &mut limits.call_deadline);
        set(
            self.memory_mib.map(|mib| mib << 20),
            &mut limits.memory_bytes,
        );
        if let Some(mib) = self.memory_budget_mib {
            limits.memory_budget = Some(mib << 20);
        }
        limits.cpu_weight = self.cpu_weight.unwrap_or(limits.cpu_weight);
        set(self.max_tables, &mut limits.max_tables);
        set(self.max_memories, &mut limits.max_memories);
        set(self.max_table_elements, &mut limits.max_table_elements);
        set(self.max_instances, &mut limits.max_instances);
        set(self.max_host_resources, &mut limits.max_host_resources);
        set(self.max_subscriptions, &mut limits.max_subscriptions);
        set(self.max_metric_series, &mut limits.max_metric_series);
        limits.fuel = self.fuel.or(limits.fuel);
        let log = &mut limits.log;
        log.lines_per_record = self.log_lines_per_record.unwrap_or(log.lines_per_record);
        set(self.log_bytes_per_record, &mut log.bytes_per_record);
        log.lines_per_call = self.log_lines_per_call.unwrap_or(log.lines_per_call);
        set(self.log_bytes_per_call, &mut log.bytes_per_call);
        log.lines_per_second = self.log_lines_per_second.unwrap_or(log.lines_per_second);
        log.host_lines_per_second = self
            .host_log_lines_per_second
            .unwrap_or(log.host_lines_per_second);
        millis(self.max_delay_ms, &mut limits.copies.max_delay);
        millis(self.min_copy_delay_ms, &mut limits.copies.min_copy_delay);
        millis(self.max_hold_ms, &mut limits.copies.max_hold);
        let writes = &mut limits.writes;
        writes.records_per_second = self
            .write_records_per_second
            .unwrap_or(writes.records_per_second);
        writes.bytes_per_second = self
            .write_bytes_per_second
            .unwrap_or(writes.bytes_per_second);
        limits
    }

    /// Limits that would refuse every call, instance or write at 0.
    fn check(&self, at: KeyPath) -> Result<(), Mistake> {
        let zero = [
            ("call_deadline_ms", self.call_deadline_ms == Some(0)),
            ("memory_mib", self.memory_mib == Some(0)),
            ("fuel", self.fuel == Some(0)),
            ("max_memories", self.max_memories == Some(0)),
            ("max_instances", self.max_instances == Some(0)),
            ("max_subscriptions", self.max_subscriptions == Some(0)),
            ("max_metric_series", self.max_metric_series == Some(0)),
            ("max_delay_ms", self.max_delay_ms == Some(0)),
            ("max_hold_ms", self.max_hold_ms == Some(0)),
            (
                "write_records_per_second",
                self.write_records_per_second == Some(0),
            ),
            (
                "write_bytes_per_second",
                self.write_bytes_per_second == Some(0),
            ),
        ];
        if let Some(weight) = self.cpu_weight
            && !(1..=10_000).contains(&weight)
        {
            return Err(Mistake::new(
                at.key("cpu_weight"),
                format!(
                    "`cpu_weight = {weight}`: give 1 to 10000 (100 is the default share; 200 \
                     gets twice the CPU of 100 when tenants compete)"
                ),
            ));
        }
        if self.memory_budget_mib == Some(0) {
            return Err(Mistake::new(
                at.key("memory_budget_mib"),
                "`memory_budget_mib = 0` would leave no room for any shadow instance: give the \
                 MiB a tenant's instances may reserve together, or leave it out for no budget"
                    .to_owned(),
            ));
        }
        refuse_zero(at, &zero)
    }
}

fn refuse_zero(at: KeyPath, keys: &[(&str, bool)]) -> Result<(), Mistake> {
    match keys.iter().find(|(_, zero)| *zero) {
        Some((key, _)) => Err(Mistake::new(
            at.key(key),
            format!("`{key} = 0` would refuse everything"),
        )),
        None => Ok(()),
    }
}

/// Where in the file a value is: keys and array indices from the top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(Vec<Step>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl KeyPath {
    fn root() -> Self {
        Self::default()
    }

    fn key(mut self, key: &str) -> Self {
        self.0.push(Step::Key(key.to_owned()));
        self
    }

    fn index(mut self, index: usize) -> Self {
        self.0.push(Step::Index(index));
        self
    }

    /// The 1-based line of the value at this path in `text`, parsed into `root`, if the path
    /// is there. A file naming a thousand components is parsed once for their thousand lines.
    fn line_at(&self, root: &toml::de::DeValue<'_>, text: &str) -> Option<usize> {
        let (mut value, mut start) = (root, 0);
        for step in &self.0 {
            let found = match step {
                Step::Key(key) => value.get(key.as_str())?,
                Step::Index(index) => value.get(*index)?,
            };
            (value, start) = (found.get_ref(), found.span().start);
        }
        Some(text.get(..start)?.matches('\n').count() + 1)
    }
}

/// `text` parsed for the places of its keys, if it parses.
fn document(text: &str) -> Option<toml::de::DeValue<'_>> {
    let document = toml::de::DeTable::parse(text).ok()?;
    Some(toml::de::DeValue::Table(document.into_inner()))
}

impl std::fmt::Display for KeyPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(key) if i == 0 => f.write_str(key)?,
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A value that parses but cannot be used: where it is and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mistake {
    pub key: KeyPath,
    pub message: String,
}

impl Mistake {
    fn new(key: KeyPath, message: impl Into<String>) -> Self {
        Self {
            key,
            message: message.into(),
        }
    }

    /// The mistake as one line naming `file`, the line (when the key is found in `text`) and
    /// the key.
    fn in_file(&self, file: &Path, text: &str) -> String {
        format!("{}: {}", self.place_in(file, text), self.message)
    }

    /// Where the mistake is: `file`, the line (when the key is found in `text`) and the key.
    fn place_in(&self, file: &Path, text: &str) -> String {
        self.place_at(file, text, document(text).as_ref())
    }

    /// As [`place_in`](Self::place_in), with `text` already parsed into `root`.
    fn place_at(&self, file: &Path, text: &str, root: Option<&toml::de::DeValue<'_>>) -> String {
        let file = file.display();
        let line = root.and_then(|root| self.key.line_at(root, text));
        match (self.key.0.is_empty(), line) {
            (true, _) => format!("config file {file}"),
            (false, Some(line)) => format!("config file {file}, line {line}, `{}`", self.key),
            (false, None) => format!("config file {file}, `{}`", self.key),
        }
    }
}

/// Where a component file is named in the tenants file, and how it is written there: what a
/// message about the file shows, rather than the path it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentSource {
    /// The path as the tenants file writes it.
    pub written: String,
    /// The file, line and key: `config file F, line 3, `tenants[0].components[1]``.
    pub place: String,
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = \"{}\"", self.place, escape_controls(&self.written))
    }
}

impl ComponentSource {
    /// What names the component in a line about it: `tenant `T`, config file F, line 3,
    /// `tenants[0].components[1]` = "acme/ledger.wasm"`. `check --config` and `run` (its log,
    /// its `partial start` line, readiness, and the error it ends with when nothing starts)
    /// name a component of a tenants file with these words, followed by `: ` and the reason.
    pub fn named(&self, tenant: &str) -> String {
        format!("tenant `{tenant}`, {self}")
    }

    /// The path as the tenants file writes it, as a refusal shows it.
    pub fn shown_path(&self) -> String {
        escape_controls(&self.written).into_owned()
    }
}

/// Why a tenants file cannot be used; each message names the file (and the line and key of a
/// mistake in it).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not TOML of the tenants file's shape: what and where, with the accepted keys or
    /// values.
    #[error("{0}")]
    Parse(String),
    /// A value the host refuses (a tenant named twice, an invalid stream, a zero limit): what
    /// and where.
    #[error("{0}")]
    Mistake(String),
    /// The lease table template (`[host] lease_table`) does not fit the file's tenants and
    /// components.
    #[error("config file {}, `host.lease_table`", path.display())]
    LeaseTable {
        /// The tenants file.
        path: PathBuf,
        /// Why the template does not fit.
        #[source]
        source: TemplateError,
    },
}

impl Config {
    /// Whether the lease table template `template` (the file's `[host] lease_table`, read
    /// from `path`) keeps every tenant's apps in tables of their own.
    ///
    /// # Errors
    /// [`ConfigError::LeaseTable`], naming the file and the key.
    pub fn check_lease_table(&self, path: &Path, template: &str) -> Result<(), ConfigError> {
        let busiest = self.tenants.iter().map(|t| t.components.len()).max();
        TableTemplate::new(template, self.tenants.len(), busiest.unwrap_or(0))
            .map(drop)
            .map_err(|source| ConfigError::LeaseTable {
                path: path.to_owned(),
                source,
            })
    }

    /// Reads and checks the file at `path`; component paths become relative to its folder.
    ///
    /// # Errors
    /// When the file cannot be read, is not valid TOML of this shape (the error says where),
    /// or names a tenant twice, an invalid stream, or a zero limit.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text)
            .map_err(|error| ConfigError::Parse(parse_error::describe(path, &text, &error)))?;
        if let Err(mistake) = config.check() {
            return Err(ConfigError::Mistake(mistake.in_file(path, &text)));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let root = document(&text);
        for (index, tenant) in config.tenants.iter_mut().enumerate() {
            let at = KeyPath::root()
                .key("tenants")
                .index(index)
                .key("components");
            for (slot, component) in tenant.components.iter_mut().enumerate() {
                tenant.sources.push(ComponentSource {
                    written: component.display().to_string(),
                    place: Mistake::new(at.clone().index(slot), "").place_at(
                        path,
                        &text,
                        root.as_ref(),
                    ),
                });
                *component = base.join(&*component);
            }
        }
        if let Some(cache) = &mut config.host.compile_cache {
            *cache = base.join(&*cache);
        }
        if let Some(state) = &mut config.host.state_dir {
            *state = base.join(&*state);
        }
        Ok(config)
    }

    fn check(&self) -> Result<(), Mistake> {
        if self.tenants.is_empty() {
            return Err(Mistake::new(KeyPath::root(), "no [[tenants]] configured"));
        }
        self.host.check()?;
        self.defaults.check(KeyPath::root().key("defaults"))?;
        let mut names = BTreeSet::new();
        for (index, tenant) in self.tenants.iter().enumerate() {
            let at = KeyPath::root().key("tenants").index(index);
            if !valid_name(&tenant.name, 64) {
                return Err(Mistake::new(
                    at.key("name"),
                    format!(
                        "tenant name `{}` is not valid: use 1-64 characters of [A-Za-z0-9_.-]",
                        quote(&tenant.name)
                    ),
                ));
            }
            if !names.insert(&tenant.name) {
                let message = format!("tenant `{}` is configured twice", tenant.name);
                return Err(Mistake::new(at.key("name"), message));
            }
            if tenant.components.is_empty() {
                let message = format!("tenant `{}` has no components", tenant.name);
                return Err(Mistake::new(at.key("components"), message));
            }
            for (grant, streams) in [
                ("subscribe", &tenant.subscribe),
                ("publish", &tenant.publish),
            ] {
                if let Some(bad) = streams.iter().position(|s| !valid_name(s, 128)) {
                    return Err(Mistake::new(
                        at.clone().key(grant).index(bad),
                        format!("`{}` is not a valid stream name", quote(&streams[bad])),
                    ));
                }
            }
            tenant.check_role(&at)?;
            tenant.mapping().check(&at, &tenant.publish)?;
            for (name, settings) in &tenant.subscriptions {
                let at = at.clone().key("subscriptions").key(name);
                settings.or(&tenant.mapping()).check(&at, &tenant.publish)?;
            }
            tenant.limits.check(at.key("limits"))?;
        }
        Ok(())
    }

    /// Its `[host]` section.
    pub fn host(&self) -> &HostSection {
        &self.host
    }

    /// Its tenants, in file order.
    pub fn tenants(&self) -> &[TenantSection] {
        &self.tenants
    }

    /// Whether a tenant (or `[defaults]`) sets `fuel`: the engine must then meter fuel, which
    /// costs every call, so it is on only when asked for.
    pub fn uses_fuel(&self) -> bool {
        self.defaults.fuel.is_some() || self.tenants.iter().any(|t| t.limits.fuel.is_some())
    }

    /// The tenant configured in `section`.
    pub fn tenant(&self, section: &TenantSection) -> Tenant {
        let limits = section.limits.apply(self.defaults.apply(Limits::default()));
        let tenant = Tenant::new(&section.name)
            .subscribe(StreamGrant::only(section.subscribe.iter().cloned()))
            .publish(StreamGrant::only(section.publish.iter().cloned()))
            .limits(limits);
        match section.quarantine_after {
            Some(failures) => tenant.quarantine_after(failures),
            None => tenant,
        }
    }
}

/// `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME`, as IAM writes it.
fn is_role_arn(arn: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_runtime::tenant::LogLimits;

    fn parse(text: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text)?;
        if let Err(mistake) = config.check() {
            anyhow::bail!(mistake.in_file(Path::new("tenants.toml"), text));
        }
        Ok(config)
    }

    #[test]
    fn a_role_is_an_iam_role_arn_and_an_external_id_needs_one() -> anyhow::Result<()> {
        let tenant =
            |keys: &str| format!("[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n{keys}\n");
        let config = parse(&tenant(
            "role_arn = \"arn:aws:iam::123456789012:role/teams/ledger\"\nexternal_id = \"x-1\"",
        ))?;
        assert_eq!(
            config.tenants[0].role(),
            Some(Role {
                arn: "arn:aws:iam::123456789012:role/teams/ledger".into(),
                external_id: Some("x-1".into()),
            })
        );
        assert_eq!(parse(&tenant(""))?.tenants[0].role(), None);
        for bad in [
            "arn:aws:iam::123456789012:user/ledger",
            "arn:aws:iam::12345:role/ledger",
            "arn:aws:sts::123456789012:role/ledger",
            "arn:aws:iam:us-east-1:123456789012:role/ledger",
            "arn:aws:iam::123456789012:role/",
            "ledger",
        ] {
            let error = parse(&tenant(&format!("role_arn = \"{bad}\"")))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert_eq!(
                error,
                format!(
                    "config file tenants.toml, line 4, `tenants[0].role_arn`: `{bad}` is not an \
                     IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)"
                )
            );
        }
        let error = parse(&tenant("external_id = \"x-1\""))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("line 4, `tenants[0].external_id`: `external_id` is only used"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn a_semantic_mistake_names_its_line_and_key() {
        let text = "[defaults]\nmemory_mib = 32\n\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n\n[[tenants]]\nname = \"b\"\ncomponents = [\"y.wasm\"]\nsubscribe = [\"ok\", \"not ok\"]\n";
        let error = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            error,
            "config file tenants.toml, line 11, `tenants[1].subscribe[1]`: `not ok` is not a valid stream name"
        );
        let zero = "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n[tenants.limits]\ncall_deadline_ms = 10\nfuel = 0\n";
        let error = parse(zero).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            error,
            "config file tenants.toml, line 6, `tenants[0].limits.fuel`: `fuel = 0` would refuse everything"
        );
        let host = "[host]\ncompile_timeout_ms = 0\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(host).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("line 2, `host.compile_timeout_ms`"),
            "{error}"
        );
        let twice = "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n[[tenants]]\nname = \"a\"\ncomponents = [\"y.wasm\"]";
        let error = parse(twice)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("line 5, `tenants[1].name`: tenant `a` is configured twice"),
            "{error}"
        );
    }

    #[test]
    fn operator_settings_are_checked_and_a_subscriber_s_win_over_the_tenant_s() -> anyhow::Result<()>
    {
        let base = "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\npublish = [\"ops\"]\n";
        let error = |extra: &str| {
            parse(&format!("{base}{extra}"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(error("batch_size = 0").contains("line 5, `tenants[0].batch_size`"));
        assert!(error("on_failure = \"elsewhere\"").contains("its `publish` list"));
        assert!(
            error("starting_position = \"at_timestamp\"")
                .contains("starting_position_timestamp_ms")
        );
        assert!(
            error("[tenants.subscriptions.book]\nmaximum_retry_attempts = 20000")
                .contains("`tenants[0].subscriptions.book.maximum_retry_attempts`")
        );
        let bad_read = error("read = \"fanout\"");
        assert!(
            bad_read.contains("line 5") && bad_read.contains("expected `polling` or `fan-out`"),
            "{bad_read}"
        );
        let config = parse(&format!(
            "{base}batch_size = 10\nmaximum_retry_attempts = 2\nread = \"fan-out\"\n[tenants.subscriptions.book]\nbatch_size = 5\non_failure = \"ops\"\nenabled = false\nread = \"polling\"\n"
        ))?;
        let specs = [spec(0, "book"), spec(1, "audit")];
        let settings = config.tenants[0]
            .operator_settings()
            .for_subscriptions(&specs);
        let book = &settings["book"];
        assert_eq!((book.batch_size, book.max_attempts), (Some(5), Some(3)));
        assert_eq!(book.on_failure.as_deref(), Some("ops"));
        assert!(!book.enabled);
        assert_eq!(book.read, Some(ReadMode::Polling));
        let audit = &settings["audit"];
        assert_eq!(audit.read, Some(ReadMode::FanOut));
        assert_eq!(
            (audit.batch_size, audit.on_failure.as_deref()),
            (Some(10), None)
        );
        assert!(audit.enabled);
        Ok(())
    }

    /// A subscription `name` to `ledger`, with the contract's defaults.
    fn spec(index: u32, name: &str) -> SubscriptionSpec {
        SubscriptionSpec {
            index,
            name: name.into(),
            stream: "ledger".into(),
            retry: Default::default(),
            start: None,
            on_trap: ruststream_runtime::Outcome::Retry,
            batch_limit: None,
            max_record_age: None,
            retry_stream: None,
        }
    }

    #[test]
    fn a_retry_stream_is_one_the_tenant_publishes_to_and_not_its_on_failure() -> anyhow::Result<()>
    {
        let base = "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\npublish = [\"ops\", \"ledger.retry\"]\n";
        let error = |extra: &str| {
            parse(&format!("{base}{extra}"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let ungranted = error("[tenants.subscriptions.book]\nretry_stream = \"elsewhere\"");
        assert!(
            ungranted.contains("line 6, `tenants[0].subscriptions.book.retry_stream`")
                && ungranted.contains("its `publish` list"),
            "{ungranted}"
        );
        let dead = error("on_failure = \"ops\"\nretry_stream = \"ops\"");
        assert!(
            dead.contains("`tenants[0].retry_stream`") && dead.contains("also `on_failure`"),
            "{dead}"
        );
        // The tenant's retry stream for every subscription, one's own over it.
        let config = parse(&format!(
            "{base}retry_stream = \"ops\"\n[tenants.subscriptions.book]\nretry_stream = \"ledger.retry\"\n"
        ))?;
        let settings = config.tenants[0]
            .operator_settings()
            .for_subscriptions(&[spec(0, "book"), spec(0, "audit")]);
        assert_eq!(
            settings["book"].retry_stream.as_deref(),
            Some("ledger.retry")
        );
        assert_eq!(settings["audit"].retry_stream.as_deref(), Some("ops"));
        Ok(())
    }

    #[test]
    fn durations_are_a_number_and_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "5", "s", "1.5s", "5 s", "-1s", "0s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let base =
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nmaximum_record_age = \"soon\"\n";
        let error = parse(base).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("line 4, `tenants[0].maximum_record_age`"),
            "{error}"
        );
        let host =
            "[host]\nlease_ttl = \"10\"\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(host).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("line 2, `host.lease_ttl`: `10` is not a duration"),
            "{error}"
        );
    }

    #[test]
    fn fuel_anywhere_turns_metering_on() -> anyhow::Result<()> {
        let none = parse("[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]")?;
        assert!(!none.uses_fuel());
        let tenant = parse(
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nlimits = { fuel = 1000000 }",
        )?;
        assert!(tenant.uses_fuel());
        assert_eq!(
            tenant.tenant(&tenant.tenants[0]).policy().limits().fuel,
            Some(1_000_000)
        );
        let defaults =
            parse("[defaults]\nfuel = 5\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]")?;
        assert!(defaults.uses_fuel());
        Ok(())
    }

    #[test]
    fn a_tenant_gets_its_limits_over_the_defaults() -> anyhow::Result<()> {
        let config = parse(
            r#"
            [defaults]
            call_deadline_ms = 2000
            memory_mib = 32
            [[tenants]]
            name = "acme"
            components = ["a.wasm"]
            subscribe = ["ledger"]
            limits = { call_deadline_ms = 500, max_instances = 8, memory_budget_mib = 96 }
            "#,
        )?;
        let tenant = config.tenant(&config.tenants[0]);
        assert_eq!(tenant.policy().limits().max_instances, 8);
        assert_eq!(tenant.policy().limits().memory_budget, Some(96 << 20));
        assert_eq!(tenant.memory().budget(), Some(96 << 20));
        assert_eq!(
            tenant.policy().limits().max_table_elements,
            Limits::default().max_table_elements
        );
        assert_eq!(
            tenant.policy().limits().call_deadline,
            Duration::from_millis(500)
        );
        assert_eq!(tenant.policy().limits().memory_bytes, 32 << 20);
        assert_eq!(tenant.policy().limits().log, LogLimits::default());
        assert!(!tenant.policy().publish_grant().allows("ledger"));
        Ok(())
    }

    #[test]
    fn mistakes_are_reported() {
        let unknown =
            parse("[[tenants]]\nname = \"a\"\ncomponents = [\"a.wasm\"]\nsubscrbe = [\"x\"]");
        assert!(
            format!("{:#}", unknown.err().unwrap_or_else(|| anyhow::anyhow!("")))
                .contains("subscrbe")
        );
        let twice = parse(
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n[[tenants]]\nname = \"a\"\ncomponents = [\"y.wasm\"]",
        );
        assert!(twice.is_err_and(|e| e.to_string().contains("configured twice")));
        let stream = parse(
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nsubscribe = [\"no spaces\"]",
        );
        assert!(stream.is_err_and(|e| e.to_string().contains("not a valid stream name")));
        let zero = parse(
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nlimits = { write_records_per_second = 0 }",
        );
        assert!(zero.is_err_and(|e| e.to_string().contains("write_records_per_second = 0")));
        let budget = parse(
            "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nlimits = { memory_budget_mib = 0 }",
        );
        assert!(budget.is_err_and(|e| e.to_string().contains("no room for any shadow")));
    }

    #[test]
    fn sandbox_keys_reach_the_limits() -> anyhow::Result<()> {
        let config = parse(
            r#"
            [host]
            compile_timeout_ms = 2000
            compile_memory_mib = 512
            [defaults]
            max_delay_ms = 60000
            write_records_per_second = 10
            [[tenants]]
            name = "acme"
            components = ["a.wasm"]
            limits = { max_memories = 3, min_copy_delay_ms = 0 }
            "#,
        )?;
        let tenant = config.tenant(&config.tenants[0]);
        let limits = tenant.policy().limits();
        assert_eq!(limits.copies.max_delay, Duration::from_secs(60));
        assert_eq!(limits.copies.min_copy_delay, Duration::ZERO);
        assert_eq!(limits.writes.records_per_second, 10);
        assert_eq!(limits.max_memories, 3);
        let compile = config.host.compile_limits();
        assert_eq!(compile.timeout, Duration::from_secs(2));
        assert_eq!(compile.memory_bytes, 512 << 20);
        Ok(())
    }
}
