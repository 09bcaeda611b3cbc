//! The `ruststream` binary end to end: tenants from a config file, local servers, a graceful
//! stop on SIGTERM (calls finished, checkpoint flushed, lease released), and hostile tenants
//! that neither delay nor bloat the others.

use std::process::Command;
use std::time::Duration;

use ruststream_host::{DynamoLeaseStore, LeaseStore, lease::LeaseKey};
use ruststream_tests::bench::status_kib;
use ruststream_tests::binary;
use ruststream_tests::e2e::put_json;
use ruststream_tests::guests;
use ruststream_tests::process::run_host;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::{eventually, poll_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_tenants_and_stops_gracefully_on_sigterm() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    kinesis.create_stream("secrets", 1).await?;
    let client = kinesis.client().await;

    let dir = std::env::temp_dir().join(format!("ruststream-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("ruststream.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            lease_store = "dynamodb"
            create_lease_table = true

            [[tenants]]
            name = "good"
            components = ["{settlement}"]
            subscribe = ["ledger"]

            [[tenants]]
            name = "evil"
            components = ["{snoop}"]
            subscribe = ["hostile"]
            "#,
            settlement = guests::SETTLEMENT.path().display(),
            snoop = guests::HOSTILE_SUBSCRIBE.path().display(),
        ),
    )?;
    let log = dir.join("ruststream.log");
    let mut running = run_host(
        &config,
        &kinesis,
        &log,
        &[
            "--dynamodb-endpoint",
            &dynamo.endpoint(),
            "--owner-id",
            "binary-host",
            "--checkpoint-interval-ms",
            "200",
        ],
    )?;

    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-good-ledger");
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    // Records put once the shard is open at the tip are read.
    let (shard, key) = wait_for_lease(&store, &output).await?;
    let reading = eventually(Duration::from_secs(15), || {
        output().contains("reading shard")
    })
    .await;
    assert!(reading, "{}", output());
    let (_, sequence) = put_json(&client, "ledger", &json!({"id": 1, "amount": 5}), None).await?;
    let booked = eventually(Duration::from_secs(20), || output().contains("booked")).await;
    assert!(booked, "{}", output());
    // Tenants load side by side: the refused one may still be loading.
    let refused = eventually(Duration::from_secs(30), || {
        output().contains("tenant `evil`")
    })
    .await;
    assert!(refused, "{}", output());

    let status = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()?;
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || running.0.wait()).await??;
    assert!(exit.success(), "exit {exit:?}: {}", output());

    let row = store.read(&key).await?.expect("the lease row");
    assert_eq!(
        row.checkpoint.as_deref(),
        Some(sequence.as_str()),
        "flushed on shutdown"
    );
    assert_eq!(row.owner, None, "released on shutdown ({shard})");
    let text = output();
    assert!(
        text.contains("tenant `evil`") && text.contains("secrets"),
        "the refusal names tenant and stream: {text}"
    );
    Ok(())
}

async fn wait_for_lease(
    store: &DynamoLeaseStore,
    output: &impl Fn() -> String,
) -> anyhow::Result<(String, LeaseKey)> {
    let lease = poll_for(Duration::from_secs(30), async || {
        let rows = store.list().await.ok()?;
        let row = rows
            .into_iter()
            .find(|r| r.owner.as_deref() == Some("binary-host"))?;
        let shard = row.key.trim_start_matches("ledger:").to_owned();
        let key = LeaseKey::new("ledger", &shard);
        Some((shard, key))
    })
    .await;
    lease.ok_or_else(|| anyhow::anyhow!("the binary never took the lease: {}", output()))
}

/// Output a person reads: no control character but line breaks, no Rust backtrace.
fn assert_clean(output: &str) {
    let bad: Vec<char> = output
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(bad.is_empty(), "control characters {bad:?} in: {output}");
    assert!(
        !output.contains("Stack backtrace") && !output.contains("panicked"),
        "{output}"
    );
}

#[test]
fn check_prints_a_few_clean_lines_for_hostile_components() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("ruststream-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let start_spin = dir.join("start_spin.wasm");
    let settlement = std::fs::read(guests::SETTLEMENT.path())?;
    std::fs::write(
        &start_spin,
        ruststream_tests::hostile::with_spinning_start(&settlement),
    )?;
    let hostile = [
        guests::HOSTILE_DECL_CONTROL.path(),
        guests::HOSTILE_DECL_LONG_NAME.path(),
        guests::HOSTILE_DESCRIBE_PUBLISH.path(),
        guests::HOSTILE_INITIALIZE_SPIN.path(),
        start_spin,
    ];
    for component in hostile {
        let out = Command::new(binary())
            .arg("check")
            .arg(&component)
            .arg("--compile-cache")
            .arg(ruststream_tests::compile_cache_dir())
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LOG", "info")
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_clean(&text);
        let lines = text.lines().count();
        assert!(
            lines <= 8,
            "{lines} lines for {}: {text}",
            component.display()
        );
        assert!(text.len() < 4096, "{} bytes: {text}", text.len());
    }
    Ok(())
}

/// `ruststream check` on `component`, with the tests' compile cache: its exit and its output.
fn check(component: &std::path::Path) -> anyhow::Result<(bool, String)> {
    let out = Command::new(binary())
        .arg("check")
        .arg(component)
        .arg("--compile-cache")
        .arg(ruststream_tests::compile_cache_dir())
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

#[test]
fn check_lists_denied_imports_and_refuses_unknown_ones() -> anyhow::Result<()> {
    let (passed, text) = check(&guests::HOSTILE_NET.path())?;
    assert!(passed, "{text}");
    let denied: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": imported, denied"))
        .map(str::trim)
        .collect();
    assert!(
        denied
            .iter()
            .any(|l| l.starts_with("wasi:sockets/tcp@0.2.")),
        "{text}"
    );
    assert!(
        denied.iter().all(|l| l.starts_with("wasi:sockets/")),
        "{text}"
    );
    let (passed, text) = check(&guests::HOSTILE_VAULT.path())?;
    assert!(!passed, "{text}");
    let refused = text
        .lines()
        .find(|l| l.starts_with("error "))
        .unwrap_or_default();
    assert!(
        refused.contains("imports `acme:vault/secrets@1.0.0`, which is neither WASI 0.2 nor"),
        "{text}"
    );
    Ok(())
}

/// The peak resident memory of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(&pid.to_string(), "VmHWM")
}

/// Most resident memory the host process may reach while tenants send compile bombs: the
/// bombs take gigabytes, in the worker; the host itself stays at its own size.
const HOST_PEAK_RSS_KIB: u64 = 150 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tenants_neither_delay_nor_bloat_the_others() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    for stream in ["ledger", "hostile"] {
        kinesis.create_stream(stream, 1).await?;
    }
    let client = kinesis.client().await;
    let dir = std::env::temp_dir().join(format!("ruststream-bombs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let write = |name: &str, bytes: Vec<u8>| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, bytes)?;
        Ok(path)
    };
    let cpu = write(
        "cpu_bomb.wasm",
        ruststream_tests::hostile::compile_bomb_cpu(),
    )?;
    let memory = write(
        "memory_bomb.wasm",
        ruststream_tests::hostile::compile_bomb_memory(),
    )?;
    let config = dir.join("tenants.toml");
    // The hostile tenants come first: they must not hold up the one after them. The slow one
    // is refused after its 15 s deadline, long after a compile of the good one, even with the
    // bombs compiling beside it on two cores (7 s seen).
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            compile_cpu_seconds = 4
            compile_memory_mib = 512
            compile_timeout_ms = 30000

            [[tenants]]
            name = "bombs"
            components = ["{cpu}", "{memory}"]
            subscribe = ["hostile"]

            [[tenants]]
            name = "slow"
            components = ["{slow}"]
            subscribe = ["hostile"]
            limits = {{ call_deadline_ms = 15000 }}

            [[tenants]]
            name = "good"
            components = ["{settlement}"]
            subscribe = ["ledger"]
            "#,
            cpu = cpu.display(),
            memory = memory.display(),
            slow = guests::HOSTILE_INITIALIZE_SLEEP.path().display(),
            settlement = guests::SETTLEMENT.path().display(),
        ),
    )?;
    let log = dir.join("ruststream.log");
    let mut running = run_host(&config, &kinesis, &log, &["--no-compile-cache"])?;
    let pid = running.0.id();
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let seen =
        async |text: &str| eventually(Duration::from_secs(60), || output().contains(text)).await;

    // The good tenant reads, and books, while the others are still being refused.
    assert!(seen("reading shard").await, "{}", output());
    put_json(&client, "ledger", &json!({"id": 1, "amount": 5}), None).await?;
    assert!(seen("booked").await, "{}", output());
    let booked_at = output().find("booked").unwrap_or(usize::MAX);
    let refused = [
        "tenant `slow`, component `hostile_initialize_sleep`: instantiation refused",
        "tenant `bombs`, component `cpu_bomb`: compiling refused",
        "tenant `bombs`, component `memory_bomb`: compiling refused",
    ];
    for line in refused {
        assert!(seen(line).await, "{line}: {}", output());
    }
    let text = output();
    let slow_refused = text.find(refused[0]).unwrap_or(0);
    assert!(
        booked_at < slow_refused,
        "the good tenant waited for the slow one: {text}"
    );
    // Each bomb is stopped by one of the budget's bounds, which its refusal names.
    for bomb in &refused[1..] {
        let line = text.lines().find(|l| l.contains(bomb)).unwrap_or_default();
        let keys = [
            "`compile_cpu_seconds`",
            "`compile_memory_mib`",
            "`compile_timeout_ms`",
        ];
        assert!(keys.iter().any(|key| line.contains(key)), "{line}");
    }
    let peak = peak_rss_kib(pid)?;
    assert!(peak < HOST_PEAK_RSS_KIB, "the host peaked at {peak} KiB");
    println!("host peak RSS while refusing compile bombs: {peak} KiB");

    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || running.0.wait()).await??;
    assert!(exit.success(), "exit {exit:?}: {}", output());
    assert_clean(&output());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_start_up_is_graceful() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    for stream in ["ledger", "hostile"] {
        kinesis.create_stream(stream, 1).await?;
    }
    let dir = std::env::temp_dir().join(format!("ruststream-early-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("tenants.toml");
    // The slow tenant is still instantiating (its deadline is long) when the stop comes.
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            lease_store = "dynamodb"
            create_lease_table = true

            [[tenants]]
            name = "slow"
            components = ["{slow}"]
            subscribe = ["hostile"]
            limits = {{ call_deadline_ms = 60000 }}

            [[tenants]]
            name = "good"
            components = ["{settlement}"]
            subscribe = ["ledger"]
            "#,
            slow = guests::HOSTILE_INITIALIZE_SLEEP.path().display(),
            settlement = guests::SETTLEMENT.path().display(),
        ),
    )?;
    let log = dir.join("ruststream.log");
    let dynamo_endpoint = dynamo.endpoint();
    let args = [
        "--dynamodb-endpoint",
        &dynamo_endpoint,
        "--owner-id",
        "early",
    ];
    let mut running = run_host(&config, &kinesis, &log, &args)?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let started = eventually(Duration::from_secs(60), || {
        output().contains("reading shard")
    })
    .await;
    assert!(started, "{}", output());
    assert!(
        !output().contains("every tenant is loaded"),
        "still starting: {}",
        output()
    );

    let pid = running.0.id();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    assert!(status.success());
    let exit = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::task::spawn_blocking(move || running.0.wait()),
    )
    .await???;
    assert!(exit.success(), "exit {exit:?}: {}", output());
    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-good-ledger");
    let rows = store.list().await?;
    assert!(!rows.is_empty(), "{}", output());
    assert!(
        rows.iter().all(|r| r.owner.is_none()),
        "released: {rows:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_interrupt_exits_at_once() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    for stream in ["paced", "singly"] {
        kinesis.create_stream(stream, 1).await?;
    }
    let client = kinesis.client().await;
    let dir = std::env::temp_dir().join(format!("ruststream-interrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"slow\"\ncomponents = [\"{}\"]\nsubscribe = [\"paced\", \"singly\"]\nlimits = {{ call_deadline_ms = 60000 }}\n",
            guests::PACER.path().display()
        ),
    )?;
    let log = dir.join("ruststream.log");
    let mut running = run_host(&config, &kinesis, &log, &["--shutdown-grace-ms", "60000"])?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let reading = eventually(Duration::from_secs(60), || {
        output().matches("reading shard").count() == 2
    })
    .await;
    assert!(reading, "{}", output());
    // A record whose call takes a minute: a graceful stop would wait for it.
    put_json(
        &client,
        "paced",
        &json!({"id": 1, "sleep_ms": 60_000}),
        None,
    )
    .await?;
    // Time for the slow record to be read and its call to start: nothing the host says marks that.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = running.0.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status()?;
    let stopping = eventually(Duration::from_secs(10), || output().contains("stopping")).await;
    assert!(stopping, "{}", output());
    let interrupted = std::time::Instant::now();
    Command::new("kill").args(["-INT", &pid]).status()?;
    let exit = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || running.0.wait()),
    )
    .await???;
    assert_eq!(exit.code(), Some(130), "{}", output());
    assert!(interrupted.elapsed() < Duration::from_secs(5));
    Ok(())
}
