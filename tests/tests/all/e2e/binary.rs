//! The `ruststream` binary end to end: tenants from a config file, local servers, a graceful
//! stop on SIGTERM (calls finished, checkpoint flushed, lease released), and hostile tenants
//! that neither delay nor bloat the others.

use std::process::Command;
use std::time::Duration;

use ruststream_kinesis::LeaseStore;
use ruststream_tests::bench::status_kib;
use ruststream_tests::binary;
use ruststream_tests::fixture::Fixture;
use ruststream_tests::guests;
use ruststream_tests::scratch::ScratchDir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_tenants_and_stops_gracefully_on_sigterm() -> anyhow::Result<()> {
    let fixture = Fixture::builder("binary")
        .stream("ledger", 1)
        .stream("secrets", 1)
        .dynamo()
        .start()
        .await?;
    let tenants = fixture.tenants(&format!(
        r#"
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
    ))?;
    let host = fixture
        .host(&tenants)
        .dynamo_leases()
        .owner("binary-host")
        .args(&["--checkpoint-interval", "200ms"])
        .start()?;

    // Records put once the shard is open at the tip are read.
    let table = "ruststream-good-ledger";
    let key = fixture
        .wait_for_lease(table, "ledger", "binary-host")
        .await?;
    host.wait_for_log("reading shard", 1).await?;
    let sequence = fixture
        .put("ledger", &json!({"id": 1, "amount": 5}))
        .await?;
    host.wait_for_log("booked", 1).await?;
    // Tenants load side by side: the refused one may still be loading.
    host.wait_for_log("tenant `evil`", 1).await?;

    let text = host.stop().await?;
    let row = fixture
        .lease_store(table)
        .await
        .read(&key)
        .await?
        .expect("the lease row");
    assert_eq!(
        row.checkpoint.as_deref(),
        Some(sequence.as_str()),
        "flushed on shutdown"
    );
    assert_eq!(row.owner, None, "released on shutdown ({key:?})");
    assert!(
        text.contains("tenant `evil`") && text.contains("secrets"),
        "the refusal names tenant and stream: {text}"
    );
    Ok(())
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
    let dir = ScratchDir::new("check")?;
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
    let fixture = Fixture::builder("bombs")
        .stream("ledger", 1)
        .stream("hostile", 1)
        .start()
        .await?;
    let write = |name: &str, bytes: Vec<u8>| -> anyhow::Result<std::path::PathBuf> {
        let path = fixture.dir().join(name);
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
    // The hostile tenants come first: they must not hold up the one after them. The slow one
    // is refused after its 15 s deadline, long after a compile of the good one, even with the
    // bombs compiling beside it on two cores (7 s seen).
    let tenants = fixture.tenants(&format!(
        r#"
        [host]
        compile_cpu = "4s"
        compile_memory_mib = 512
        compile_timeout = "30s"

        [[tenants]]
        name = "bombs"
        components = ["{cpu}", "{memory}"]
        subscribe = ["hostile"]

        [[tenants]]
        name = "slow"
        components = ["{slow}"]
        subscribe = ["hostile"]
        limits = {{ call_deadline = "15s" }}

        [[tenants]]
        name = "good"
        components = ["{settlement}"]
        subscribe = ["ledger"]
        "#,
        cpu = cpu.display(),
        memory = memory.display(),
        slow = guests::HOSTILE_INITIALIZE_SLEEP.path().display(),
        settlement = guests::SETTLEMENT.path().display(),
    ))?;
    let host = fixture
        .host(&tenants)
        .args(&["--no-compile-cache"])
        .start()?;
    let pid = host.pid();

    // The good tenant reads, and books, while the others are still being refused.
    host.wait_for_log("reading shard", 1).await?;
    fixture
        .put("ledger", &json!({"id": 1, "amount": 5}))
        .await?;
    host.wait_for_log("booked", 1).await?;
    let booked_at = host.output().find("booked").unwrap_or(usize::MAX);
    let refused = [
        "tenant `slow`, component `hostile_initialize_sleep`: instantiation refused",
        "tenant `bombs`, component `cpu_bomb`: compiling refused",
        "tenant `bombs`, component `memory_bomb`: compiling refused",
    ];
    for line in refused {
        host.wait_for_log(line, 1).await?;
    }
    let text = host.output();
    let slow_refused = text.find(refused[0]).unwrap_or(0);
    assert!(
        booked_at < slow_refused,
        "the good tenant waited for the slow one: {text}"
    );
    // Each bomb is stopped by one of the budget's bounds, which its refusal names.
    for bomb in &refused[1..] {
        let line = text.lines().find(|l| l.contains(bomb)).unwrap_or_default();
        let keys = ["`compile_cpu`", "`compile_memory_mib`", "`compile_timeout`"];
        assert!(keys.iter().any(|key| line.contains(key)), "{line}");
    }
    let peak = peak_rss_kib(pid)?;
    assert!(peak < HOST_PEAK_RSS_KIB, "the host peaked at {peak} KiB");
    println!("host peak RSS while refusing compile bombs: {peak} KiB");

    assert_clean(&host.stop().await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_start_up_is_graceful() -> anyhow::Result<()> {
    let fixture = Fixture::builder("early-stop")
        .stream("ledger", 1)
        .stream("hostile", 1)
        .dynamo()
        .start()
        .await?;
    // The slow tenant is still instantiating (its deadline is long) when the stop comes.
    let tenants = fixture.tenants(&format!(
        r#"
        [[tenants]]
        name = "slow"
        components = ["{slow}"]
        subscribe = ["hostile"]
        limits = {{ call_deadline = "60s" }}

        [[tenants]]
        name = "good"
        components = ["{settlement}"]
        subscribe = ["ledger"]
        "#,
        slow = guests::HOSTILE_INITIALIZE_SLEEP.path().display(),
        settlement = guests::SETTLEMENT.path().display(),
    ))?;
    let host = fixture
        .host(&tenants)
        .dynamo_leases()
        .owner("early")
        .start()?;
    host.wait_for_log("reading shard", 1).await?;
    assert!(
        !host.output().contains("every tenant is loaded"),
        "still starting: {}",
        host.output()
    );

    host.signal("TERM")?;
    let (exit, output) = host.exit(Duration::from_secs(20)).await?;
    assert!(exit.success(), "exit {exit:?}: {output}");
    let rows = fixture
        .lease_store("ruststream-good-ledger")
        .await
        .list()
        .await?;
    assert!(!rows.is_empty(), "{output}");
    assert!(
        rows.iter().all(|r| r.owner.is_none()),
        "released: {rows:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_interrupt_exits_at_once() -> anyhow::Result<()> {
    let fixture = Fixture::builder("interrupt")
        .stream("paced", 1)
        .stream("singly", 1)
        .start()
        .await?;
    let tenants = fixture.tenants(&format!(
        "[[tenants]]\nname = \"slow\"\ncomponents = [\"{}\"]\nsubscribe = [\"paced\", \"singly\"]\nlimits = {{ call_deadline = \"60s\" }}\n",
        guests::PACER.path().display()
    ))?;
    let host = fixture
        .host(&tenants)
        .args(&["--shutdown-grace", "60000ms"])
        .start()?;
    host.wait_for_log("reading shard", 2).await?;
    // A record whose call takes a minute: a graceful stop would wait for it. The guest says
    // when the call has begun.
    fixture
        .put(
            "paced",
            &json!({"id": 1, "sleep_ms": 60_000, "announce": true}),
        )
        .await?;
    host.wait_for_log("step started", 1).await?;
    host.signal("INT")?;
    host.wait_until(Duration::from_secs(10), "stopping", |log| {
        log.contains("stopping")
    })
    .await?;
    let interrupted = std::time::Instant::now();
    host.signal("INT")?;
    let (exit, output) = host.exit(Duration::from_secs(10)).await?;
    assert_eq!(exit.code(), Some(130), "{output}");
    assert!(interrupted.elapsed() < Duration::from_secs(5));
    Ok(())
}
