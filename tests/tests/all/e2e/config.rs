//! The tenants file as the binary reads it: a mistake is named by file, line and key, `fuel`
//! is metered when a tenant sets it, and `ruststream check --config` checks a whole file
//! offline, every component under its tenant's grants and limits.

use std::path::Path;
use std::process::Command;

use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::{binary, compile_cache_dir, guests};

/// Runs the binary with `args`, with nothing to reach but a closed loopback port; returns
/// whether it succeeded, and stdout and stderr together.
fn ruststream(args: &[&str], config: &Path) -> anyhow::Result<(bool, String)> {
    let (ok, stdout, stderr) = ruststream_apart(args, config)?;
    Ok((ok, stdout + &stderr))
}

/// [`ruststream`], stdout and stderr apart.
fn ruststream_apart(args: &[&str], config: &Path) -> anyhow::Result<(bool, String, String)> {
    let out = Command::new(binary())
        .args(args)
        .arg("--config")
        .arg(config)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env(
            "RUSTSTREAM_STATE_DIR",
            ruststream_tests::process::state_dir(config),
        )
        .env("RUST_LOG", "warn")
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `run`'s flags that keep it on loopback and off the default ports.
const RUN: [&str; 7] = [
    "run",
    "--kinesis-endpoint",
    "http://127.0.0.1:9",
    "--admin-addr",
    "off",
    "--metrics-addr",
    "off",
];

fn tenant(name: &str, component: &Path, subscribe: &str, limits: &str) -> String {
    format!(
        "[[tenants]]\nname = \"{name}\"\ncomponents = [\"{}\"]\nsubscribe = [\"{subscribe}\"]\nlimits = {{ {limits} }}\n",
        component.display()
    )
}

#[test]
fn a_mistake_is_named_by_file_line_and_key_in_run_and_check() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-line")?;
    let config = dir.join("tenants.toml");
    let settlement = guests::SETTLEMENT.path();
    let text = format!(
        "[host]\ncompile_cache = \"{}\"\n\n{}\n{}",
        compile_cache_dir().display(),
        tenant("acme", &settlement, "ledger", "call_deadline = \"500ms\""),
        tenant("globex", &settlement, "ledger", "max_instances = 0"),
    );
    std::fs::write(&config, &text)?;
    let line = text
        .lines()
        .position(|l| l.contains("max_instances = 0"))
        .map(|i| i + 1)
        .ok_or_else(|| anyhow::anyhow!("no such line"))?;
    let expected = format!(
        "line {line}, `tenants[1].limits.max_instances`: `max_instances = 0` would refuse everything"
    );
    for args in [&RUN[..], &["check"][..]] {
        let (ok, output) = ruststream(args, &config)?;
        assert!(!ok, "{args:?}: {output}");
        assert!(output.contains(&expected), "{args:?}: {output}");
        assert!(output.contains("tenants.toml"), "{args:?}: {output}");
        assert_eq!(output.lines().count(), 1, "{args:?}: {output}");
    }
    Ok(())
}

#[test]
fn check_config_loads_every_component_under_its_tenants_grants() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-check")?;
    let config = dir.join("tenants.toml");
    let cache = format!(
        "[host]\ncompile_cache = \"{}\"\n\n",
        compile_cache_dir().display()
    );
    let good = tenant("acme", &guests::SETTLEMENT.path(), "ledger", "");
    std::fs::write(&config, format!("{cache}{good}"))?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(ok, "{output}");
    assert!(
        output.contains("ok    tenant `acme`, config file "),
        "{output}"
    );
    assert!(
        output.contains("`tenants[0].components[0]` = \""),
        "{output}"
    );
    assert!(output.contains("1 components of 1 tenants"), "{output}");

    // A component reading a stream its tenant is not granted is refused, naming both.
    let snoop = tenant("evil", &guests::HOSTILE_SUBSCRIBE.path(), "ledger", "");
    std::fs::write(&config, format!("{cache}{good}\n{snoop}"))?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(!ok, "{output}");
    let refused = output
        .lines()
        .find(|l| l.starts_with("error tenant `evil`, config file "))
        .ok_or_else(|| anyhow::anyhow!("no refusal: {output}"))?;
    assert!(refused.contains("not granted"), "{refused}");
    assert!(output.contains("1 of 2 components refused"), "{output}");
    Ok(())
}

#[test]
fn a_retry_stream_must_be_granted_and_of_the_subscription_s_own() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-retry-stream")?;
    let config = dir.join("tenants.toml");
    let retries = |retry_stream: &str| {
        format!(
            "[host]\ncompile_cache = \"{}\"\n\n[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\n\
             subscribe = [\"refunds\", \"payouts\", \"audit\"]\n\
             publish = [\"refunds.dead\", \"refunds.retry\"]\n\
             [tenants.subscriptions.reconcile]\nretry_stream = \"{retry_stream}\"\n",
            compile_cache_dir().display(),
            guests::SETTLEMENT_RETRIES.path().display()
        )
    };
    std::fs::write(&config, retries("refunds.retry"))?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(ok, "{output}");

    // Not in `publish`: the file's mistake, for `run` as for `check`.
    std::fs::write(&config, retries("payments.retry"))?;
    for args in [&RUN[..], &["check"][..]] {
        let (ok, output) = ruststream(args, &config)?;
        assert!(!ok, "{args:?}: {output}");
        assert!(
            output.contains("line 10, `tenants[0].subscriptions.reconcile.retry_stream`")
                && output.contains("its `publish` list"),
            "{args:?}: {output}"
        );
    }

    // Granted, but where the component dead-letters: the component is refused.
    std::fs::write(&config, retries("refunds.dead"))?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(!ok, "{output}");
    let refused = output
        .lines()
        .find(|l| l.starts_with("error tenant `acme`, config file "))
        .ok_or_else(|| anyhow::anyhow!("no refusal: {output}"))?;
    assert!(
        refused.contains(
            "subscriber `reconcile`'s retry stream `refunds.dead` is where its records given \
             up on go"
        ),
        "{refused}"
    );
    Ok(())
}

#[test]
fn fuel_in_the_tenants_file_is_metered() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-fuel")?;
    let config = dir.join("tenants.toml");
    let cache = format!(
        "[host]\ncompile_cache = \"{}\"\n\n",
        compile_cache_dir().display()
    );
    let settlement = guests::SETTLEMENT.path();
    // Loading runs on the tenant's fuel too: one unit cannot even describe the component.
    std::fs::write(
        &config,
        format!(
            "{cache}{}",
            tenant("acme", &settlement, "ledger", "fuel = 1")
        ),
    )?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(!ok, "{output}");
    assert!(output.contains("out of fuel"), "{output}");
    let (ok, output) = ruststream(&RUN, &config)?;
    assert!(!ok, "{output}");
    assert!(output.contains("out of fuel"), "{output}");
    assert!(output.contains("no component could be started"), "{output}");
    // Enough fuel loads it.
    std::fs::write(
        &config,
        format!(
            "{cache}{}",
            tenant("acme", &settlement, "ledger", "fuel = 100000000")
        ),
    )?;
    let (ok, output) = ruststream(&["check"], &config)?;
    assert!(ok, "{output}");
    Ok(())
}

#[test]
fn run_names_a_refused_component_in_one_line_in_the_words_of_check() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-words")?;
    let config = dir.join("tenants.toml");
    let cache = format!(
        "[host]\ncompile_cache = \"{}\"\n\n",
        compile_cache_dir().display()
    );
    // A component file that is not there, as the file writes it; one reading a stream its
    // tenant is not granted: each is a refusal of a component the tenants file names.
    let missing = "[[tenants]]\nname = \"acme\"\ncomponents = [\"gone/missing.wasm\"]\n\
                   subscribe = [\"ledger\"]\n";
    let snoop = tenant("evil", &guests::HOSTILE_SUBSCRIBE.path(), "ledger", "");
    for (tenants, names) in [
        (
            missing.to_owned(),
            vec!["tenant `acme`", "cannot read gone/missing.wasm: "],
        ),
        (snoop, vec!["tenant `evil`", "not granted"]),
    ] {
        std::fs::write(&config, format!("{cache}{tenants}"))?;
        let (ok, checked, _) = ruststream_apart(&["check"], &config)?;
        assert!(!ok, "{checked}");
        let refusal = checked
            .lines()
            .find_map(|line| line.strip_prefix("error "))
            .ok_or_else(|| anyhow::anyhow!("check refused nothing: {checked}"))?;
        let (ok, out, err) = ruststream_apart(&RUN, &config)?;
        assert!(!ok, "{out}{err}");
        // One line, the reason in it, in check's words.
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(
            err.trim_end(),
            format!("error: no component could be started: {refusal}"),
            "run: {err}check: {checked}"
        );
        for name in names {
            assert!(refusal.contains(name), "{name}: {refusal}");
        }
        assert!(
            refusal.contains(", config file ")
                && refusal.contains("`tenants[0].components[0]` = \""),
            "{refusal}"
        );
        // The tenants file itself was read fine: nothing says it could not be.
        assert!(
            !format!("{out}{err}").contains("cannot read config file"),
            "{out}{err}"
        );
    }

    // A lease table template that does not fit the file: the same line from both.
    let component = guests::SETTLEMENT.path();
    std::fs::write(
        &config,
        format!(
            "[host]\nlease_table = \"rs-{{app}}\"\ncompile_cache = \"{}\"\n\n{}\n{}",
            compile_cache_dir().display(),
            tenant("acme", &component, "ledger", ""),
            tenant("globex", &component, "ledger", ""),
        ),
    )?;
    let (ok, _, checked) = ruststream_apart(&["check"], &config)?;
    assert!(!ok, "{checked}");
    let (ok, _, ran) = ruststream_apart(&RUN, &config)?;
    assert!(!ok, "{ran}");
    assert_eq!(ran, checked);
    assert_eq!(ran.lines().count(), 1, "{ran}");
    assert!(
        ran.starts_with("error: config file ") && ran.contains("`host.lease_table`: "),
        "{ran}"
    );
    Ok(())
}

#[test]
fn old_keys_and_flags_still_work_with_a_warning_naming_what_to_write() -> anyhow::Result<()> {
    let dir = ScratchDir::new("config-deprecated")?;
    let config = dir.join("tenants.toml");
    let settlement = guests::SETTLEMENT.path();
    std::fs::write(
        &config,
        format!(
            "[host]\ncompile_cache = \"{}\"\ncompile_timeout_ms = 60000\n\n{}",
            compile_cache_dir().display(),
            tenant("acme", &settlement, "ledger", "call_deadline_ms = 500"),
        ),
    )?;
    // `check` reads the file as `run` does: the old keys apply, each one warned about.
    let (ok, text) = ruststream(&["check"], &config)?;
    assert!(ok, "{text}");
    for warning in [
        "line 3, `host.compile_timeout_ms`: `compile_timeout_ms` is deprecated and will be \
         removed: write `compile_timeout = \"1m\"`",
        "line 9, `tenants[0].limits.call_deadline_ms`: `call_deadline_ms` is deprecated and \
         will be removed: write `call_deadline = \"500ms\"`",
    ] {
        assert!(text.contains(warning), "{warning}\nnot in:\n{text}");
    }
    // An old flag sets its setting (here: a lease too short for the renewal asked for).
    let mut args = RUN.to_vec();
    args.extend(["--lease-ttl-ms", "1000", "--renew-interval", "5s"]);
    let (ok, text) = ruststream(&args, &config)?;
    assert!(!ok, "{text}");
    assert!(
        text.contains(
            "--lease-ttl-ms (or $RUSTSTREAM_LEASE_TTL_MS) is deprecated and will be removed: \
             give --lease-ttl 1s (or $RUSTSTREAM_LEASE_TTL=1s)"
        ),
        "{text}"
    );
    assert!(
        text.contains("error: --renew-interval (5s) must be shorter than --lease-ttl (1s)"),
        "{text}"
    );
    // Beside the flag that replaces it, it is refused.
    let mut args = RUN.to_vec();
    args.extend(["--lease-ttl-ms", "1000", "--lease-ttl", "1s"]);
    let (ok, text) = ruststream(&args, &config)?;
    assert!(!ok && text.contains("cannot be used with"), "{text}");
    Ok(())
}
