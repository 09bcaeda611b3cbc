//! The spellings of earlier releases: keys and flags that took a bare number of milliseconds
//! or seconds. Each is still read for one release, folded into its duration setting, with a
//! [`Deprecation`] to warn about; given beside the setting that replaces it, it is refused, as
//! nobody could tell which one was meant.

use std::fmt;

use super::{DurationSetting, HostSettings};

/// How an old spelling was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// A key of the tenants file (`compile_timeout_ms`), here with its new key.
    Key {
        /// The old key.
        old: &'static str,
        /// The key to write instead.
        new: &'static str,
    },
    /// A flag, or its environment variable (`--lease-ttl-ms`, `RUSTSTREAM_LEASE_TTL_MS`), with
    /// the setting's key, from which the new flag and variable are named.
    Flag {
        /// The old setting, as a key (`lease_ttl_ms`).
        old: &'static str,
        /// The new setting, as a key (`lease_ttl`).
        new: &'static str,
        /// Whether the flags have environment variables (`RUSTSTREAM_` and the key).
        variable: bool,
    },
}

impl Spelling {
    /// The old key or setting name, as the file spells keys.
    pub fn old_key(self) -> &'static str {
        match self {
            Self::Key { old, .. } | Self::Flag { old, .. } => old,
        }
    }

    /// The key or setting name that replaces it.
    pub fn new_key(self) -> &'static str {
        match self {
            Self::Key { new, .. } | Self::Flag { new, .. } => new,
        }
    }
}

/// An old spelling that was read: what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deprecation {
    /// What was given.
    pub spelling: Spelling,
    /// The value it gave, as the new spelling writes it.
    pub value: DurationSetting,
}

impl Deprecation {
    /// Logs it, as a warning: the one place the host and the verbs say it.
    pub fn warn(&self) {
        tracing::warn!("{self}");
    }
}

impl fmt::Display for Deprecation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value;
        match self.spelling {
            Spelling::Key { old, new } => write!(
                f,
                "`{old}` is deprecated and will be removed: write `{new} = \"{value}\"`"
            ),
            Spelling::Flag {
                old,
                new,
                variable: true,
            } => write!(
                f,
                "--{} (or ${}) is deprecated and will be removed: give --{} {value} (or ${}={value})",
                flag(old),
                variable(old),
                flag(new),
                variable(new),
            ),
            Spelling::Flag {
                old,
                new,
                variable: false,
            } => write!(
                f,
                "--{} is deprecated and will be removed: give --{} {value}",
                flag(old),
                flag(new),
            ),
        }
    }
}

/// An old spelling given beside the new one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} and {} are both given: keep {} alone", self.old_shown(), self.new_shown(), self.new_shown())]
pub struct GivenTwice {
    /// The two spellings.
    pub spelling: Spelling,
}

impl GivenTwice {
    fn old_shown(&self) -> String {
        match self.spelling {
            Spelling::Key { old, .. } => format!("`{old}`"),
            Spelling::Flag { old, .. } => format!("--{}", flag(old)),
        }
    }

    fn new_shown(&self) -> String {
        match self.spelling {
            Spelling::Key { new, .. } => format!("`{new}`"),
            Spelling::Flag { new, .. } => format!("--{}", flag(new)),
        }
    }
}

fn flag(key: &str) -> String {
    key.replace('_', "-")
}

fn variable(key: &str) -> String {
    format!("RUSTSTREAM_{}", key.to_uppercase())
}

/// How many milliseconds one unit of an old spelling was.
pub const MS: u64 = 1;
/// How many milliseconds one unit of an old spelling in seconds was.
pub const SECONDS: u64 = 1_000;

/// Folds `old` (a count of `unit` ms) into `new`, leaving `old` empty: `Ok(None)` when `old`
/// was not given.
///
/// # Errors
/// [`GivenTwice`] when both are given.
pub fn fold(
    old: &mut Option<u64>,
    unit: u64,
    new: &mut Option<DurationSetting>,
    spelling: Spelling,
) -> Result<Option<Deprecation>, GivenTwice> {
    let Some(count) = old.take() else {
        return Ok(None);
    };
    if new.is_some() {
        return Err(GivenTwice { spelling });
    }
    let value = DurationSetting::from_millis(count.saturating_mul(unit));
    *new = Some(value);
    Ok(Some(Deprecation { spelling, value }))
}

impl HostSettings {
    /// Folds every old spelling given into the setting that replaces it, and says what each
    /// one was and what to write instead (in the order of the fields). Run once on what the
    /// file gave and once on what the flags gave, before they are merged.
    ///
    /// # Errors
    /// An old spelling given beside its new one.
    pub fn fold_deprecated(&mut self) -> Result<Vec<Deprecation>, GivenTwice> {
        let key = |old, new| Spelling::Key { old, new };
        let flag = |old, new| Spelling::Flag {
            old,
            new,
            variable: true,
        };
        let folds = [
            fold(
                &mut self.compile_timeout_ms,
                MS,
                &mut self.compile_timeout,
                key("compile_timeout_ms", "compile_timeout"),
            )?,
            fold(
                &mut self.compile_timeout_ms_per_mib,
                MS,
                &mut self.compile_timeout_per_mib,
                key("compile_timeout_ms_per_mib", "compile_timeout_per_mib"),
            )?,
            fold(
                &mut self.compile_timeout_max_ms,
                MS,
                &mut self.compile_timeout_max,
                key("compile_timeout_max_ms", "compile_timeout_max"),
            )?,
            fold(
                &mut self.compile_cpu_seconds,
                SECONDS,
                &mut self.compile_cpu,
                key("compile_cpu_seconds", "compile_cpu"),
            )?,
            fold(
                &mut self.compile_cpu_seconds_per_mib,
                SECONDS,
                &mut self.compile_cpu_per_mib,
                key("compile_cpu_seconds_per_mib", "compile_cpu_per_mib"),
            )?,
            fold(
                &mut self.compile_cpu_max_seconds,
                SECONDS,
                &mut self.compile_cpu_max,
                key("compile_cpu_max_seconds", "compile_cpu_max"),
            )?,
            fold(
                &mut self.lease_ttl_ms,
                MS,
                &mut self.lease_ttl,
                flag("lease_ttl_ms", "lease_ttl"),
            )?,
            fold(
                &mut self.renew_interval_ms,
                MS,
                &mut self.renew_interval,
                flag("renew_interval_ms", "renew_interval"),
            )?,
            fold(
                &mut self.shard_sync_interval_ms,
                MS,
                &mut self.shard_sync_interval,
                flag("shard_sync_interval_ms", "shard_sync_interval"),
            )?,
            fold(
                &mut self.shutdown_grace_ms,
                MS,
                &mut self.shutdown_grace,
                flag("shutdown_grace_ms", "shutdown_grace"),
            )?,
            fold(
                &mut self.checkpoint_interval_ms,
                MS,
                &mut self.checkpoint_interval,
                flag("checkpoint_interval_ms", "checkpoint_interval"),
            )?,
            fold(
                &mut self.poll_interval_ms,
                MS,
                &mut self.poll_interval,
                flag("poll_interval_ms", "poll_interval"),
            )?,
        ];
        Ok(folds.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_old_key_is_read_into_its_setting_with_what_to_write_instead() {
        let mut settings = HostSettings {
            compile_timeout_ms: Some(45_000),
            compile_cpu_seconds: Some(4),
            ..HostSettings::default()
        };
        let said = settings.fold_deprecated().expect("no key given twice");
        assert_eq!(
            settings.compile_timeout.map(DurationSetting::get),
            Some(Duration::from_secs(45))
        );
        assert_eq!(
            settings.compile_cpu.map(DurationSetting::get),
            Some(Duration::from_secs(4))
        );
        assert_eq!(settings.compile_timeout_ms, None);
        let said: Vec<String> = said.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "`compile_timeout_ms` is deprecated and will be removed: write \
                 `compile_timeout = \"45s\"`",
                "`compile_cpu_seconds` is deprecated and will be removed: write \
                 `compile_cpu = \"4s\"`",
            ]
        );
        assert!(settings.fold_deprecated().expect("nothing left").is_empty());
    }

    #[test]
    fn an_old_flag_names_the_new_flag_and_variable() {
        let mut settings = HostSettings {
            lease_ttl_ms: Some(20_500),
            ..HostSettings::default()
        };
        let said = settings.fold_deprecated().expect("one spelling");
        assert_eq!(
            said[0].to_string(),
            "--lease-ttl-ms (or $RUSTSTREAM_LEASE_TTL_MS) is deprecated and will be removed: \
             give --lease-ttl 20500ms (or $RUSTSTREAM_LEASE_TTL=20500ms)"
        );
        assert_eq!(said[0].spelling.old_key(), "lease_ttl_ms");
    }

    #[test]
    fn both_spellings_at_once_are_refused() {
        let mut settings = HostSettings {
            compile_timeout_ms: Some(1_000),
            compile_timeout: Some(DurationSetting::from_millis(2_000)),
            ..HostSettings::default()
        };
        let error = settings.fold_deprecated().expect_err("given twice");
        assert_eq!(
            error.to_string(),
            "`compile_timeout_ms` and `compile_timeout` are both given: keep `compile_timeout` \
             alone"
        );
    }
}
