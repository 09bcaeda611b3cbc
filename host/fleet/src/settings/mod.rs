//! The host's settings: what the tenants file's `[host]` section and `ruststream run`'s flags
//! both set, as one type that serde reads from the file and clap from the command line (with
//! the `cli` feature, which only the binary enables).
//!
//! A flag (or its environment variable) wins over the file's key, which wins over the
//! built-in default ([`HostSettings::over`]). Every duration is a [`DurationSetting`], written
//! the same way everywhere: `lease_ttl = "20s"` in the file, `--lease-ttl 20s` or
//! `RUSTSTREAM_LEASE_TTL=20s` on the command line.
//!
//! The keys and flags that took a bare number of milliseconds or seconds
//! (`compile_timeout_ms = 30000`, `--lease-ttl-ms 20000`) are still read, for one release, with
//! a deprecation warning each ([`deprecated`]).

pub mod deprecated;
pub mod duration;

use std::path::PathBuf;
use std::time::Duration;

use ruststream_kinesis::{HostConfig, kinesis::ReaderConfig};
use ruststream_runtime::component::compile::CompileLimits;
use serde::Deserialize;

pub use duration::{DurationError, DurationSetting};

/// Where leases and checkpoints live (`[host] lease_store`, `--lease-store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LeaseStoreKind {
    /// In memory: checkpoints are forgotten on restart (shards reopen at their start position).
    Memory,
    /// A DynamoDB table per app: checkpoints survive restarts, hosts share shards.
    Dynamodb,
}

/// Every setting of the host that the tenants file's `[host]` and `run`'s flags both give;
/// `None` is "not given here". The doc of each field is the flag's help.
///
/// Two settings are the file's alone: `compile_cache` (the flag is `--compile-cache`, which
/// every verb that compiles shares) and the deprecated keys. The deprecated flags are the
/// command line's alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct HostSettings {
    /// Where leases and checkpoints live [default: memory].
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub lease_store: Option<LeaseStoreKind>,
    /// DynamoDB lease table; `{tenant}` and `{app}` are replaced (names escaped so that no two
    /// tenants' apps share a table), so each tenant's app has its own
    /// [default: ruststream-{tenant}-{app}].
    #[cfg_attr(feature = "cli", arg(long))]
    pub lease_table: Option<String>,
    /// Create lease tables that do not exist.
    #[cfg_attr(
        feature = "cli",
        arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")
    )]
    pub create_lease_table: Option<bool>,
    /// Where compiled components are cached (the file's key, relative to the file; the flag
    /// is `--compile-cache`).
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_cache: Option<PathBuf>,
    /// Wall-clock time a component of up to one MiB may take to compile [default: 30s].
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_timeout: Option<DurationSetting>,
    /// Compile time added for each MiB past the first.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_timeout_per_mib: Option<DurationSetting>,
    /// Most wall-clock time a compile may take, whatever the component's size.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_timeout_max: Option<DurationSetting>,
    /// CPU time a compile of a component of up to one MiB may use (whole seconds count).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_cpu: Option<DurationSetting>,
    /// CPU time added for each MiB past the first.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_cpu_per_mib: Option<DurationSetting>,
    /// Most CPU time a compile may use, whatever the component's size.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION"))]
    pub compile_cpu_max: Option<DurationSetting>,
    /// Address space the compile worker may map, in MiB.
    #[cfg_attr(feature = "cli", arg(long, value_name = "MIB"))]
    pub compile_memory_mib: Option<u64>,
    /// Largest component file, in bytes.
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    pub compile_max_bytes: Option<usize>,
    /// Most functions in all of a component's core modules together.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub compile_max_functions: Option<usize>,
    /// Largest function body, in bytes.
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    pub compile_max_function_bytes: Option<usize>,
    /// How long a lease lives without renewal [default: 10s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_LEASE_TTL", value_name = "DURATION")
    )]
    pub lease_ttl: Option<DurationSetting>,
    /// How often a held lease is renewed [default: 3s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_RENEW_INTERVAL", value_name = "DURATION")
    )]
    pub renew_interval: Option<DurationSetting>,
    /// How often shards are re-listed and leases balanced [default: 10s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_SHARD_SYNC_INTERVAL", value_name = "DURATION")
    )]
    pub shard_sync_interval: Option<DurationSetting>,
    /// How long a stop waits for calls to finish and checkpoints to be flushed [default: 15s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_SHUTDOWN_GRACE", value_name = "DURATION")
    )]
    pub shutdown_grace: Option<DurationSetting>,
    /// Least time between two checkpoint writes of a shard [default: 1s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_CHECKPOINT_INTERVAL", value_name = "DURATION")
    )]
    pub checkpoint_interval: Option<DurationSetting>,
    /// Pause after an empty read [default: 1s].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_POLL_INTERVAL", value_name = "DURATION")
    )]
    pub poll_interval: Option<DurationSetting>,
    /// Most records per GetRecords (1-10000) [default: 10000]. Records per handler call are
    /// the subscription's `batch_size`, a different thing.
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_GET_RECORDS_LIMIT", value_parser = clap::value_parser!(i32).range(1..=10000))
    )]
    pub get_records_limit: Option<i32>,
    /// Threads that run guest calls, shared by tenants by their `cpu_weight` [default: one
    /// per core].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_COMPUTE_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))
    )]
    pub compute_threads: Option<u16>,
    /// Where the host keeps its state: the admin token, every accepted component version, and
    /// which one each app runs [default: $XDG_DATA_HOME/ruststream, or
    /// ~/.local/share/ruststream].
    #[cfg_attr(
        feature = "cli",
        arg(long, env = "RUSTSTREAM_STATE_DIR", value_name = "DIR")
    )]
    pub state_dir: Option<PathBuf>,
    /// How many versions of each app the state directory keeps (at least 1) [default: 10].
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub keep_versions: Option<usize>,
    /// The S3 bucket of the fleet's component bytes: set, deploys are the fleet's (recorded in
    /// the desired-state table, run by every host; needs DynamoDB leases); unset, each host's
    /// own.
    #[cfg_attr(feature = "cli", arg(long, value_name = "BUCKET"))]
    pub component_bucket: Option<String>,
    /// The fleet's desired-state table [default: ruststream.desired].
    #[cfg_attr(feature = "cli", arg(long, value_name = "TABLE"))]
    pub desired_table: Option<String>,
    // The spellings of earlier releases, read into the fields above by `fold_deprecated` for
    // one release; the file's keys are not flags, and the flags are not keys.
    /// Deprecated: `compile_timeout`, in ms.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_timeout_ms: Option<u64>,
    /// Deprecated: `compile_timeout_per_mib`, in ms.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_timeout_ms_per_mib: Option<u64>,
    /// Deprecated: `compile_timeout_max`, in ms.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_timeout_max_ms: Option<u64>,
    /// Deprecated: `compile_cpu`, in seconds.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_cpu_seconds: Option<u64>,
    /// Deprecated: `compile_cpu_per_mib`, in seconds.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_cpu_seconds_per_mib: Option<u64>,
    /// Deprecated: `compile_cpu_max`, in seconds.
    #[cfg_attr(feature = "cli", arg(skip))]
    pub compile_cpu_max_seconds: Option<u64>,
    /// Deprecated: `--lease-ttl`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_LEASE_TTL_MS",
            hide = true,
            conflicts_with = "lease_ttl"
        )
    )]
    pub lease_ttl_ms: Option<u64>,
    /// Deprecated: `--renew-interval`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_RENEW_INTERVAL_MS",
            hide = true,
            conflicts_with = "renew_interval"
        )
    )]
    pub renew_interval_ms: Option<u64>,
    /// Deprecated: `--shard-sync-interval`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_SHARD_SYNC_INTERVAL_MS",
            hide = true,
            conflicts_with = "shard_sync_interval"
        )
    )]
    pub shard_sync_interval_ms: Option<u64>,
    /// Deprecated: `--shutdown-grace`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_SHUTDOWN_GRACE_MS",
            hide = true,
            conflicts_with = "shutdown_grace"
        )
    )]
    pub shutdown_grace_ms: Option<u64>,
    /// Deprecated: `--checkpoint-interval`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_CHECKPOINT_INTERVAL_MS",
            hide = true,
            conflicts_with = "checkpoint_interval"
        )
    )]
    pub checkpoint_interval_ms: Option<u64>,
    /// Deprecated: `--poll-interval`, in ms.
    #[serde(skip)]
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            env = "RUSTSTREAM_POLL_INTERVAL_MS",
            hide = true,
            conflicts_with = "poll_interval"
        )
    )]
    pub poll_interval_ms: Option<u64>,
}

/// A setting whose value no host can run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key} = {value}`: {reason}")]
pub struct SettingError {
    /// The key, as the file spells it (the flag is the key with `-` for `_`).
    pub key: &'static str,
    /// The value given, as written.
    pub value: String,
    /// Why it cannot be used, and what to give instead.
    pub reason: &'static str,
}

impl HostSettings {
    /// These settings over `below`: each one given here wins, each one not given is
    /// `below`'s. The deprecated keys must have been folded in first ([`Self::fold_deprecated`]).
    pub fn over(self, below: Self) -> Self {
        Self {
            lease_store: self.lease_store.or(below.lease_store),
            lease_table: self.lease_table.or(below.lease_table),
            create_lease_table: self.create_lease_table.or(below.create_lease_table),
            compile_cache: self.compile_cache.or(below.compile_cache),
            compile_timeout: self.compile_timeout.or(below.compile_timeout),
            compile_timeout_per_mib: self
                .compile_timeout_per_mib
                .or(below.compile_timeout_per_mib),
            compile_timeout_max: self.compile_timeout_max.or(below.compile_timeout_max),
            compile_cpu: self.compile_cpu.or(below.compile_cpu),
            compile_cpu_per_mib: self.compile_cpu_per_mib.or(below.compile_cpu_per_mib),
            compile_cpu_max: self.compile_cpu_max.or(below.compile_cpu_max),
            compile_memory_mib: self.compile_memory_mib.or(below.compile_memory_mib),
            compile_max_bytes: self.compile_max_bytes.or(below.compile_max_bytes),
            compile_max_functions: self.compile_max_functions.or(below.compile_max_functions),
            compile_max_function_bytes: self
                .compile_max_function_bytes
                .or(below.compile_max_function_bytes),
            lease_ttl: self.lease_ttl.or(below.lease_ttl),
            renew_interval: self.renew_interval.or(below.renew_interval),
            shard_sync_interval: self.shard_sync_interval.or(below.shard_sync_interval),
            shutdown_grace: self.shutdown_grace.or(below.shutdown_grace),
            checkpoint_interval: self.checkpoint_interval.or(below.checkpoint_interval),
            poll_interval: self.poll_interval.or(below.poll_interval),
            get_records_limit: self.get_records_limit.or(below.get_records_limit),
            compute_threads: self.compute_threads.or(below.compute_threads),
            state_dir: self.state_dir.or(below.state_dir),
            keep_versions: self.keep_versions.or(below.keep_versions),
            component_bucket: self.component_bucket.or(below.component_bucket),
            desired_table: self.desired_table.or(below.desired_table),
            // Folded in already.
            compile_timeout_ms: None,
            compile_timeout_ms_per_mib: None,
            compile_timeout_max_ms: None,
            compile_cpu_seconds: None,
            compile_cpu_seconds_per_mib: None,
            compile_cpu_max_seconds: None,
            lease_ttl_ms: None,
            renew_interval_ms: None,
            shard_sync_interval_ms: None,
            shutdown_grace_ms: None,
            checkpoint_interval_ms: None,
            poll_interval_ms: None,
        }
    }

    /// Refuses a value no host can run with: a zero compile bound or timing, no versions
    /// kept, a GetRecords limit or thread count out of range. (Flags are range-checked as they
    /// are parsed too; the file's values only here.)
    ///
    /// # Errors
    /// The first such setting.
    pub fn check(&self) -> Result<(), SettingError> {
        let durations = [
            ("compile_timeout", self.compile_timeout),
            ("compile_timeout_max", self.compile_timeout_max),
            ("compile_cpu", self.compile_cpu),
            ("compile_cpu_max", self.compile_cpu_max),
            ("lease_ttl", self.lease_ttl),
            ("renew_interval", self.renew_interval),
            ("shard_sync_interval", self.shard_sync_interval),
            ("shutdown_grace", self.shutdown_grace),
            ("checkpoint_interval", self.checkpoint_interval),
            ("poll_interval", self.poll_interval),
        ];
        for (key, value) in durations {
            if let Some(value) = value.filter(|d| d.is_zero()) {
                return Err(SettingError {
                    key,
                    value: format!("\"{value}\""),
                    reason: "would refuse everything: give a duration above zero",
                });
            }
        }
        let counts = [
            (
                "compile_memory_mib",
                self.compile_memory_mib.map(u128::from),
            ),
            ("compile_max_bytes", self.compile_max_bytes.map(count)),
            (
                "compile_max_functions",
                self.compile_max_functions.map(count),
            ),
            (
                "compile_max_function_bytes",
                self.compile_max_function_bytes.map(count),
            ),
        ];
        for (key, value) in counts {
            if value == Some(0) {
                return Err(SettingError {
                    key,
                    value: "0".to_owned(),
                    reason: "would refuse everything",
                });
            }
        }
        if self.keep_versions == Some(0) {
            return Err(SettingError {
                key: "keep_versions",
                value: "0".to_owned(),
                reason: "would not keep even the live version: give 1 or more (a rollback \
                         needs 2)",
            });
        }
        if let Some(threads) = self.compute_threads
            && !(1..=1024).contains(&threads)
        {
            return Err(SettingError {
                key: "compute_threads",
                value: threads.to_string(),
                reason: "give 1 to 1024",
            });
        }
        match self.get_records_limit {
            Some(limit) if !(1..=10_000).contains(&limit) => Err(SettingError {
                key: "get_records_limit",
                value: limit.to_string(),
                reason: "give 1 to 10000",
            }),
            _ => Ok(()),
        }
    }

    /// The compile bounds: each one given over the built-in default.
    pub fn compile_limits(&self) -> CompileLimits {
        let mut limits = CompileLimits::default();
        let set = |value: Option<DurationSetting>, field: &mut Duration| {
            if let Some(value) = value {
                *field = value.get();
            }
        };
        set(self.compile_timeout, &mut limits.timeout);
        set(self.compile_timeout_per_mib, &mut limits.timeout_per_mib);
        set(self.compile_timeout_max, &mut limits.timeout_ceiling);
        set(self.compile_cpu, &mut limits.cpu);
        set(self.compile_cpu_per_mib, &mut limits.cpu_per_mib);
        set(self.compile_cpu_max, &mut limits.cpu_ceiling);
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

    /// The reader's and leases' timings, each one given over `defaults`' (the owner id, the
    /// rollout policy and the publish timeout are `defaults`' as they are).
    pub fn host_config(&self, defaults: HostConfig) -> HostConfig {
        let timing = |value: Option<DurationSetting>, default: Duration| {
            value.map_or(default, DurationSetting::get)
        };
        let reader = defaults.reader.clone();
        HostConfig {
            reader: ReaderConfig {
                get_records_limit: self.get_records_limit.unwrap_or(reader.get_records_limit),
                poll_interval: timing(self.poll_interval, reader.poll_interval),
                ..reader
            },
            checkpoint_interval: timing(self.checkpoint_interval, defaults.checkpoint_interval),
            lease_ttl: timing(self.lease_ttl, defaults.lease_ttl),
            renew_interval: timing(self.renew_interval, defaults.renew_interval),
            shard_sync_interval: timing(self.shard_sync_interval, defaults.shard_sync_interval),
            shutdown_grace: timing(self.shutdown_grace, defaults.shutdown_grace),
            ..defaults
        }
    }
}

fn count(n: usize) -> u128 {
    n as u128
}
