//! CPU isolation through the binary: tenants and shadows that burn CPU slow nobody else and
//! never time out a neighbour's calls, and the host's own work (lease renewals, the admin API)
//! goes on beside them.
//!
//! The neighbour is `burner` (each record says how many rounds of a mixing loop to run), sized
//! by what the host itself counts of its CPU (`ruststream_tenant_cpu_seconds_total`), so the
//! calls take the CPU the test means on any machine (`ruststream_tests::neighbour`). The
//! spinners are `hostile-spin` tenants and `burner-spin` shadows, which spin until their
//! deadline stops them.

use std::time::{Duration, Instant};

use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::neighbour::{
    cpu_seconds, deploy_shadow, failures, latencies, latencies_across, neighbour, percentile,
    rounds_for, spinner, steady, tail, verb,
};
use ruststream_tests::scrape::Scrape;
use serde_json::json;

/// The streams every test here makes: the neighbour's, and `hostile` with `spinning_shards`.
async fn fixture(name: &str, work_shards: i32, spinning_shards: i32) -> anyhow::Result<Fixture> {
    Fixture::builder(name)
        .stream("work", work_shards)
        .stream("work.dead", 1)
        .stream("work.out", 1)
        .stream("hostile", spinning_shards)
        .start()
        .await
}

/// A neighbour whose calls take 1.5 s of CPU under a 2 s deadline, beside a tenant spinning
/// to its deadline on four shards, then beside its own shadow spinning too: no record of it
/// is trapped, copied or dead-lettered. Before the host shared CPU by tenant and charged a
/// deadline only the call's own time, the spinners' calls took four fifths of the cores and
/// the neighbour's calls ran past their deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbour_is_never_timed_out_by_a_spinning_tenant_nor_by_its_own_spinning_shadow()
-> anyhow::Result<()> {
    let fixture = fixture("cpu-deadlines", 1, 4).await?;
    let tenants = fixture.tenants(&format!(
        "{}{}",
        neighbour(2_000),
        spinner("spinner", 1_000)
    ))?;
    let host = fixture
        .host(&tenants)
        .args(&["--compute-threads", "2"])
        .start()?;
    host.wait_for_log("reading shard", 5).await?;
    let rounds = rounds_for(&fixture, &host, Duration::from_millis(1_500), 0).await?;

    // Enough spinning to outlast both phases: 4 shards of 1 s calls, 120 s of CPU.
    let spins: Vec<_> = (0..120).map(|id| json!({"id": id})).collect();
    put_json_batch(fixture.client(), "hostile", &spins).await?;
    host.wait_for_log("spinning forever", 4).await?;
    let jobs = |ids: std::ops::Range<u64>| -> Vec<_> {
        ids.map(|id| json!({"id": id, "work": rounds})).collect()
    };
    fixture.put_all("work", jobs(1..5)).await?;
    latencies(&host, 1..5).await?;
    assert_eq!(
        failures(&host.scrape().await?),
        [0.0; 3],
        "traps, copies, dead letters beside a spinning tenant: {}",
        tail(&host.output())
    );

    deploy_shadow(&host, guests::BURNER_SPIN).await?;
    fixture.put_all("work", jobs(5..9)).await?;
    latencies(&host, 5..9).await?;
    let scrape = host.scrape().await?;
    assert_eq!(
        failures(&scrape),
        [0.0; 3],
        "traps, copies, dead letters beside a spinning tenant and its own spinning shadow: {}",
        tail(&host.output())
    );
    // The spinners did spin: their CPU is counted, and none of it as the neighbour's.
    assert!(cpu_seconds(&scrape, "spinner", "live") > 1.0);
    host.stop().await?;
    Ok(())
}

/// A shadow that spins to its deadline on every record never slows its live version: the live
/// put → handled p99 stays within twice what it is without a shadow (plus 250 ms of
/// scheduling); and `--abort-shadow` ends the shadow's CPU use at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_shadow_never_slows_its_live_version_and_an_abort_stops_it_at_once()
-> anyhow::Result<()> {
    let fixture = fixture("cpu-shadow", 4, 1).await?;
    let tenants = fixture.tenants(&neighbour(2_000))?;
    let host = fixture
        .host(&tenants)
        .args(&["--compute-threads", "2"])
        .start()?;
    host.wait_for_log("reading shard", 4).await?;
    let rounds = rounds_for(&fixture, &host, Duration::from_millis(20), 0).await?;
    let every = Duration::from_millis(100);
    // Spread over the four shards, so the shadow spins on all of them.
    let alone = percentile(&steady(&fixture, &host, 1..41, rounds, every).await?, 99);

    deploy_shadow(&host, guests::BURNER_SPIN).await?;
    let shadowed = percentile(&steady(&fixture, &host, 41..81, rounds, every).await?, 99);
    println!("live p99 put -> handled: alone {alone} ms, beside a spinning shadow {shadowed} ms");
    assert!(
        shadowed <= 2 * alone + 250,
        "the shadow slowed the live version: p99 {shadowed} ms against {alone} ms alone"
    );
    let scrape = host.scrape().await?;
    assert!(
        cpu_seconds(&scrape, "neighbour", "shadow") > 0.5,
        "the shadow never ran: {}",
        tail(&host.output())
    );

    let (ok, said) = verb(&host, &["deploy", "neighbour", "--abort-shadow", "burner"]).await?;
    anyhow::ensure!(ok, "deploy --abort-shadow: {said}");
    let aborted = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let then = cpu_seconds(&host.scrape().await?, "neighbour", "shadow");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = cpu_seconds(&host.scrape().await?, "neighbour", "shadow");
    assert!(
        later - then < 0.05,
        "the aborted shadow used {:.3} s of CPU from {:?} after the abort",
        later - then,
        aborted.elapsed()
    );
    host.stop().await?;
    Ok(())
}

/// Four tenants spinning to their deadline on a host with two compute threads: a neighbour's
/// put → handled p99 stays within twice its p99 alone (plus 250 ms), no lease is lost, every
/// lease renewal starts within half a second of its time, and the host shuts down within its
/// grace without abandoning a worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_spinning_tenants_leave_a_neighbour_its_latency_and_the_host_its_leases()
-> anyhow::Result<()> {
    // Four apps of four tenants on one stream: each reads every record of both shards.
    let fixture = fixture("cpu-spinners", 1, 2).await?;
    let mut file = neighbour(5_000);
    for n in 1..=4 {
        file.push_str(&spinner(&format!("spinner{n}"), 5_000));
    }
    let tenants = fixture.tenants(&file)?;
    let host = fixture
        .host(&tenants)
        .args(&[
            "--compute-threads",
            "2",
            "--renew-interval",
            "1000ms",
            "--lease-ttl",
            "6000ms",
        ])
        .start()?;
    host.wait_for_log("reading shard", 9).await?;
    // 5 % of a core: well within a fifth of the two threads, whatever else the machine runs.
    let rounds = rounds_for(&fixture, &host, Duration::from_millis(10), 0).await?;
    let every = Duration::from_millis(200);
    let alone = percentile(&steady(&fixture, &host, 1..31, rounds, every).await?, 99);

    let spins: Vec<_> = (0..40).map(|id| json!({"id": id})).collect();
    put_json_batch(fixture.client(), "hostile", &spins).await?;
    host.wait_for_log("spinning forever", 8).await?;
    let beside = percentile(&steady(&fixture, &host, 31..61, rounds, every).await?, 99);
    println!("neighbour p99 put -> handled: alone {alone} ms, beside four spinners {beside} ms");
    assert!(
        beside <= 2 * alone + 250,
        "the spinners slowed the neighbour: p99 {beside} ms against {alone} ms alone"
    );
    let scrape = host.scrape().await?;
    assert_eq!(scrape.sum("ruststream_leases_lost_total", &[]), 0.0);
    let renewals = scrape.sum("ruststream_lease_renewal_lateness_seconds_count", &[]);
    let on_time = scrape.sum(
        "ruststream_lease_renewal_lateness_seconds_bucket",
        &[("le", "0.5")],
    );
    assert!(renewals > 20.0, "{renewals} renewals");
    assert_eq!(on_time, renewals, "a renewal started more than 0.5 s late");
    for n in 1..=4 {
        let tenant = format!("spinner{n}");
        assert!(
            cpu_seconds(&scrape, &tenant, "live") > 0.5,
            "{tenant} never spun"
        );
    }

    let stopping = Instant::now();
    let log = host.stop().await?;
    let took = stopping.elapsed();
    assert!(
        !log.contains("outlasted the shutdown grace"),
        "a worker outlasted the grace: {}",
        tail(&log)
    );
    assert!(
        took < Duration::from_secs(15),
        "the host took {took:?} to stop"
    );
    Ok(())
}

/// A shadow publishing 2 000 records a record, past its write quota: its refused publishes
/// are counted as the shadow's (`role="shadow"`), never as the live version's, and the live
/// version's write quota is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_shadow_s_throttles_are_its_own() -> anyhow::Result<()> {
    let fixture = fixture("cpu-flood", 1, 1).await?;
    let tenants = fixture.tenants(&neighbour(2_000))?;
    let host = fixture
        .host(&tenants)
        .args(&["--compute-threads", "2"])
        .start()?;
    host.wait_for_log("reading shard", 1).await?;
    deploy_shadow(&host, guests::BURNER_FLOOD).await?;
    let jobs: Vec<_> = (1..=5).map(|id| json!({"id": id, "work": 1_000})).collect();
    fixture.put_all("work", jobs).await?;
    latencies(&host, 1..6).await?;
    let throttles = |scrape: &ruststream_tests::scrape::Scrape, role: &str| {
        scrape.sum(
            "ruststream_publish_throttles_total",
            &[("tenant", "neighbour"), ("role", role)],
        )
    };
    let flooded = ruststream_tests::wait::poll_for(Duration::from_secs(60), async || {
        let scrape = host.scrape().await.ok()?;
        (throttles(&scrape, "shadow") > 0.0).then_some(scrape)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the shadow was never throttled: {}", tail(&host.output())))?;
    assert_eq!(
        throttles(&flooded, "live"),
        0.0,
        "the live series counted the shadow's"
    );
    assert!(cpu_seconds(&flooded, "neighbour", "shadow") > 0.0);
    host.stop().await?;
    Ok(())
}

/// A fleet: three hosts on one lease table, each running the neighbour and a tenant spinning
/// to its deadline, their shards spread over the three. Every host shares its own cores by
/// tenant, so wherever the neighbour's shards and the spinner's land, no record of the
/// neighbour is trapped, copied or dead-lettered, every host renews its leases on time and
/// loses none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_on_one_lease_table_keep_a_neighbour_whole_beside_a_spinning_tenant()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("cpu-fleet")
        .stream("work", 3)
        .stream("work.dead", 1)
        .stream("work.out", 1)
        .stream("hostile", 6)
        .dynamo()
        .start()
        .await?;
    let tenants = format!("{}{}", neighbour(2_000), spinner("spinner", 1_000));
    let sync = ["--shard-sync-interval", "1000ms"];
    let mut hosts = Vec::new();
    for name in ["a", "b", "c"] {
        std::fs::create_dir_all(fixture.dir().join(name))?;
        let file = fixture.tenants_file(&format!("{name}/tenants.toml"), &tenants)?;
        let host = fixture
            .host(&file)
            .log(&format!("{name}.log"))
            .dynamo_leases()
            .owner(name)
            .args(&sync)
            .start()?;
        hosts.push(host);
    }
    // Balanced: a work shard and two hostile shards each.
    for host in &hosts {
        host.wait_for_log("reading shard", 3).await?;
    }
    let fleet: Vec<&_> = hosts.iter().collect();

    // 6 shards of 1 s spins, thirty each: the neighbour's records and a few lease renewals
    // on every host all happen beside them.
    let spins: Vec<_> = (0..180).map(|id| json!({"id": id})).collect();
    put_json_batch(fixture.client(), "hostile", &spins).await?;
    for host in &hosts {
        host.wait_for_log("spinning forever", 1).await?;
    }
    // Small calls (a tenth of the probe's rounds), far inside the 2 s deadline on its own.
    let jobs: Vec<_> = (1..31)
        .map(|id| json!({"id": id, "work": 5_000_000}))
        .collect();
    put_json_batch(fixture.client(), "work", &jobs).await?;
    latencies_across(&fleet, 1..31).await?;

    // Each host's renewals are counted over a window that opens once its spinner spins and
    // closes only after five more renewals and five more spins, and the spinner must still
    // spin after it: the renewals checked are the ones made beside a spinning tenant. The
    // windows open together, so a host checked last is not judged after its spinner ran out.
    let renewals =
        |scrape: &Scrape| scrape.sum("ruststream_lease_renewal_lateness_seconds_count", &[]);
    let spins = |host: &BinaryHost| host.output().matches("spinning forever").count();
    let mut opened = Vec::new();
    for host in &hosts {
        opened.push((renewals(&host.scrape().await?), spins(host)));
    }
    for ((name, host), (renewed_before, spun_before)) in
        ["a", "b", "c"].iter().zip(&hosts).zip(opened)
    {
        let spins = || spins(host);
        let window = ruststream_tests::wait::poll_for(Duration::from_secs(180), async || {
            let scrape = host.scrape().await.ok()?;
            (renewals(&scrape) >= renewed_before + 5.0 && spins() >= spun_before + 5)
                .then_some(scrape)
        })
        .await;
        let scrape = window.ok_or_else(|| {
            anyhow::anyhow!(
                "host {name} made fewer than five renewals or five spins: {}",
                tail(&host.output())
            )
        })?;
        let spun_within = spins();
        let spun_after = ruststream_tests::wait::poll_for(Duration::from_secs(180), async || {
            (spins() > spun_within).then_some(())
        })
        .await;
        anyhow::ensure!(
            spun_after.is_some(),
            "host {name} stopped spinning before its renewals: {}",
            tail(&host.output())
        );
        assert_eq!(
            failures(&scrape),
            [0.0; 3],
            "host {name}: traps, copies, dead letters of the neighbour: {}",
            tail(&host.output())
        );
        assert!(
            cpu_seconds(&scrape, "spinner", "live") > 0.5,
            "host {name} never ran the spinner"
        );
        assert_eq!(
            scrape.sum("ruststream_leases_lost_total", &[]),
            0.0,
            "host {name} lost a lease"
        );
        let renewals = scrape.sum("ruststream_lease_renewal_lateness_seconds_count", &[]);
        let on_time = scrape.sum(
            "ruststream_lease_renewal_lateness_seconds_bucket",
            &[("le", "0.5")],
        );
        assert_eq!(
            on_time, renewals,
            "host {name}: a renewal started more than 0.5 s late"
        );
    }
    for host in hosts {
        host.stop().await?;
    }
    Ok(())
}
