//! The host's configuration file: tenants, their components, grants and limits.
//!
//! ```toml
//! [host]                                # every key is also a `run` flag (settings/mod.rs)
//! lease_store = "dynamodb"              # or "memory" (the default)
//! lease_table = "ruststream-{tenant}-{app}"
//! create_lease_table = true
//! lease_ttl = "10s"                     # every duration: a whole number and ms, s, m, h or d
//! compile_timeout = "30s"               # also compile_cpu, their growth per MiB
//!                                       # (compile_timeout_per_mib, compile_cpu_per_mib) and
//!                                       # ceilings (compile_timeout_max, compile_cpu_max),
//!                                       # compile_memory_mib, compile_max_bytes,
//!                                       # compile_max_functions,
//!                                       # compile_max_function_bytes, compile_cache
//! state_dir = "/var/lib/ruststream"     # deploys, kept versions, the admin token
//! keep_versions = 10                    # versions kept per app
//! component_bucket = "acme-ruststream"  # fleet deploys: component bytes in S3, what runs
//! desired_table = "ruststream.desired"  # in this DynamoDB table (needs DynamoDB leases)
//!
//! [defaults]                            # limits every tenant gets unless it says otherwise
//! call_deadline = "5s"
//! memory_mib = 64                       # all memories and tables of an instance together
//! memory_budget_mib = 1024              # all instances of a tenant on a host, live and
//!                                       # shadow (none by default); a shadow must fit
//! max_delay = "15m"                     # see `LimitOverrides` for every key
//!
//! [[tenants]]
//! name = "acme"
//! components = ["acme/ledger.wasm"]     # relative to this file
//! subscribe = ["ledger"]
//! publish = ["ledger.dead"]
//! quarantine_after = 10
//! limits = { call_deadline = "1s" }
//! ```
//!
//! The keys of earlier releases that took a bare number of ms or seconds (`call_deadline_ms`,
//! `compile_cpu_seconds`) are still read, each with a warning naming its line and what to
//! write instead (`settings::deprecated`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::lease::{TableTemplate, TemplateError};
use ruststream_kinesis::runner::OperatorSettings;
use ruststream_runtime::{
    Tenant,
    app::{MAX_BATCH_LIMIT, StartPosition, SubscriptionSpec, valid_name},
    escape::{escape_controls, quote},
    policy::StreamGrant,
    tenant::Limits,
};
use serde::Deserialize;

pub mod component_file;
mod parse_error;

use crate::identity::Role;
use crate::settings::deprecated::{Deprecation, GivenTwice, MS, Spelling, fold};
use crate::settings::{DurationSetting, HostSettings};

/// A tenants file, read and checked ([`Config::load`]): what `run` loads, and what `check
/// --config` and `redrive` read of it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub(crate) host: HostSettings,
    #[serde(default)]
    pub(crate) defaults: LimitOverrides,
    pub(crate) tenants: Vec<TenantSection>,
    /// The old spellings the file uses, each with its place and what to write instead (set by
    /// [`Config::load`], which logs them).
    #[serde(skip)]
    pub(crate) deprecations: Vec<String>,
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
    fn or(&self, base: &Self) -> Self {
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
            max_record_age: self.maximum_record_age.map(DurationSetting::get),
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

/// Limits as written in the file; absent values fall back to `[defaults]`, then the built-in
/// defaults (see `docs/sandbox.md`, "Defaults, and why", for each one and why).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub(crate) call_deadline: Option<DurationSetting>,
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
    pub(crate) max_delay: Option<DurationSetting>,
    pub(crate) min_copy_delay: Option<DurationSetting>,
    pub(crate) max_hold: Option<DurationSetting>,
    pub(crate) write_records_per_second: Option<u32>,
    pub(crate) write_bytes_per_second: Option<u64>,
    // The spellings of earlier releases, folded into the durations above.
    pub(crate) call_deadline_ms: Option<u64>,
    pub(crate) max_delay_ms: Option<u64>,
    pub(crate) min_copy_delay_ms: Option<u64>,
    pub(crate) max_hold_ms: Option<u64>,
}

impl LimitOverrides {
    /// Folds the old `_ms` keys into their durations (see [`HostSettings::fold_deprecated`]).
    fn fold_deprecated(&mut self) -> Result<Vec<Deprecation>, GivenTwice> {
        let key = |old, new| Spelling::Key { old, new };
        let folds = [
            fold(
                &mut self.call_deadline_ms,
                MS,
                &mut self.call_deadline,
                key("call_deadline_ms", "call_deadline"),
            )?,
            fold(
                &mut self.max_delay_ms,
                MS,
                &mut self.max_delay,
                key("max_delay_ms", "max_delay"),
            )?,
            fold(
                &mut self.min_copy_delay_ms,
                MS,
                &mut self.min_copy_delay,
                key("min_copy_delay_ms", "min_copy_delay"),
            )?,
            fold(
                &mut self.max_hold_ms,
                MS,
                &mut self.max_hold,
                key("max_hold_ms", "max_hold"),
            )?,
        ];
        Ok(folds.into_iter().flatten().collect())
    }

    fn apply(&self, mut limits: Limits) -> Limits {
        let set = |value: Option<usize>, field: &mut usize| *field = value.unwrap_or(*field);
        let duration = |value: Option<DurationSetting>, field: &mut Duration| {
            if let Some(value) = value {
                *field = value.get();
            }
        };
        duration(self.call_deadline, &mut limits.call_deadline);
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
        duration(self.max_delay, &mut limits.copies.max_delay);
        duration(self.min_copy_delay, &mut limits.copies.min_copy_delay);
        duration(self.max_hold, &mut limits.copies.max_hold);
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
            ("memory_mib", self.memory_mib == Some(0)),
            ("fuel", self.fuel == Some(0)),
            ("max_memories", self.max_memories == Some(0)),
            ("max_instances", self.max_instances == Some(0)),
            ("max_subscriptions", self.max_subscriptions == Some(0)),
            ("max_metric_series", self.max_metric_series == Some(0)),
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
        let durations = [
            ("call_deadline", self.call_deadline),
            ("max_delay", self.max_delay),
            ("max_hold", self.max_hold),
        ];
        for (key, value) in durations {
            if let Some(zero) = value.filter(|d| d.is_zero()) {
                return Err(Mistake::new(
                    at.key(key),
                    format!("`{key} = \"{zero}\"` would refuse everything"),
                ));
            }
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

    /// The key beside this one (in the same table) named `key`.
    fn sibling(&self, key: &str) -> Self {
        let mut path = self.clone();
        path.0.pop();
        path.key(key)
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
    /// The file, line and key: ``config file F, line 3, `tenants[0].components[1]` ``.
    pub place: String,
}

impl std::fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} = \"{}\"", self.place, escape_controls(&self.written))
    }
}

impl ComponentSource {
    /// What names the component in a line about it:
    /// ``tenant `T`, config file F, line 3, `tenants[0].components[1]` = "acme/ledger.wasm"``.
    /// `check --config` and `run` (its log,
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
        let mut config = Self::parse(path, &text)?;
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
        for deprecation in &config.deprecations {
            tracing::warn!("{deprecation}");
        }
        Ok(config)
    }

    /// `text`, the file at `path`, read into its shape with the old spellings folded in
    /// (each named in [`deprecations`](Self::deprecations)) and checked.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text)
            .map_err(|error| ConfigError::Parse(parse_error::describe(path, text, &error)))?;
        let root = document(text);
        let deprecations = config
            .fold_deprecated()
            .map_err(|mistake| ConfigError::Mistake(mistake.in_file(path, text)))?;
        config.deprecations = deprecations
            .iter()
            .map(|(at, deprecation)| {
                let place = Mistake::new(at.clone(), "").place_at(path, text, root.as_ref());
                format!("{place}: {deprecation}")
            })
            .collect();
        if let Err(mut mistake) = config.check() {
            // A value given by an old key is placed where the file gives it.
            let old = deprecations.iter().find(|(at, deprecation)| {
                at.sibling(deprecation.spelling.new_key()) == mistake.key
            });
            if let Some((at, _)) = old {
                mistake.key = at.clone();
            }
            return Err(ConfigError::Mistake(mistake.in_file(path, text)));
        }
        Ok(config)
    }

    /// Folds the old spellings of `[host]`, `[defaults]` and each tenant's `limits` into their
    /// settings: where each was, and what to write instead.
    fn fold_deprecated(&mut self) -> Result<Vec<(KeyPath, Deprecation)>, Mistake> {
        let mut sections = vec![(
            KeyPath::root().key("defaults"),
            self.defaults.fold_deprecated(),
        )];
        for (index, tenant) in self.tenants.iter_mut().enumerate() {
            let at = KeyPath::root().key("tenants").index(index).key("limits");
            sections.push((at, tenant.limits.fold_deprecated()));
        }
        sections.insert(
            0,
            (KeyPath::root().key("host"), self.host.fold_deprecated()),
        );
        let mut found = Vec::new();
        for (at, folded) in sections {
            match folded {
                Ok(deprecations) => found.extend(
                    deprecations
                        .into_iter()
                        .map(|d| (at.clone().key(d.spelling.old_key()), d)),
                ),
                Err(twice) => {
                    let key = twice.spelling.old_key();
                    return Err(Mistake::new(at.key(key), twice.to_string()));
                }
            }
        }
        Ok(found)
    }

    /// What the file spells the old way, each with its place and what to write instead.
    pub fn deprecations(&self) -> &[String] {
        &self.deprecations
    }

    fn check(&self) -> Result<(), Mistake> {
        if self.tenants.is_empty() {
            return Err(Mistake::new(KeyPath::root(), "no [[tenants]] configured"));
        }
        self.host.check().map_err(|error| {
            Mistake::new(
                KeyPath::root().key("host").key(error.key),
                error.to_string(),
            )
        })?;
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
    pub fn host(&self) -> &HostSettings {
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
        Ok(Config::parse(Path::new("tenants.toml"), text)?)
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
    fn durations_are_a_number_and_a_unit() -> anyhow::Result<()> {
        // How a duration is spelt is `DurationSetting`'s (settings/duration.rs); here, that the
        // file says where a bad one is, and refuses zero where it would stop everything.
        let tenant =
            |keys: &str| format!("[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n{keys}\n");
        let error = parse(&tenant("maximum_record_age = \"soon\""))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains(
                "line 4, column 22, `tenants[0].maximum_record_age`: `soon` is not a duration"
            ),
            "{error}"
        );
        let error = parse(&tenant("maximum_record_age = \"0s\""))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("line 4, `tenants[0].maximum_record_age`: `\"0s\"` would give up on every record at once"), "{error}");
        let age = parse(&tenant("maximum_record_age = \"2h\""))?;
        assert_eq!(
            age.tenants[0].mapping().operator().max_record_age,
            Some(Duration::from_secs(7200))
        );
        let host =
            "[host]\nlease_ttl = \"10\"\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(host).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("line 2, column 13, `host.lease_ttl`: `10` is not a duration"),
            "{error}"
        );
        let bare = "[host]\nlease_ttl = 10\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(bare).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("`host.lease_ttl`: `10` is not a duration"),
            "{error}"
        );
        let zero = "[host]\npoll_interval = \"0ms\"\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(zero).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains(
                "line 2, `host.poll_interval`: `poll_interval = \"0s\"`: would refuse everything"
            ),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn an_old_key_is_read_with_a_warning_naming_its_line_and_what_to_write() -> anyhow::Result<()> {
        let text = "[host]\ncompile_timeout_ms = 45000\ncompile_cpu_seconds = 4\n[defaults]\ncall_deadline_ms = 1500\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nlimits = { max_hold_ms = 2000 }\n";
        let config = parse(text)?;
        let limits = config.host.compile_limits();
        assert_eq!(limits.timeout, Duration::from_secs(45));
        assert_eq!(limits.cpu, Duration::from_secs(4));
        let limits = (config.tenants[0].limits).apply(config.defaults.apply(Limits::default()));
        assert_eq!(limits.call_deadline, Duration::from_millis(1500));
        assert_eq!(limits.copies.max_hold, Duration::from_secs(2));
        assert_eq!(
            config.deprecations(),
            [
                "config file tenants.toml, line 2, `host.compile_timeout_ms`: `compile_timeout_ms` is deprecated and will be removed: write `compile_timeout = \"45s\"`",
                "config file tenants.toml, line 3, `host.compile_cpu_seconds`: `compile_cpu_seconds` is deprecated and will be removed: write `compile_cpu = \"4s\"`",
                "config file tenants.toml, line 5, `defaults.call_deadline_ms`: `call_deadline_ms` is deprecated and will be removed: write `call_deadline = \"1500ms\"`",
                "config file tenants.toml, line 9, `tenants[0].limits.max_hold_ms`: `max_hold_ms` is deprecated and will be removed: write `max_hold = \"2s\"`",
            ]
        );
        let twice = "[host]\ncompile_timeout = \"1s\"\ncompile_timeout_ms = 1000\n[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\n";
        let error = parse(twice)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("line 3, `host.compile_timeout_ms`: `compile_timeout_ms` and `compile_timeout` are both given"),
            "{error}"
        );
        let zero = "[[tenants]]\nname = \"a\"\ncomponents = [\"x.wasm\"]\nlimits = { call_deadline_ms = 0 }\n";
        let error = parse(zero).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("line 4, `tenants[0].limits.call_deadline_ms`: `call_deadline = \"0s\"` would refuse everything"), "{error}");
        Ok(())
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
