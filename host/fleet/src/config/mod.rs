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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ruststream_common::escape::quote;
use ruststream_kinesis::lease::{TableTemplate, TemplateError};
use ruststream_runtime::{Tenant, app::valid_name, policy::StreamGrant, tenant::Limits};
use serde::Deserialize;

pub mod component_file;
mod limits;
mod parse_error;
mod place;
mod tenant;

pub use limits::LimitOverrides;
pub use place::ComponentSource;
use place::document;
pub(crate) use place::{KeyPath, Mistake};
pub use tenant::{OperatorConfig, TenantSection};

use crate::settings::HostSettings;
use crate::settings::deprecated::Deprecation;

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ruststream_kinesis::kinesis::ReadMode;
    use ruststream_runtime::app::SubscriptionSpec;
    use ruststream_runtime::tenant::LogLimits;

    use super::*;
    use crate::identity::Role;

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
