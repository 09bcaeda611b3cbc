//! `ruststream check`: what each component declares, or why it is refused, in a few lines.

use std::path::PathBuf;
use std::sync::Arc;

use ruststream_runtime::{
    CompileLimits, Limits, LoadedComponent, LogLimits, LogSink, Runtime, Tenant, describe_app,
    escape_controls, one_line,
};

use crate::args::CompileArgs;
use crate::runtime_config;

/// Loads each component as a tenant with the default limits would (bounded compile,
/// instantiation and `describe` under the deadline) and prints one line per component, plus
/// one per subscription of those accepted. A refusal is one line whatever the component holds.
pub(crate) async fn check(components: &[PathBuf], compile: &CompileArgs) -> anyhow::Result<()> {
    let config = runtime_config(CompileLimits::default(), compile.cache_dir(None))?;
    let runtime = Runtime::new(config)?;
    let tenant = Arc::new(Tenant::trusted("check").limits(quiet_limits()));
    let mut failed = 0;
    for path in components {
        let shown = path.display().to_string();
        let shown = escape_controls(&shown);
        // What the component says while it loads is counted, not shown: `check` reports.
        let log = LogSink::silent();
        let loaded = LoadedComponent::from_file(&runtime, path, tenant.policy(), &log).await;
        match loaded {
            Ok(component) => {
                println!("ok    {shown}: {}", describe_app(component.app()));
                for s in &component.app().subscriptions {
                    println!(
                        "      {} on `{}` (max_attempts {:?}, dead letter {:?}, start {:?})",
                        s.name, s.stream, s.retry.max_attempts, s.retry.dead_letter, s.start
                    );
                }
            }
            Err(error) => {
                failed += 1;
                println!("error {shown}: {}", one_line(&error));
            }
        }
        let said = log.count();
        if said > 0 {
            println!("      ({said} log lines while loading, not shown; `run` logs them)");
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} components refused",
        components.len()
    );
    Ok(())
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
