//! Deploys at fleet scale: hosts whose tenants file names a component bucket record each
//! deploy through any host's admin API in the fleet's desired state (DynamoDB-local), its bytes
//! in S3 (moto), and every host, one started later with an empty state directory included,
//! runs what it records.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ruststream_fleet::desired::{AppId, DesiredTable};
use ruststream_runtime::component::compile::content_hash;
use ruststream_tests::fixture::BinaryHost;
use ruststream_tests::fleet::{Deploys, FleetOf, acme_apps, all_run, put_event};
use ruststream_tests::neighbour::verb;
use ruststream_tests::versioned::handled;
use ruststream_tests::wait::poll_for;
use ruststream_tests::{guests, http};

/// The fleet's desired-state table.
async fn desired(fleet: &FleetOf) -> DesiredTable {
    DesiredTable::new(fleet.fixture.dynamo().client().await, "ruststream.desired")
}

/// What the fleet's judge logs of its verdict to roll back.
const FLEET_VERDICT: &str = "the fleet's judge rolled back the new version on every host";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_through_one_host_reaches_every_host_and_a_host_started_empty()
-> anyhow::Result<()> {
    let mut fleet = FleetOf::start("fleet-deploy", &["a", "b", "c"], Deploys::Fleet).await?;
    let v1 = content_hash(&std::fs::read(guests::VERSIONED_V1.path())?);
    let v2_path = guests::VERSIONED_V2.path().display().to_string();
    let v2 = content_hash(&std::fs::read(&v2_path)?);
    all_run(&fleet.hosts, &v1).await?;

    // Each host's status names every live host reading a subscription (from the presence
    // rows), whatever it holds: what the console's fleet page lists.
    let every_host = poll_for(Duration::from_secs(60), async || {
        let (ok, said) = verb(&fleet.hosts[0], &["status", "--json"]).await.ok()?;
        let status: serde_json::Value = serde_json::from_str(&said).ok().filter(|_| ok)?;
        let subscriptions = status["tenants"][0]["apps"][0]["subscriptions"]
            .as_array()?
            .clone();
        let events = subscriptions.iter().find(|s| s["stream"] == "events")?;
        let hosts = events["hosts"].as_object()?;
        (["a", "b", "c"].iter().all(|h| hosts.contains_key(*h))).then_some(())
    })
    .await;
    anyhow::ensure!(
        every_host.is_some(),
        "a's status never named the three hosts"
    );

    let deploy = ["deploy", "acme", v2_path.as_str(), "--name", "versioned"];
    let (ok, said) = verb(&fleet.hosts[0], &deploy).await?;
    anyhow::ensure!(ok, "deploy through a: {said}");
    let took = all_run(&fleet.hosts, &v2).await?;
    eprintln!("every host ran v2 {took:?} after the deploy was answered");
    // The poll is 2 s; a host then loads (the compile cache is warm) and swaps.
    assert!(
        took < Duration::from_secs(30),
        "every host ran v2 after {took:?}"
    );

    let recorded = desired(&fleet).await;
    let state = recorded.get(&AppId::new("acme", "versioned")).await?;
    let state = state.ok_or_else(|| anyhow::anyhow!("nothing recorded"))?;
    assert_eq!(state.live.map(|live| live.hash), Some(v2.clone()));
    assert_eq!(state.component, "versioned");
    assert_eq!(state.changed_by, "a");
    // Each host's status says what the fleet records and that it runs it.
    for host in &fleet.hosts {
        let (ok, said) = verb(host, &["status", "--json"]).await?;
        anyhow::ensure!(ok, "status: {said}");
        let status: serde_json::Value = serde_json::from_str(&said)?;
        let fleet_version = &status["tenants"][0]["apps"][0]["fleet"];
        assert_eq!(fleet_version["revision"], state.revision, "{said}");
        assert_eq!(fleet_version["live_hash"], v2.as_str(), "{said}");
        assert_eq!(fleet_version["converged"], true, "{said}");
        let (ok, said) = verb(host, &["status"]).await?;
        anyhow::ensure!(ok, "status: {said}");
        assert!(said.contains("the fleet's (revision 1)"), "{said}");
    }
    // ... and what every host of the fleet reported it runs.
    let v2_everywhere = |t: &serde_json::Value| {
        let running = t["apps"][0]["fleet"]["running"].as_array().cloned();
        running
            .unwrap_or_default()
            .iter()
            .filter(|host| host["hash"] == v2.as_str() && host["converged"] == true)
            .count()
            == 3
    };
    all_show(&fleet.hosts, "every host reported on v2", v2_everywhere).await?;
    let (ok, said) = verb(&fleet.hosts[1], &["status"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    assert!(said.contains("fleet hosts: a #"), "{said}");

    // A host that starts with an empty state directory runs what the fleet runs.
    fleet.add_host("d")?;
    fleet.hosts[3]
        .wait_for_log("every tenant is loaded", 1)
        .await?;
    all_run(&fleet.hosts, &v2).await?;
    // ... and lists the versions the fleet keeps, as the host deployed through does: v2 live
    // (uploaded), v1 (the tenants file's) kept for a rollback. Its state directory never
    // held v1 (its tenants file names v1, but it started on v2).
    let short = |hash: &str| format!("#{}", &hash[..12]);
    for host in [&fleet.hosts[0], &fleet.hosts[3]] {
        let (ok, said) = verb(host, &["versions", "acme", "versioned"]).await?;
        anyhow::ensure!(ok, "versions: {said}");
        assert!(
            said.contains("2 version(s) kept by the fleet (every host alike)"),
            "{said}"
        );
        let lines: Vec<&str> = said.lines().collect();
        assert!(
            lines[1].contains(&short(&v2))
                && lines[1].contains("upload")
                && lines[1].ends_with("live"),
            "{said}"
        );
        assert!(
            lines[2].contains(&short(&v1)) && !lines[2].ends_with("live"),
            "{said}"
        );
    }
    // A rollback through it to a version only the fleet kept: its bytes come from the bucket,
    // and every host returns to v1.
    let (ok, said) = verb(
        &fleet.hosts[3],
        &["rollback", "acme", "versioned", "--to", &v1[..10]],
    )
    .await?;
    anyhow::ensure!(ok, "rollback --to through d: {said}");
    all_run(&fleet.hosts, &v1).await?;
    fleet.stop().await
}

/// Two deploys of one app through two hosts at once: each is recorded whole, one after the
/// other or the later refused naming what it raced, and every host ends on the one recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_deploys_through_two_hosts_end_with_every_host_on_the_one_recorded()
-> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-race", &["a", "b", "c"], Deploys::Fleet).await?;
    let v2_path = guests::VERSIONED_V2.path().display().to_string();
    let slow_path = guests::VERSIONED_SLOW.path().display().to_string();
    let v2_deploy = ["deploy", "acme", v2_path.as_str(), "--name", "versioned"];
    let slow_deploy = ["deploy", "acme", slow_path.as_str(), "--name", "versioned"];
    let (first, second) = tokio::join!(
        verb(&fleet.hosts[0], &v2_deploy),
        verb(&fleet.hosts[1], &slow_deploy),
    );
    let (first, second) = (first?, second?);
    assert!(
        first.0 || second.0,
        "one deploy at least: {first:?} {second:?}"
    );
    for (ok, said) in [&first, &second] {
        assert!(
            *ok || said.contains("changed since revision"),
            "a deploy refused says what it raced: {said}"
        );
    }
    let recorded = desired(&fleet).await;
    let state = recorded.get(&AppId::new("acme", "versioned")).await?;
    let live = state.and_then(|state| state.live).map(|live| live.hash);
    let live = live.ok_or_else(|| anyhow::anyhow!("nothing recorded"))?;
    let hashes =
        [&v2_path, &slow_path].map(|path| std::fs::read(path).map(|bytes| content_hash(&bytes)));
    let [v2, slow] = hashes;
    let (v2, slow) = (v2?, slow?);
    assert!(live == v2 || live == slow, "one of the two, whole: {live}");
    all_run(&fleet.hosts, &live).await?;
    fleet.stop().await
}

/// Whether `host` runs component `name` of `acme`.
async fn runs(host: &BinaryHost, name: &str) -> Option<bool> {
    let apps = acme_apps(host).await?;
    Some(apps.iter().any(|app| app["component"] == name))
}

/// Waits until every host of `hosts` says it runs component `name` of `acme` (`running`), or
/// that it does not; `None` after a minute.
async fn all_say(hosts: &[BinaryHost], name: &str, running: bool) -> Option<()> {
    poll_for(Duration::from_secs(60), async || {
        for host in hosts {
            if runs(host, name).await != Some(running) {
                return None;
            }
        }
        Some(())
    })
    .await
}

/// A rollback through one host returns every host to the earlier version (the tenants file's,
/// which the bucket did not have); an upload-only app deployed through one host runs on every
/// host, and its undeploy through another stops it everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_and_an_undeploy_through_one_host_reach_every_host() -> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-rollback", &["a", "b", "c"], Deploys::Fleet).await?;
    let v1 = content_hash(&std::fs::read(guests::VERSIONED_V1.path())?);
    let v2_path = guests::VERSIONED_V2.path().display().to_string();
    let v2 = content_hash(&std::fs::read(&v2_path)?);
    let deploy = ["deploy", "acme", v2_path.as_str(), "--name", "versioned"];
    let (ok, said) = verb(&fleet.hosts[0], &deploy).await?;
    anyhow::ensure!(ok, "deploy through a: {said}");
    all_run(&fleet.hosts, &v2).await?;

    let (ok, said) = verb(&fleet.hosts[1], &["rollback", "acme", "versioned"]).await?;
    anyhow::ensure!(ok, "rollback through b: {said}");
    all_run(&fleet.hosts, &v1).await?;
    let state = desired(&fleet).await;
    let state = state.get(&AppId::new("acme", "versioned")).await?;
    assert_eq!(
        state.and_then(|s| s.live).map(|live| live.hash),
        Some(v1),
        "the rollback is recorded"
    );

    let audit = guests::LEDGER_AUDIT.path().display().to_string();
    let (ok, said) = verb(
        &fleet.hosts[2],
        &["deploy", "acme", &audit, "--name", "extra"],
    )
    .await?;
    anyhow::ensure!(ok, "deploy of extra through c: {said}");
    let everywhere = all_say(&fleet.hosts, "extra", true).await;
    anyhow::ensure!(everywhere.is_some(), "extra did not reach every host");
    let (ok, said) = verb(&fleet.hosts[0], &["undeploy", "acme", "extra"]).await?;
    anyhow::ensure!(ok, "undeploy through a: {said}");
    let nowhere = all_say(&fleet.hosts, "extra", false).await;
    let outputs: Vec<String> = fleet.hosts.iter().map(BinaryHost::output).collect();
    anyhow::ensure!(
        nowhere.is_some(),
        "extra still runs somewhere: {}",
        outputs.join("\n-----\n")
    );
    fleet.stop().await
}

/// A rollout whose new version traps on every record: no host rolls back on its own; the
/// fleet's judge (one host, holding the judge's lease) sums every host's calls, records one
/// verdict, and every host returns to the earlier version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_a_rollout_judge_rolls_back_is_rolled_back_on_every_host() -> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-judged", &["a", "b", "c"], Deploys::Fleet).await?;
    let v1 = content_hash(&std::fs::read(guests::VERSIONED_V1.path())?);
    let trap_path = guests::VERSIONED_TRAP.path().display().to_string();
    let trap = content_hash(&std::fs::read(&trap_path)?);
    for host in &fleet.hosts {
        host.wait_for_log("reading shard", 1).await?;
    }
    let deploy = ["deploy", "acme", trap_path.as_str(), "--name", "versioned"];
    let (ok, said) = verb(&fleet.hosts[0], &deploy).await?;
    anyhow::ensure!(ok, "deploy through a: {said}");
    all_run(&fleet.hosts, &trap).await?;
    // Records for the trapping version to fail on, until a judge rolls it back.
    let mut id = 0u64;
    let judged = poll_for(Duration::from_secs(60), async || {
        id += 1;
        let put = fleet
            .fixture
            .put("events", &serde_json::json!({ "id": id }))
            .await;
        put.ok()?;
        let said = fleet
            .hosts
            .iter()
            .any(|host| host.output().contains(FLEET_VERDICT));
        said.then_some(())
    })
    .await;
    anyhow::ensure!(judged.is_some(), "no judge rolled back");
    all_run(&fleet.hosts, &v1).await?;
    let state = desired(&fleet).await;
    let state = state.get(&AppId::new("acme", "versioned")).await?;
    let state = state.ok_or_else(|| anyhow::anyhow!("nothing recorded"))?;
    assert_eq!(
        state.live.map(|live| live.hash),
        Some(v1),
        "the judge's rollback is the fleet's"
    );
    assert_eq!(state.rollout, None, "the rollout is decided");
    let logs: Vec<String> = fleet.hosts.iter().map(BinaryHost::output).collect();
    let verdicts: usize = logs
        .iter()
        .map(|log| log.matches(FLEET_VERDICT).count())
        .sum();
    assert_eq!(verdicts, 1, "one verdict: {}", logs.join("\n-----\n"));
    assert!(
        logs.iter()
            .all(|log| !log.contains("rolled back to the previous version")),
        "a host rolled back on its own verdict"
    );
    fleet.stop().await
}

/// A deploy through host `a` while records arrive, and host `c` killed (`kill -9`) before it
/// and started again, as a rescheduled pod is, with an empty state directory: every host runs
/// v2 within the poll bound, the host started empty never runs v1, no record is lost, and no
/// record is handled by v1 once every host reports v2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_under_load_with_a_host_killed_and_started_empty_leaves_no_shard_on_v1()
-> anyhow::Result<()> {
    let mut fleet = FleetOf::start("fleet-load", &["a", "b", "c"], Deploys::Fleet).await?;
    let v2_path = guests::VERSIONED_V2.path().display().to_string();
    let v2 = content_hash(&std::fs::read(&v2_path)?);

    let every_log = |hosts: &[BinaryHost]| -> String {
        hosts
            .iter()
            .map(BinaryHost::output)
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Each shard is read (from the tip) before the first record is written.
    fleet.every_shard_read().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn({
        let (kinesis, stop) = (fleet.fixture.client().clone(), stop.clone());
        async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                put_event(&kinesis, n).await?;
                n += 1;
                // The producer's pace, not a wait.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            anyhow::Ok(n)
        }
    });
    // v1 handles on every shard of `events` before anything changes.
    let all_shards_read = poll_for(Duration::from_secs(60), async || {
        let shards: BTreeSet<String> = handled(&every_log(&fleet.hosts))
            .into_iter()
            .map(|h| h.shard)
            .collect();
        (shards.len() == 3).then_some(())
    })
    .await;
    anyhow::ensure!(
        all_shards_read.is_some(),
        "v1 never read every shard: {}",
        every_log(&fleet.hosts)
    );

    fleet.hosts[2].signal("KILL")?;
    let deploy = ["deploy", "acme", v2_path.as_str(), "--name", "versioned"];
    let (ok, said) = verb(&fleet.hosts[0], &deploy).await?;
    anyhow::ensure!(ok, "deploy through a: {said}");
    let answered = Instant::now();
    fleet.add_host("c-again")?;
    let killed = fleet.hosts.remove(2);
    let took = all_run(&fleet.hosts, &v2).await?;
    // What each live host had logged when every host reported v2.
    let converged_at: Vec<usize> = fleet.hosts.iter().map(|h| h.output().len()).collect();
    eprintln!(
        "every live host ran v2 {took:?} after the deploy was answered ({:?} since)",
        answered.elapsed()
    );
    assert!(
        took < Duration::from_secs(30),
        "every host ran v2 after {took:?}"
    );

    // Records keep arriving after the fleet converged, on every shard.
    let more = poll_for(Duration::from_secs(60), async || {
        let after: BTreeSet<String> = (fleet.hosts.iter().zip(&converged_at))
            .flat_map(|(host, at)| handled(&host.output()[*at..]))
            .map(|h| h.shard)
            .collect();
        (after.len() == 3).then_some(())
    })
    .await;
    anyhow::ensure!(
        more.is_some(),
        "not every shard was read after the fleet converged"
    );
    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    let missing = || {
        let seen: BTreeSet<u64> = handled(&(every_log(&fleet.hosts) + &killed.output()))
            .into_iter()
            .map(|h| h.n)
            .collect();
        (0..written)
            .filter(|n| !seen.contains(n))
            .collect::<Vec<_>>()
    };
    let everything = poll_for(Duration::from_secs(90), async || {
        missing().is_empty().then_some(())
    })
    .await;
    anyhow::ensure!(
        everything.is_some(),
        "records lost: {:?} {}",
        missing(),
        every_log(&fleet.hosts)
    );

    // Per record, the version that handled it (kill -9 may hand some over twice).
    let mut by_version: BTreeMap<String, usize> = BTreeMap::new();
    for line in handled(&(every_log(&fleet.hosts) + &killed.output())) {
        *by_version.entry(line.version).or_default() += 1;
    }
    eprintln!("{written} records; handled by version: {by_version:?}");
    for (host, at) in fleet.hosts.iter().zip(&converged_at) {
        let late_v1: Vec<_> = (handled(&host.output()[*at..]).into_iter())
            .filter(|h| h.version == "1")
            .collect();
        assert!(
            late_v1.is_empty(),
            "v1 handled records after the fleet converged: {late_v1:?}"
        );
    }
    let started_empty = fleet.hosts[2].output();
    assert!(
        handled(&started_empty).iter().all(|h| h.version == "2"),
        "the host started empty ran v1: {started_empty}"
    );
    assert!(
        started_empty.contains("started on the fleet's live version"),
        "{started_empty}"
    );
    fleet.stop().await
}

/// `tenant` (`acme`) as `host`'s `status --json` shows it.
async fn acme(host: &BinaryHost) -> Option<serde_json::Value> {
    let (ok, said) = verb(host, &["status", "--json"]).await.ok()?;
    let status: serde_json::Value = serde_json::from_str(&said).ok().filter(|_| ok)?;
    Some(status["tenants"][0].clone())
}

/// Waits until `holds` holds for `acme` on every host of `hosts`; the hosts' logs if not
/// within a minute.
async fn all_show(
    hosts: &[BinaryHost],
    what: &str,
    holds: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<()> {
    let shown = poll_for(Duration::from_secs(60), async || {
        for host in hosts {
            if !acme(host).await.is_some_and(|tenant| holds(&tenant)) {
                return None;
            }
        }
        Some(())
    })
    .await;
    let outputs: Vec<String> = hosts.iter().map(BinaryHost::output).collect();
    anyhow::ensure!(
        shown.is_some(),
        "not every host shows {what}: {}",
        outputs.join("\n-----\n")
    );
    Ok(())
}

/// A pause through one host pauses the tenant on every host and a resume through another
/// resumes it everywhere; a shadow deployed through one host runs beside the live version on
/// every host, its drop through another drops it everywhere, and a promotion through a third
/// makes it live on every host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_a_shadow_through_one_host_reach_every_host() -> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-pause-shadow", &["a", "b", "c"], Deploys::Fleet).await?;
    let hosts = &fleet.hosts;
    let (ok, said) = verb(&hosts[1], &["pause", "acme"]).await?;
    anyhow::ensure!(ok, "pause through b: {said}");
    all_show(hosts, "acme paused", |t| t["paused"] == true).await?;
    let (ok, said) = verb(&hosts[2], &["resume", "acme"]).await?;
    anyhow::ensure!(ok, "resume through c: {said}");
    all_show(hosts, "acme resumed", |t| t["paused"] == false).await?;

    let v2_path = guests::VERSIONED_V2.path().display().to_string();
    let v2 = content_hash(&std::fs::read(&v2_path)?);
    let shadow_of =
        |t: &serde_json::Value| t["apps"][0]["shadow"]["version"]["content_hash"].clone();
    let deploy = [
        "deploy",
        "acme",
        &v2_path,
        "--name",
        "versioned",
        "--shadow",
        "--sample",
        "40",
    ];
    let (ok, said) = verb(&hosts[0], &deploy).await?;
    anyhow::ensure!(ok, "shadow through a: {said}");
    all_show(hosts, "the v2 shadow on 40 %", |t| {
        shadow_of(t) == v2.as_str() && t["apps"][0]["shadow"]["sample_percent"] == 40
    })
    .await?;
    // Records on each shard: every host's status shows the fleet's sum of the comparisons,
    // and each host's part adds up to it.
    for id in 0..9u64 {
        put_event(fleet.fixture.client(), id).await?;
    }
    all_show(hosts, "the fleet's shadow tally of 9 records", |t| {
        let fleet = &t["apps"][0]["fleet"];
        let seen = |counts: &serde_json::Value| {
            ["agree", "disagree", "trap", "skipped"]
                .iter()
                .map(|field| counts[field].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        let parts: u64 = (fleet["hosts"].as_array().into_iter().flatten())
            .map(|host| seen(&host["shadow"]))
            .sum();
        seen(&fleet["shadow"]) == 9 && parts == 9
    })
    .await?;
    let (ok, said) = verb(&hosts[1], &["status"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    assert!(said.contains("fleet shadow "), "{said}");
    let (ok, said) = verb(
        &hosts[1],
        &["deploy", "acme", "--abort-shadow", "versioned"],
    )
    .await?;
    anyhow::ensure!(ok, "shadow dropped through b: {said}");
    all_show(hosts, "no shadow", |t| t["apps"][0]["shadow"].is_null()).await?;

    let (ok, said) = verb(&hosts[2], &deploy).await?;
    anyhow::ensure!(ok, "shadow again through c: {said}");
    all_show(hosts, "the v2 shadow again", |t| {
        shadow_of(t) == v2.as_str()
    })
    .await?;
    let (ok, said) = verb(&hosts[0], &["promote", "acme", "versioned"]).await?;
    anyhow::ensure!(ok, "promote through a: {said}");
    all_run(hosts, &v2).await?;
    all_show(hosts, "v2 live, no shadow", |t| {
        t["apps"][0]["shadow"].is_null()
    })
    .await?;
    let recorded = desired(&fleet).await;
    let state = recorded.get(&AppId::new("acme", "versioned")).await?;
    let state = state.ok_or_else(|| anyhow::anyhow!("nothing recorded"))?;
    assert_eq!(state.live.map(|live| live.hash), Some(v2));
    assert_eq!(state.shadow, None);
    assert!(!state.paused);
    fleet.stop().await
}

/// How many times each record was handled, over every host's log.
fn times_handled(hosts: &[BinaryHost]) -> BTreeMap<u64, usize> {
    let mut times = BTreeMap::new();
    for host in hosts {
        for line in handled(&host.output()) {
            *times.entry(line.n).or_default() += 1;
        }
    }
    times
}

/// A seek through one host moves the shards other hosts hold: a sequence on a shard host `a`
/// does not hold is carried out by its holder, and a seek to the horizon through `c` is
/// carried out by every host on the shards it holds, each record read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_through_one_host_moves_the_shards_every_host_holds() -> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-seek", &["a", "b", "c"], Deploys::Fleet).await?;
    let hosts = &fleet.hosts;
    fleet.every_shard_read().await?;
    fleet.owners_settled(Duration::from_secs(12)).await?;
    for id in 0..6u64 {
        put_event(fleet.fixture.client(), id).await?;
    }
    let once = poll_for(Duration::from_secs(60), async || {
        let times = times_handled(hosts);
        (times.len() == 6).then_some(())
    })
    .await;
    anyhow::ensure!(
        once.is_some(),
        "not every record was handled: {:?}",
        times_handled(hosts)
    );
    // A record handled on a shard host `a` does not hold.
    let elsewhere = (hosts[1..].iter())
        .flat_map(|host| handled(&host.output()))
        .find(|line| {
            !handled(&hosts[0].output())
                .iter()
                .any(|h| h.shard == line.shard)
        })
        .ok_or_else(|| anyhow::anyhow!("host a holds every shard"))?;
    let on_shard: BTreeSet<u64> = (hosts.iter())
        .flat_map(|host| handled(&host.output()))
        .filter(|line| line.shard == elsewhere.shard && line.sequence >= elsewhere.sequence)
        .map(|line| line.n)
        .collect();
    let position = format!("at-sequence:{}:{}", elsewhere.shard, elsewhere.sequence);
    let (ok, said) = verb(
        &hosts[0],
        &["seek", "acme", "versioned", "handle", &position],
    )
    .await?;
    anyhow::ensure!(ok, "seek through a: {said}");
    let again = poll_for(Duration::from_secs(60), async || {
        let times = times_handled(hosts);
        on_shard
            .iter()
            .all(|n| times.get(n) >= Some(&2))
            .then_some(())
    })
    .await;
    let outputs = || {
        hosts
            .iter()
            .map(BinaryHost::output)
            .collect::<Vec<_>>()
            .join("\n-----\n")
    };
    anyhow::ensure!(
        again.is_some(),
        "the holder did not read {on_shard:?} again: {:?} {}",
        times_handled(hosts),
        outputs()
    );

    let (ok, said) = verb(
        &hosts[2],
        &["seek", "acme", "versioned", "handle", "horizon"],
    )
    .await?;
    anyhow::ensure!(ok, "seek through c: {said}");
    let everywhere = poll_for(Duration::from_secs(60), async || {
        let times = times_handled(hosts);
        (0..6u64)
            .all(|n| times.get(&n).copied().unwrap_or(0) >= 2 + usize::from(on_shard.contains(&n)))
            .then_some(())
    })
    .await;
    anyhow::ensure!(
        everywhere.is_some(),
        "not every shard was read again from the horizon: {:?} {}",
        times_handled(hosts),
        outputs()
    );
    fleet.stop().await
}

/// A seek through host `a`, and the host holding one of the shards killed (`kill -9`) at once,
/// before its poll could carry the seek out: the host that takes the shard over moves it, as
/// its lease row says no host did. Every record is read again, and a shard the killed host
/// did not hold is moved once: each of its records is handled exactly twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_moves_the_shards_of_a_host_killed_before_it_carried_it_out() -> anyhow::Result<()> {
    let mut fleet = FleetOf::start("fleet-seek-kill", &["a", "b", "c"], Deploys::Fleet).await?;
    fleet.every_shard_read().await?;
    fleet.owners_settled(Duration::from_secs(12)).await?;
    for id in 0..6u64 {
        put_event(fleet.fixture.client(), id).await?;
    }
    let once = poll_for(Duration::from_secs(60), async || {
        (times_handled(&fleet.hosts).len() == 6).then_some(())
    })
    .await;
    anyhow::ensure!(
        once.is_some(),
        "not every record was handled: {:?}",
        times_handled(&fleet.hosts)
    );
    // The shards `b` and `c` read; the one that reads any is killed.
    let read_by = |host: &BinaryHost| -> BTreeSet<String> {
        handled(&host.output())
            .into_iter()
            .map(|h| h.shard)
            .collect()
    };
    let victim = (1..fleet.hosts.len())
        .find(|&at| !read_by(&fleet.hosts[at]).is_empty())
        .ok_or_else(|| anyhow::anyhow!("host a holds every shard"))?;
    let victim_shards = read_by(&fleet.hosts[victim]);

    let (ok, said) = verb(
        &fleet.hosts[0],
        &["seek", "acme", "versioned", "handle", "horizon"],
    )
    .await?;
    fleet.hosts[victim].signal("KILL")?;
    anyhow::ensure!(ok, "seek through a: {said}");
    let killed = fleet.hosts.remove(victim);
    let logs = |hosts: &[BinaryHost]| {
        hosts
            .iter()
            .chain([&killed])
            .map(BinaryHost::output)
            .collect::<Vec<_>>()
            .join("\n-----\n")
    };
    let counts = || {
        let mut times = BTreeMap::<u64, usize>::new();
        let mut shard_of = BTreeMap::new();
        for line in handled(&logs(&fleet.hosts)) {
            *times.entry(line.n).or_default() += 1;
            shard_of.insert(line.n, line.shard);
        }
        (times, shard_of)
    };
    let again = poll_for(Duration::from_secs(90), async || {
        let (times, _) = counts();
        (0..6u64)
            .all(|n| times.get(&n).copied().unwrap_or(0) >= 2)
            .then_some(())
    })
    .await;
    anyhow::ensure!(
        again.is_some(),
        "the shards of the killed host ({victim_shards:?}) were not read again: {:?}\n{}",
        counts().0,
        logs(&fleet.hosts)
    );
    // Give a second move of a shard the time to show.
    fleet.owners_settled(Duration::from_secs(6)).await?;
    let (times, shard_of) = counts();
    for (n, times) in &times {
        let shard = &shard_of[n];
        anyhow::ensure!(
            victim_shards.contains(shard) || *times == 2,
            "record {n} of shard {shard} was handled {times} times: the seek moved it twice\n{}",
            logs(&fleet.hosts)
        );
    }
    fleet.stop().await
}

/// A tenant token made through host `a` works on hosts `b` and `c` (the fleet's desired-state
/// table keeps it, hashed), as does a console session signed in with it on `a` (a load
/// balancer sends the console's requests to any host); once revoked through `a`, the token and
/// the session are refused by both at their next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_token_made_through_one_host_works_on_every_host_until_revoked()
-> anyhow::Result<()> {
    let fleet = FleetOf::start("fleet-tokens", &["a", "b", "c"], Deploys::Fleet).await?;
    let a = &fleet.hosts[0];
    let (ok, said) = verb(a, &["token", "create", "--tenant", "acme", "--json"]).await?;
    anyhow::ensure!(ok, "token create through a: {said}");
    let made: serde_json::Value = serde_json::from_str(&said)?;
    let (Some(token), Some(id)) = (made["token"].as_str(), made["id"].as_str()) else {
        anyhow::bail!("no token: {said}");
    };
    assert!(
        made["store"]
            .as_str()
            .is_some_and(|s| s.contains("DynamoDB")),
        "{said}"
    );
    // `status` on `host` with the token: whether it was taken, and what was said.
    let status_on = async |host: &BinaryHost| -> anyhow::Result<(bool, String)> {
        let url = format!("http://{}", host.admin_addr().await?);
        let out = std::process::Command::new(ruststream_tests::binary())
            .args(["status", "--json", "--admin", &url])
            .env("RUSTSTREAM_ADMIN_TOKEN", token)
            .env_remove("RUSTSTREAM_STATE_DIR")
            .output()?;
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        Ok((out.status.success(), said))
    };
    for host in &fleet.hosts[1..] {
        let (ok, said) = status_on(host).await?;
        anyhow::ensure!(ok, "status with the token: {said}");
    }
    // The console signed in on `a`, its requests answered by `b` and `c`: a read, and a change
    // with the session's CSRF token (refused without it).
    let (cookie, csrf) = http::console_sign_in(&a.admin_addr().await?, token)?;
    let in_session = async |host: &BinaryHost, method: &str, path: &str, csrf: Option<&str>| {
        let addr = host.admin_addr().await?;
        let mut headers = vec![("Cookie", cookie.as_str())];
        headers.extend(csrf.map(|csrf| ("X-CSRF-Token", csrf)));
        if method == "POST" {
            headers.push(("Content-Type", "application/json"));
        }
        http::request(&addr, method, path, &headers, b"")
    };
    for host in &fleet.hosts[1..] {
        let (code, body) = in_session(host, "GET", "/v1/status", None).await?;
        assert_eq!(code, 200, "the session on another host: {body}");
        assert!(body.contains("\"acme\""), "{body}");
        let pause = "/v1/tenants/acme/pause";
        let (code, body) = in_session(host, "POST", pause, None).await?;
        assert!(code == 403 && body.contains("CSRF"), "{code} {body}");
        let (code, body) = in_session(host, "POST", pause, Some(&csrf)).await?;
        assert_eq!(code, 200, "a change in the session on another host: {body}");
        let resume = "/v1/tenants/acme/resume";
        let (code, body) = in_session(host, "POST", resume, Some(&csrf)).await?;
        assert_eq!(code, 200, "{body}");
    }

    let (ok, said) = verb(a, &["token", "revoke", id]).await?;
    anyhow::ensure!(ok, "revoke through a: {said}");
    for host in &fleet.hosts[1..] {
        let (ok, said) = status_on(host).await?;
        assert!(!ok && said.contains("unknown or was revoked"), "{said}");
        let (code, body) = in_session(host, "GET", "/v1/status", None).await?;
        assert!(code == 401 && body.contains("was revoked"), "{code} {body}");
    }
    fleet.stop().await
}
