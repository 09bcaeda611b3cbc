//! A tenant's sandbox limits as the file writes them (`[defaults]`, `[[tenants]] limits`),
//! over the built-in defaults.

use std::time::Duration;

use ruststream_runtime::tenant::Limits;
use serde::Deserialize;

use super::place::{KeyPath, Mistake};
use crate::settings::DurationSetting;
use crate::settings::deprecated::{Deprecation, GivenTwice, MS, Spelling, fold};

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
    pub(super) fn fold_deprecated(&mut self) -> Result<Vec<Deprecation>, GivenTwice> {
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

    pub(super) fn apply(&self, mut limits: Limits) -> Limits {
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
    pub(super) fn check(&self, at: KeyPath) -> Result<(), Mistake> {
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

pub(super) fn refuse_zero(at: KeyPath, keys: &[(&str, bool)]) -> Result<(), Mistake> {
    match keys.iter().find(|(_, zero)| *zero) {
        Some((key, _)) => Err(Mistake::new(
            at.key(key),
            format!("`{key} = 0` would refuse everything"),
        )),
        None => Ok(()),
    }
}
