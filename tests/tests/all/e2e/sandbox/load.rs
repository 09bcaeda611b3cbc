//! Load time: a component is bounded before it runs a single record. Code that blocks or spins
//! while the component is instantiated or describes itself is refused within the tenant's
//! deadline; a compile bomb within the compile budget; extra memories and tables within one
//! cap per instance.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ruststream_common::escape::one_line;

use ruststream_runtime::{
    LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant,
    component::{
        CallForm, HandleAdapter, LoadError, LoadPhase, Refusal, TrapKind,
        compile::{CompileConfig, CompileError, CompileLimits, Compiler},
    },
    log::LogSink,
    tenant::Limits,
    testing::InProcessStreams,
};
use ruststream_tests::bench::{self, runqueue_waits};
use ruststream_tests::hostile;
use ruststream_tests::toolchains::SETTLEMENT_PYTHON;
use ruststream_tests::{Guest, guests};

use super::{Arena, assert_printable, evil, evil_limits};

/// Loads `bytes` as component `name` for `tenant` on `runtime`.
async fn load_bytes(
    arena: &Arena,
    runtime: &Runtime,
    tenant: &Arc<Tenant>,
    name: &str,
    bytes: Vec<u8>,
) -> Result<LoadedComponent, LoadError> {
    LoadedComponent::from_bytes(runtime, name, bytes, tenant.policy(), &arena.host.log).await
}

/// Loads as [`load_bytes`] does; returns how it went, the wall time it took, and at most the
/// time it took of its own: the deadline is the call's own time, so the time compute threads
/// waited for a core (the machine's other work) or for a slot (other tenants') is taken out.
async fn timed_load(
    arena: &Arena,
    runtime: &Runtime,
    tenant: &Arc<Tenant>,
    name: &str,
    bytes: Vec<u8>,
) -> anyhow::Result<(Result<LoadedComponent, LoadError>, Duration, Duration)> {
    const COMPUTE: &str = "ruststream-comp";
    let (queued, on_cores) = (slot_wait(runtime), runqueue_waits(COMPUTE)?);
    let started = Instant::now();
    let loaded = load_bytes(arena, runtime, tenant, name, bytes).await;
    let took = started.elapsed();
    // Other tests' compute threads count too: an upper bound on what this load waited.
    let others =
        runqueue_waits(COMPUTE)?.since(&on_cores) + slot_wait(runtime).saturating_sub(queued);
    Ok((loaded, took, took.saturating_sub(others)))
}

/// How long the `evil` tenant's calls waited for a compute slot so far.
fn slot_wait(runtime: &Runtime) -> Duration {
    runtime
        .cpu_usage()
        .iter()
        .filter(|usage| usage.tenant == "evil")
        .map(|usage| usage.waited)
        .sum()
}

fn guest(guest: Guest) -> anyhow::Result<Vec<u8>> {
    Ok(std::fs::read(guest.path())?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_that_blocks_or_spins_while_loading_is_refused_within_the_deadline()
-> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let deadline = Duration::from_millis(800);
    let tenant = Arc::new(evil().limits(Limits {
        call_deadline: deadline,
        ..evil_limits()
    }));
    let cases = [
        // `_initialize`, run by a core start function: a WASI sleep, then a spin.
        (
            "hostile_initialize_sleep",
            guest(guests::HOSTILE_INITIALIZE_SLEEP)?,
            LoadPhase::Instantiate,
        ),
        (
            "hostile_initialize_spin",
            guest(guests::HOSTILE_INITIALIZE_SPIN)?,
            LoadPhase::Instantiate,
        ),
        // `.init_array` constructors, run at the top of the first export: `describe`.
        (
            "hostile_init_sleep",
            guest(guests::HOSTILE_INIT_SLEEP)?,
            LoadPhase::Describe,
        ),
        (
            "hostile_init_spin",
            guest(guests::HOSTILE_INIT_SPIN)?,
            LoadPhase::Describe,
        ),
        // A raw core start function that spins.
        (
            "start_spin",
            hostile::with_spinning_start(&guest(guests::SETTLEMENT)?),
            LoadPhase::Instantiate,
        ),
    ];
    let loads = async {
        for (name, bytes, phase) in cases {
            let runtime = &arena.host.runtime;
            // The first load compiles (and caches); the second measures the refusal alone.
            let first = load_bytes(&arena, runtime, &tenant, name, bytes.clone()).await;
            assert!(first.is_err(), "{name} loaded");
            let (refused, _, took) = timed_load(&arena, runtime, &tenant, name, bytes).await?;
            let error = refused.err().expect("refused");
            let line = one_line(&error);
            assert_eq!(error.phase, phase, "{line}");
            assert!(
                matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::Deadline),
                "{line}"
            );
            assert!(
                line.starts_with(&format!(
                    "tenant `evil`, component `{name}`: {phase} refused"
                )),
                "{line}"
            );
            assert!(
                took < deadline + Duration::from_millis(700),
                "{name}: {took:?}"
            );
            assert_printable(&line);
        }
        anyhow::Ok(())
    };
    let (loaded, flowed) = tokio::join!(loads, arena.assert_settlement_flows());
    loaded?;
    flowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_while_loading_win_no_fresh_deadline() -> anyhow::Result<()> {
    // Each stalls 600 ms, reports, stalls 600 ms more, reports: 1.2 s against a 1 s deadline.
    // Were a report outside `handle-batch` to move the deadline, it would load.
    let arena = Arena::start().await?;
    let deadline = Duration::from_secs(1);
    let tenant = Arc::new(evil().limits(Limits {
        call_deadline: deadline,
        ..evil_limits()
    }));
    let cases = [
        (
            "hostile_report_initialize",
            guest(guests::HOSTILE_REPORT_INITIALIZE)?,
            LoadPhase::Instantiate,
        ),
        (
            "hostile_report_describe",
            guest(guests::HOSTILE_REPORT_DESCRIBE)?,
            LoadPhase::Describe,
        ),
    ];
    for (name, bytes, phase) in cases {
        let runtime = &arena.host.runtime;
        // The first load compiles (and caches); the second measures the refusal alone.
        let first = load_bytes(&arena, runtime, &tenant, name, bytes.clone()).await;
        assert!(first.is_err(), "{name} loaded");
        let (refused, wall, took) = timed_load(&arena, runtime, &tenant, name, bytes).await?;
        let error = refused.err().expect("refused");
        let line = one_line(&error);
        assert_eq!(error.phase, phase, "{line}");
        assert!(
            matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::Deadline),
            "{line}"
        );
        // Its own time never runs ahead of the wall clock.
        assert!(
            wall >= deadline,
            "{name}: refused before its deadline, {wall:?}"
        );
        assert!(
            took < deadline + Duration::from_millis(700),
            "{name}: {took:?}"
        );
    }
    arena.assert_settlement_flows().await
}

/// A runtime whose components compile in the bounded worker with a small budget, uncached.
fn bounded_runtime(limits: CompileLimits) -> anyhow::Result<Runtime> {
    Runtime::new(RuntimeConfig {
        compile: CompileConfig {
            compiler: Compiler::Worker {
                program: ruststream_tests::binary(),
            },
            limits,
            cache: None,
        },
        ..RuntimeConfig::default()
    })
    .map_err(Into::into)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compile_bombs_are_refused_within_the_compile_budget() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    // The CPU budget stops the bomb; the wall-clock bound leaves room for a loaded machine,
    // where the niced worker gets little of a core.
    let limits = CompileLimits {
        timeout: Duration::from_secs(60),
        cpu: Duration::from_secs(3),
        ..CompileLimits::default()
    };
    let runtime = bounded_runtime(limits.clone())?;
    // The memory bomb gets all the CPU it wants: only its memory can stop it.
    let tight = bounded_runtime(CompileLimits {
        memory_bytes: 256 << 20,
        cpu: Duration::from_secs(60),
        timeout: Duration::from_secs(60),
        ..limits.clone()
    })?;
    let tenant = Arc::new(evil());
    let bombs = async {
        // A few KB that keep Cranelift busy for minutes: stopped by the CPU budget.
        let started = Instant::now();
        let cpu = load_bytes(
            &arena,
            &runtime,
            &tenant,
            "cpu_bomb",
            hostile::compile_bomb_cpu(),
        );
        let error = cpu.await.err().expect("refused");
        assert_eq!(error.phase, LoadPhase::Compile);
        assert!(
            matches!(error.refusal, Refusal::Compile(CompileError::CpuTime(_))),
            "{}",
            one_line(&error)
        );
        assert!(one_line(&error).contains("`compile_cpu`"));
        // The worker runs niced beside this process: allow for a loaded machine.
        assert!(
            started.elapsed() < limits.timeout,
            "{:?}",
            started.elapsed()
        );

        // ~190 KB that make Cranelift allocate gigabytes: stopped by the memory budget.
        let memory = load_bytes(
            &arena,
            &tight,
            &tenant,
            "memory_bomb",
            hostile::compile_bomb_memory(),
        );
        let error = memory.await.err().expect("refused");
        assert!(
            matches!(error.refusal, Refusal::Compile(CompileError::Memory(256))),
            "{}",
            one_line(&error)
        );
        anyhow::Ok(())
    };
    let (refused, flowed) = tokio::join!(bombs, arena.assert_settlement_flows());
    refused?;
    flowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_budget_compiles_a_large_component_and_stops_a_small_bomb() -> anyhow::Result<()>
{
    let arena = Arena::start().await?;
    let limits = CompileLimits::default();
    let runtime = bounded_runtime(limits.clone())?;
    let python = tokio::task::spawn_blocking(|| SETTLEMENT_PYTHON.build()).await??;
    let python = std::fs::read(python)?;
    let bomb = hostile::compile_bomb_cpu();
    // The bomb is a few KB: it gets the small component's budget; CPython's 18 MB get more.
    assert_eq!(limits.budget(bomb.len()).cpu, limits.cpu);
    let budget = limits.budget(python.len());
    assert!(budget.cpu > limits.cpu && budget.timeout > limits.timeout);
    let tenant = Arc::new(Tenant::trusted("polyglot"));
    let large = async {
        let started = Instant::now();
        let loaded = load_bytes(&arena, &runtime, &tenant, "settlement_python", python).await;
        let loaded = loaded.map_err(|e| anyhow::anyhow!("{}", one_line(&e)))?;
        eprintln!(
            "settlement-python compiled and loaded in {:?} (budget {budget:?})",
            started.elapsed()
        );
        assert_eq!(loaded.app().name, "ledger");
        anyhow::Ok(())
    };
    let small = async {
        let started = Instant::now();
        let error = load_bytes(&arena, &runtime, &tenant, "cpu_bomb", bomb)
            .await
            .err()
            .expect("refused");
        eprintln!("the CPU bomb was stopped after {:?}", started.elapsed());
        // Stopped by the small component's budget: its CPU time, or on a loaded machine (the
        // worker niced) its wall time first.
        let small_budget = match error.refusal {
            Refusal::Compile(CompileError::CpuTime(cpu)) => cpu == limits.cpu,
            Refusal::Compile(CompileError::Timeout(wall)) => wall == limits.timeout,
            _ => false,
        };
        assert!(small_budget, "{}", one_line(&error));
        anyhow::Ok(())
    };
    let (large, small, flowed) = tokio::join!(large, small, arena.assert_settlement_flows());
    large?;
    small?;
    flowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_bounds_refuse_before_compiling() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let tenant = Arc::new(evil());
    let runtime = &arena.host.runtime;
    let cases = [
        (
            "functions",
            hostile::many_functions(100_001),
            "`compile_max_functions`",
        ),
        (
            "huge",
            hostile::huge_function((1 << 20) + 1),
            "`compile_max_function_bytes`",
        ),
    ];
    for (name, bytes, key) in cases {
        let started = Instant::now();
        let error = load_bytes(&arena, runtime, &tenant, name, bytes)
            .await
            .err();
        let error = error.expect("refused");
        assert!(
            matches!(error.refusal, Refusal::Compile(CompileError::Bound { .. })),
            "{}",
            one_line(&error)
        );
        assert!(one_line(&error).contains(key), "{}", one_line(&error));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refused before compiling"
        );
    }
    // A file over the size bound is refused before it is read.
    let small = bounded_runtime(CompileLimits {
        max_bytes: 64 << 10,
        ..CompileLimits::default()
    })?;
    let path = guests::SETTLEMENT.path();
    let error = LoadedComponent::from_file(&small, path, tenant.policy(), &arena.host.log).await;
    let error = error.err().expect("refused");
    assert_eq!(error.phase, LoadPhase::Read);
    assert!(
        one_line(&error).contains("`compile_max_bytes`"),
        "{}",
        one_line(&error)
    );
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_and_tables_count_against_one_cap_per_instance() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let settlement = guest(guests::SETTLEMENT)?;
    let runtime = &arena.host.runtime;
    let load = async |limits: Limits, name: &str, bytes: Vec<u8>| {
        let tenant = Arc::new(evil().limits(limits));
        load_bytes(&arena, runtime, &tenant, name, bytes).await
    };

    // Four extra memories of 40 MiB, each under a 64 MiB cap: 160 MiB in one instance.
    let many = Limits {
        max_memories: 6,
        ..Limits::default()
    };
    let four = hostile::with_extra_memories(&settlement, 4, 640);
    let error = load(many, "memories", four).await.err().expect("refused");
    assert_eq!(error.phase, LoadPhase::Instantiate);
    assert!(
        matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::MemoryLimit),
        "{}",
        one_line(&error)
    );

    // The default count cap: settlement's one memory, and room for one more.
    let three = hostile::with_extra_memories(&settlement, 2, 1);
    let error = load(Limits::default(), "counted", three).await.err();
    let error = error.expect("refused");
    assert!(
        matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::ResourceLimit),
        "{}",
        one_line(&error)
    );
    assert!(one_line(&error).contains("memory count too high"));

    // Tables count in bytes: just under the cap with a big memory, over it with a table.
    let big = hostile::with_extra_memories(&settlement, 1, 1000);
    let loaded = load(Limits::default(), "big", big.clone()).await;
    assert!(loaded.is_ok(), "{:?}", loaded.err().map(|e| one_line(&e)));
    let with_table = hostile::with_extra_table(&big, 100_000);
    let error = load(Limits::default(), "table", with_table).await.err();
    let error = error.expect("refused");
    assert!(
        one_line(&error).contains("memories and tables would hold"),
        "{}",
        one_line(&error)
    );

    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_claiming_the_host_adapters_names_gains_nothing() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let runtime = &arena.host.runtime;
    let tenant = Arc::new(evil());
    let plain = guest(guests::SETTLEMENT_PLAIN)?;
    let loaded = load_bytes(&arena, runtime, &tenant, "plain", plain.clone()).await?;
    assert!(
        loaded.handle_adapted(),
        "a handle-only component is wrapped"
    );

    // Its own export under the adapter's name: not wrapped, so that export is never called;
    // `handle` is called from the host, and works.
    let claimed = hostile::with_reexported_func(
        &plain,
        "ruststream:handler/handler@1.0.0",
        "handle",
        "ruststream-handle-records",
    );
    let loaded = load_bytes(&arena, runtime, &tenant, "claimed", claimed).await?;
    assert_eq!(loaded.form(), CallForm::Handle);
    assert!(!loaded.handle_adapted());
    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let env = loaded.env(tenant.policy().clone(), streams, clock, LogSink::new());
    let mut instance = loaded.instance(env);
    let records = Arc::new(bench::consume_json_batch(0..3));
    let outcomes = bench::call_batch(&mut instance, &records).await?;
    assert_eq!(outcomes, [Outcome::Ack; 3]);

    // The adapter's import: the host grants it only beside its own adapter.
    let importing = hostile::with_func_import(&plain, "ruststream-share-board");
    let error = load_bytes(&arena, runtime, &tenant, "importing", importing)
        .await
        .err()
        .expect("refused");
    assert_eq!(error.phase, LoadPhase::Check);
    assert!(
        matches!(&error.refusal, Refusal::ForbiddenImport { import } if import.contains("ruststream-share-board")),
        "{}",
        one_line(&error)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_adapter_takes_none_of_a_tenants_instance_and_memory_counts() -> anyhow::Result<()>
{
    // The fewest core instances, and memories, `settlement_plain` loads under: the same with
    // and without the host's adapter beside it, whose own are not the tenant's.
    let arena = Arena::start().await?;
    let bytes = guest(guests::SETTLEMENT_PLAIN)?;
    let mut fewest = Vec::new();
    for (setting, wrapped) in [
        (HandleAdapter::Off, false),
        (HandleAdapter::HandleOnly, true),
    ] {
        let runtime = Runtime::new(RuntimeConfig {
            compile: CompileConfig::in_process(),
            handle_adapter: setting,
            ..RuntimeConfig::default()
        })?;
        let mut instances = None;
        for max_instances in 1..=16 {
            let limits = Limits {
                max_instances,
                max_memories: 1,
                ..evil_limits()
            };
            let tenant = Arc::new(evil().limits(limits));
            let loaded = load_bytes(&arena, &runtime, &tenant, "counted", bytes.clone()).await;
            if let Ok(loaded) = loaded {
                assert_eq!(loaded.handle_adapted(), wrapped);
                instances = Some(max_instances);
                break;
            }
        }
        fewest.push(instances.expect("loads under some count"));
    }
    assert_eq!(
        fewest[0], fewest[1],
        "fewest core instances without and with the adapter"
    );
    Ok(())
}
