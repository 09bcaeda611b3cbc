//! The host's configuration file: tenants, their components, grants and limits.
//!
//! ```toml
//! [host]
//! lease_store = "dynamodb"              # or "memory" (the default)
//! lease_table = "ruststream-{tenant}-{app}"
//! create_lease_table = true
//!
//! [defaults]                            # limits every tenant gets unless it says otherwise
//! call_deadline_ms = 5000
//! memory_mib = 64
//! max_table_elements = 100000           # also max_instances, fuel, log_lines_per_record,
//!                                       # log_bytes_per_record, log_lines_per_second
//!
//! [[tenants]]
//! name = "acme"
//! components = ["acme/ledger.wasm"]     # relative to this file
//! subscribe = ["ledger"]
//! publish = ["ledger.dead"]
//! quarantine_after = 10
//! limits = { call_deadline_ms = 1000 }
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use ruststream_host::app::valid_name;
use ruststream_host::component::Limits;
use ruststream_host::tenant::{StreamGrant, Tenant};
use serde::Deserialize;

use crate::args::LeaseStoreKind;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub host: HostSection,
    #[serde(default)]
    pub defaults: LimitOverrides,
    pub tenants: Vec<TenantSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    pub lease_store: Option<LeaseStoreKind>,
    /// `{tenant}` and `{app}` are replaced.
    pub lease_table: Option<String>,
    pub create_lease_table: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSection {
    pub name: String,
    pub components: Vec<PathBuf>,
    #[serde(default)]
    pub subscribe: Vec<String>,
    #[serde(default)]
    pub publish: Vec<String>,
    pub quarantine_after: Option<u32>,
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// Limits as written in the file; absent values fall back to `[defaults]`, then the built-in
/// defaults.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub call_deadline_ms: Option<u64>,
    pub memory_mib: Option<usize>,
    pub fuel: Option<u64>,
    pub max_table_elements: Option<usize>,
    pub max_instances: Option<usize>,
    pub log_lines_per_record: Option<u32>,
    pub log_bytes_per_record: Option<usize>,
    pub log_lines_per_second: Option<u32>,
}

impl LimitOverrides {
    fn apply(&self, mut limits: Limits) -> Limits {
        let log = &mut limits.log;
        if let Some(ms) = self.call_deadline_ms {
            limits.call_deadline = Duration::from_millis(ms);
        }
        if let Some(mib) = self.memory_mib {
            limits.memory_bytes = mib << 20;
        }
        if let Some(elements) = self.max_table_elements {
            limits.max_table_elements = elements;
        }
        if let Some(instances) = self.max_instances {
            limits.max_instances = instances;
        }
        if let Some(lines) = self.log_lines_per_record {
            log.lines_per_record = lines;
        }
        if let Some(bytes) = self.log_bytes_per_record {
            log.bytes_per_record = bytes;
        }
        if let Some(lines) = self.log_lines_per_second {
            log.lines_per_second = lines;
        }
        limits.fuel = self.fuel.or(limits.fuel);
        limits
    }
}

impl Config {
    /// Reads and checks the file at `path`; component paths become relative to its folder.
    ///
    /// # Errors
    /// When the file cannot be read, is not valid TOML of this shape (the error says where),
    /// or names a tenant twice, an invalid stream, or a zero limit.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let mut config: Config = toml::from_str(&text)
            .with_context(|| format!("config file {} is not valid", path.display()))?;
        config
            .check()
            .with_context(|| format!("config file {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for tenant in &mut config.tenants {
            for component in &mut tenant.components {
                *component = base.join(&*component);
            }
        }
        Ok(config)
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.tenants.is_empty(), "no [[tenants]] configured");
        let mut names = BTreeSet::new();
        for tenant in &self.tenants {
            anyhow::ensure!(
                valid_name(&tenant.name, 64),
                "tenant name `{}` is not valid: use 1-64 characters of [A-Za-z0-9_.-]",
                tenant.name
            );
            anyhow::ensure!(
                names.insert(&tenant.name),
                "tenant `{}` is configured twice",
                tenant.name
            );
            anyhow::ensure!(
                !tenant.components.is_empty(),
                "tenant `{}` has no components",
                tenant.name
            );
            for stream in tenant.subscribe.iter().chain(&tenant.publish) {
                anyhow::ensure!(
                    valid_name(stream, 128),
                    "tenant `{}`: `{stream}` is not a valid stream name",
                    tenant.name
                );
            }
            for limits in [&self.defaults, &tenant.limits] {
                anyhow::ensure!(
                    limits.call_deadline_ms != Some(0) && limits.memory_mib != Some(0),
                    "tenant `{}`: a deadline or memory limit of 0 would refuse every call",
                    tenant.name
                );
            }
        }
        Ok(())
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
    use super::*;
    use ruststream_host::component::LogLimits;

    fn parse(text: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text)?;
        config.check()?;
        Ok(config)
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
            limits = { call_deadline_ms = 500, max_instances = 8 }
            "#,
        )?;
        let tenant = config.tenant(&config.tenants[0]);
        assert_eq!(tenant.call_limits().max_instances, 8);
        assert_eq!(
            tenant.call_limits().max_table_elements,
            Limits::default().max_table_elements
        );
        assert_eq!(
            tenant.call_limits().call_deadline,
            Duration::from_millis(500)
        );
        assert_eq!(tenant.call_limits().memory_bytes, 32 << 20);
        assert_eq!(tenant.call_limits().log, LogLimits::default());
        assert!(!tenant.publish_grant().allows("ledger"));
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
    }
}
