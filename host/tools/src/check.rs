//! `ruststream check`: what each component declares, or why it is refused, in a few lines;
//! with `--config`, an offline preflight of a whole tenants file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ruststream_common::escape::{escape_controls, one_line};
use ruststream_kinesis::lease::DEFAULT_TABLE_TEMPLATE;
use ruststream_kinesis::runner::admit_settings;
use ruststream_runtime::{
    LoadedComponent, Runtime, Tenant,
    component::{AdapterRoute, CallForm, compile::CompileLimits, describe_app},
    log::LogSink,
    tenant::{Limits, LogLimits},
};

use ruststream_fleet::config::{Config, ConfigError, OperatorConfig, component_file};
use ruststream_fleet::engine::{CompileCache, EngineError, runtime_config};

/// Why a check failed: the tenants file, the engine, or the components refused (each refusal
/// is written on its own line before).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The tenants file cannot be read, has a mistake (file, line and key named), or its lease
    /// table template does not fit its tenants and components.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The runtime the components are checked on cannot be made.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Components were refused.
    #[error("{failed} of {total} components refused")]
    Refused {
        /// How many were refused.
        failed: usize,
        /// How many were checked.
        total: usize,
    },
    /// What the check found cannot be written to the output.
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
}

/// Loads each component as a tenant with the default limits would (bounded compile,
/// instantiation and `describe` under the deadline) and writes to `out` one line per component,
/// plus one per subscription of those accepted. A refusal is one line whatever the component
/// holds.
///
/// # Errors
/// The runtime cannot be made, components were refused, or `out` cannot be written.
pub async fn check(
    components: &[PathBuf],
    compile: &CompileCache,
    out: &mut dyn Write,
) -> Result<(), CheckError> {
    let config = runtime_config(CompileLimits::default(), compile.cache_dir(None), false)?;
    let runtime = Runtime::new(config).map_err(EngineError::from)?;
    let tenant = Arc::new(Tenant::trusted("check").limits(quiet_limits()));
    let mut failed = 0;
    for path in components {
        let shown = escape_controls(&path.display().to_string()).into_owned();
        // What the component says while it loads is counted, not shown: `check` reports.
        let log = LogSink::silent();
        let loaded = LoadedComponent::from_file(&runtime, path, tenant.policy(), &log)
            .await
            .map_err(|error| one_line(&error));
        let passed = report(&shown, loaded, &log, out)?;
        failed += usize::from(!passed);
    }
    if failed > 0 {
        return Err(CheckError::Refused {
            failed,
            total: components.len(),
        });
    }
    Ok(())
}

/// Checks the tenants file at `path` as `run --config` would load it, without a server: the
/// file itself (every name and limit, with line and key), the lease table template, and each
/// tenant's components under that tenant's grants and limits (compile bounds of `[host]`).
/// What it finds is written to `out`, a line per component.
///
/// # Errors
/// The file's first mistake, how many components were refused, or `out` cannot be written.
pub async fn check_config(
    path: &Path,
    compile: &CompileCache,
    out: &mut dyn Write,
) -> Result<(), CheckError> {
    let config = Config::load(path)?;
    let host = config.host();
    let template = host
        .lease_table
        .as_deref()
        .unwrap_or(DEFAULT_TABLE_TEMPLATE);
    config.check_lease_table(path, template)?;
    let cache = compile.cache_dir(host.compile_cache.as_ref());
    let runtime = Runtime::new(runtime_config(
        host.compile_limits(),
        cache,
        config.uses_fuel(),
    )?)
    .map_err(EngineError::from)?;
    let max_bytes = runtime.config().compile.limits.max_bytes;
    let (mut failed, mut total) = (0, 0);
    for section in config.tenants() {
        let tenant = Arc::new(config.tenant(section));
        let operator = section.operator_settings();
        for (component, source) in section.components() {
            total += 1;
            let log = LogSink::silent();
            let read = component_file::read(component, &source.shown_path(), max_bytes).await;
            let loaded = match read {
                Ok(bytes) => {
                    let name = stem(component);
                    admitted(&runtime, &tenant, &operator, &name, bytes, &log).await
                }
                Err(reason) => Err(reason),
            };
            let passed = report(&source.named(section.name()), loaded, &log, out)?;
            failed += usize::from(!passed);
        }
    }
    if failed > 0 {
        return Err(CheckError::Refused { failed, total });
    }
    writeln!(
        out,
        "ok    {}: {total} components of {} tenants",
        path.display(),
        config.tenants().len()
    )?;
    Ok(())
}

/// Loads component `name` from `bytes` (read as `run` reads them, so a refusal is worded as
/// `run` words it) under `tenant`'s policy, and admits it under its grants: what it declares
/// and what the `operator`'s settings add (a retry stream).
async fn admitted(
    runtime: &Runtime,
    tenant: &Arc<Tenant>,
    operator: &OperatorConfig,
    name: &str,
    bytes: Vec<u8>,
    log: &LogSink,
) -> Result<LoadedComponent, String> {
    let component = LoadedComponent::from_bytes(runtime, name, bytes, tenant.policy(), log)
        .await
        .map_err(|error| one_line(&error))?;
    let settings = operator.for_subscriptions(&component.app().subscriptions);
    tenant
        .admit(&component)
        .and_then(|()| admit_settings(tenant, &component, &settings))
        .map_err(|refused| one_line(&refused))?;
    Ok(component)
}

/// Writes to `out` what the component named `shown` declares, or why it was refused (one
/// line), and how many lines it logged while loading (`log`). Returns whether it passed.
fn report(
    shown: &str,
    loaded: Result<LoadedComponent, String>,
    log: &LogSink,
    out: &mut dyn Write,
) -> Result<bool, CheckError> {
    let passed = match loaded {
        Ok(component) => {
            writeln!(out, "ok    {shown}: {}", describe_app(component.app()))?;
            let made = match (component.form(), component.handle_adapter_route()) {
                (CallForm::Batch, _) => "",
                (CallForm::Handle, Some(AdapterRoute::Inline)) => {
                    ", inside the component by the host's adapter, in its own memory"
                }
                (CallForm::Handle, Some(AdapterRoute::Beside)) => {
                    ", inside the component by the host's adapter, beside it"
                }
                (CallForm::Handle, None) => ", from the host",
            };
            writeln!(out, "      calls: {}{made}", component.form())?;
            write_denied(component.denied_imports(), out)?;
            for s in &component.app().subscriptions {
                writeln!(
                    out,
                    "      {} on `{}` (max_attempts {:?}, dead letter {:?}, start {:?})",
                    s.name, s.stream, s.retry.max_attempts, s.retry.dead_letter, s.start
                )?;
            }
            true
        }
        Err(reason) => {
            writeln!(out, "error {shown}: {reason}")?;
            false
        }
    };
    let said = log.count();
    if said > 0 {
        writeln!(
            out,
            "      ({said} log lines while loading, not shown; `run` logs them)"
        )?;
    }
    Ok(passed)
}

/// One line per WASI interface the component imports and the tenant is not granted: it loads,
/// and every call into the interface fails with its access error.
fn write_denied(denied: &[String], out: &mut dyn Write) -> std::io::Result<()> {
    for import in denied {
        writeln!(
            out,
            "      {import}: imported, denied (every call fails with an access error)"
        )?;
    }
    Ok(())
}

/// A component's name: its file's stem, as `run` names it.
fn stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// The default limits, with room for only a few log lines: counted lines cost memory too.
fn quiet_limits() -> Limits {
    Limits {
        log: LogLimits {
            lines_per_record: 5,
            lines_per_call: 5,
            host_lines_per_second: 2,
            ..LogLimits::default()
        },
        ..Limits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refusal_is_written_to_the_output_given_and_counted() {
        let missing = std::env::temp_dir().join("ruststream-check-no-such-component.wasm");
        let compile = CompileCache {
            compile_cache: None,
            no_compile_cache: true,
        };
        let mut out = Vec::new();
        let error = check(std::slice::from_ref(&missing), &compile, &mut out).await;
        assert!(
            matches!(
                error,
                Err(CheckError::Refused {
                    failed: 1,
                    total: 1
                })
            ),
            "{error:?}"
        );
        let written = String::from_utf8_lossy(&out);
        let line = format!("error {}: ", missing.display());
        assert!(written.starts_with(&line), "{written}");
        assert_eq!(written.lines().count(), 1, "{written}");
    }
}
