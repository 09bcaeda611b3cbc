//! Enhanced fan-out: a subscription with `read = "fan-out"` has its records pushed through a
//! consumer of its app's own (`SubscribeToShard` on kinesis-local), and handles them exactly as
//! a polling one does, without a single GetRecords.

use std::time::Duration;

use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::neighbour::verb;
use ruststream_tests::proxy::RecordingProxy;
use ruststream_tests::wait::poll_for;
use serde_json::json;

/// `tenant` running the auditor on `ledger`, reading it by `read`.
fn auditor(tenant: &str, read: &str) -> String {
    format!(
        r#"
        [[tenants]]
        name = "{tenant}"
        components = ["{audit}"]
        subscribe = ["ledger"]
        read = "{read}"
        "#,
        audit = guests::LEDGER_AUDIT.path().display(),
    )
}

/// The ARN of the fixture's `ledger` stream.
async fn ledger_arn(fixture: &Fixture) -> anyhow::Result<String> {
    let summary = fixture
        .client()
        .describe_stream_summary()
        .stream_name("ledger")
        .send()
        .await?;
    let arn = summary.stream_description_summary().map(|d| d.stream_arn());
    arn.map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no ARN for `ledger`"))
}

/// Waits until `tenant` has handled `count` records on `host`, and returns its GetRecords calls
/// on `ledger`.
async fn handled(host: &BinaryHost, tenant: &str, count: u64) -> anyhow::Result<f64> {
    let done = poll_for(Duration::from_secs(120), async || {
        let scrape = host.scrape().await.ok()?;
        (scrape.sum("ruststream_records_total", &[("tenant", tenant)]) >= count as f64)
            .then(|| scrape.sum("ruststream_get_records_total", &[("stream", "ledger")]))
    })
    .await;
    done.ok_or_else(|| {
        anyhow::anyhow!("{tenant} did not handle {count} records: {}", host.output())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_subscription_is_pushed_every_record_through_its_own_consumer()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("fan-out")
        .stream("ledger", 2)
        .start()
        .await?;
    let host = fixture
        .host(&fixture.tenants(&auditor("fan", "fan-out"))?)
        .start()?;
    host.wait_for_log("reading shard", 2).await?;
    let entries = (0..40).map(|id| json!({ "id": id, "amount": 5 }));
    fixture.put_all("ledger", entries).await?;
    let get_records = handled(&host, "fan", 40).await?;
    assert_eq!(get_records, 0.0, "a fan-out subscription never polls");

    let arn = ledger_arn(&fixture).await?;
    let consumers = fixture
        .client()
        .list_stream_consumers()
        .stream_arn(arn)
        .send()
        .await?;
    let names: Vec<&str> = consumers
        .consumers()
        .iter()
        .map(|c| c.consumer_name())
        .collect();
    assert_eq!(
        names,
        ["ruststream-fan-audit"],
        "one consumer for the app, named from tenant and app"
    );

    let (ok, said) = verb(&host, &["status", "--json"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    let status: serde_json::Value = serde_json::from_str(&said)?;
    let shards: Vec<&serde_json::Value> =
        status["tenants"][0]["apps"][0]["subscriptions"][0]["shards"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
    let modes: Vec<&serde_json::Value> = shards.iter().map(|shard| &shard["read"]).collect();
    assert_eq!(
        modes,
        [&json!("fan-out"); 2],
        "status says how each shard is read: {said}"
    );
    // Each shard's subscription is open, began before now, and reports its lag from the
    // events' `MillisBehindLatest`; the host made no GetRecords call on it.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    for shard in &shards {
        let since = shard["subscribed_since_ms"].as_u64();
        assert!(
            since.is_some_and(|since| since <= now_ms && since + 300_000 > now_ms),
            "a subscription's age, within its five minutes: {shard}"
        );
        assert!(shard["millis_behind_latest"].is_i64(), "lag: {shard}");
        assert!(
            shard["reads"].is_null() || shard["reads"]["get_records_per_second"] == json!(0.0),
            "no GetRecords on a shard read by fan-out: {shard}"
        );
    }
    host.stop().await.map(drop)
}

/// A stream with all the consumers Kinesis allows: the fan-out subscription reads nothing, and
/// says why, naming the stream, the limit and the consumers it found; a polling tenant beside
/// it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_all_its_consumers_refuses_fan_out_naming_them() -> anyhow::Result<()> {
    let fixture = Fixture::builder("fan-out-limit")
        .stream("ledger", 1)
        .start()
        .await?;
    register(&fixture, (0..20).map(|n| format!("native-{n:02}"))).await?;
    let tenants = format!(
        "{}{}",
        auditor("fan", "fan-out"),
        auditor("poll", "polling")
    );
    let host = fixture.host(&fixture.tenants(&tenants)?).start()?;
    host.wait_for_log("most enhanced fan-out consumers Kinesis allows (20", 1)
        .await?;
    let line = host
        .output()
        .lines()
        .find(|line| line.contains("most enhanced fan-out consumers"))
        .map(str::to_owned)
        .unwrap_or_default();
    // The consumers' names come last: a long list is cut in the log, never the rest.
    for named in [
        "`ledger`",
        "allows (20",
        "polling",
        "one of its 20: native-00, native-01",
    ] {
        assert!(line.contains(named), "the refusal names {named}: {line}");
    }
    fixture
        .put_all("ledger", (0..5).map(|id| json!({ "id": id, "amount": 5 })))
        .await?;
    handled(&host, "poll", 5).await?;
    let scrape = host.scrape().await?;
    assert_eq!(
        scrape.sum("ruststream_records_total", &[("tenant", "fan")]),
        0.0,
        "the refused subscription read nothing"
    );
    // It tries again after holds that double, not in a loop: each try registers once.
    let tries = || {
        host.output()
            .matches("most enhanced fan-out consumers")
            .count()
    };
    let before = tries();
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let again = tries() - before;
    assert!(
        again <= 4,
        "a refused subscription retried {again} times in 8 s: it should wait between tries"
    );
    host.stop().await.map(drop)
}

/// Registers consumers of `ledger` named `names`, as a native reader would: a registration
/// Kinesis turns away as busy (five `CREATING` at once) is made again once one is active.
async fn register(fixture: &Fixture, names: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let arn = ledger_arn(fixture).await?;
    for name in names {
        let registered = poll_for(Duration::from_secs(60), async || {
            match fixture
                .client()
                .register_stream_consumer()
                .stream_arn(&arn)
                .consumer_name(&name)
                .send()
                .await
            {
                Ok(_) => Some(Ok(())),
                Err(error)
                    if error
                        .as_service_error()
                        .is_some_and(|e| e.is_limit_exceeded_exception()) =>
                {
                    None
                }
                Err(error) => Some(Err(error)),
            }
        })
        .await;
        registered.ok_or_else(|| anyhow::anyhow!("`{name}` was never registered"))??;
    }
    Ok(())
}

/// A stream busy registering (five consumers `CREATING`, as when several apps start reading
/// it together): Kinesis turns the apps' registrations away with the `LimitExceededException`
/// it answers a full stream with. Each is made again once the stream has room: every app
/// reads, and none is told the stream is full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_turned_away_as_busy_are_made_again_and_never_called_a_full_stream()
-> anyhow::Result<()> {
    const CREATING: Duration = Duration::from_secs(6);
    let fixture = Fixture::builder("fan-out-busy")
        .stream("ledger", 1)
        .consumers_creating_for(CREATING)
        .start()
        .await?;
    let arn = ledger_arn(&fixture).await?;
    for n in 0..5 {
        fixture
            .client()
            .register_stream_consumer()
            .stream_arn(&arn)
            .consumer_name(format!("native-{n}"))
            .send()
            .await?;
    }
    let tenants = ["fan0", "fan1", "fan2"];
    let file: String = tenants.iter().map(|t| auditor(t, "fan-out")).collect();
    let host = fixture.host(&fixture.tenants(&file)?).start()?;
    let active = poll_for(Duration::from_secs(120), async || {
        let listed = fixture
            .client()
            .list_stream_consumers()
            .stream_arn(&arn)
            .send()
            .await
            .ok()?;
        let active = listed
            .consumers()
            .iter()
            .filter(|c| c.consumer_status() == &aws_sdk_kinesis::types::ConsumerStatus::Active)
            .count();
        (active == 5 + tenants.len()).then_some(())
    })
    .await;
    anyhow::ensure!(
        active.is_some(),
        "not every app registered a consumer: {:?}\n{}",
        consumers(&fixture).await?,
        host.output()
    );
    host.wait_for_log("reading shard", tenants.len()).await?;
    fixture
        .put_all("ledger", (0..5).map(|id| json!({ "id": id, "amount": 5 })))
        .await?;
    for tenant in tenants {
        handled(&host, tenant, 5).await?;
    }
    let output = host.output();
    assert!(
        !output.contains("most enhanced fan-out consumers"),
        "a busy registration was reported as a full stream: {output}"
    );
    host.stop().await.map(drop)
}

/// The consumers of `ledger`, by name.
async fn consumers(fixture: &Fixture) -> anyhow::Result<Vec<String>> {
    let listed = fixture
        .client()
        .list_stream_consumers()
        .stream_arn(ledger_arn(fixture).await?)
        .send()
        .await?;
    let mut names: Vec<String> = listed
        .consumers()
        .iter()
        .map(|c| c.consumer_name().to_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// An app undeployed for good gives its fan-out consumer up, once no host of the fleet runs
/// it: undeployed on one of two hosts it is kept (the other still reads through it), on the
/// last one it is deregistered; the tenant's other app keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeployed_app_s_consumer_is_deregistered_once_no_host_runs_it() -> anyhow::Result<()> {
    let fixture = Fixture::builder("fan-out-undeploy")
        .stream("ledger", 1)
        .stream("ledger.dead", 1)
        .dynamo()
        .start()
        .await?;
    let tenants = format!(
        r#"
        [[tenants]]
        name = "fan"
        components = ["{shared}"]
        subscribe = ["ledger"]
        publish = ["ledger.dead"]
        read = "fan-out"
        "#,
        shared = guests::SHARED_LEDGER.path().display(),
    );
    let mut hosts = Vec::new();
    for owner in ["a", "b"] {
        // A tenants file (and so a state directory) of each host's own.
        std::fs::create_dir_all(fixture.dir().join(owner))?;
        let file = fixture.tenants_file(&format!("{owner}/tenants.toml"), &tenants)?;
        let host = fixture
            .host(&file)
            .log(&format!("{owner}.log"))
            .dynamo_leases()
            .owner(owner)
            .start()?;
        hosts.push(host);
    }
    let audit = guests::LEDGER_AUDIT.path().display().to_string();
    for host in &hosts {
        host.wait_for_log("every tenant is loaded", 1).await?;
        let (ok, said) = verb(host, &["deploy", "fan", &audit, "--name", "extra"]).await?;
        anyhow::ensure!(ok, "deploy: {said}");
    }
    let registered = poll_for(Duration::from_secs(60), async || {
        let names = consumers(&fixture).await.ok()?;
        names
            .contains(&"ruststream-fan-audit".to_owned())
            .then_some(names)
    })
    .await;
    let before = registered.ok_or_else(|| anyhow::anyhow!("the app's consumer never came"))?;
    assert_eq!(
        before.len(),
        3,
        "the audit app's and the shared app's two: {before:?}"
    );

    let (ok, said) = verb(&hosts[0], &["undeploy", "fan", "extra"]).await?;
    anyhow::ensure!(ok, "undeploy on a: {said}");
    hosts[0]
        .wait_for_log(
            "the enhanced fan-out consumer is kept: other hosts run the app",
            1,
        )
        .await?;
    assert_eq!(
        consumers(&fixture).await?,
        before,
        "b still reads through it"
    );

    let (ok, said) = verb(&hosts[1], &["undeploy", "fan", "extra"]).await?;
    anyhow::ensure!(ok, "undeploy on b: {said}");
    hosts[1]
        .wait_for_log("deregistered the app's enhanced fan-out consumer", 1)
        .await?;
    // Kinesis lists a consumer as DELETING for a while after it is deregistered.
    let expected: Vec<String> = (before.iter())
        .filter(|name| *name != "ruststream-fan-audit")
        .cloned()
        .collect();
    let gone = poll_for(Duration::from_secs(60), async || {
        (consumers(&fixture).await.ok()? == expected).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "only the undeployed app's consumer goes: {:?}",
        consumers(&fixture).await
    );
    for host in hosts {
        host.stop().await?;
    }
    Ok(())
}

/// `fan` running the auditor on a one-shard `ledger` by fan-out, with `args`, reaching
/// kinesis-local through a recording proxy that `prepare` sets up first.
async fn behind_proxy(
    name: &str,
    prepare: impl FnOnce(&RecordingProxy),
    args: &[&str],
) -> anyhow::Result<(Fixture, RecordingProxy, BinaryHost)> {
    let fixture = Fixture::builder(name).stream("ledger", 1).start().await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    prepare(&proxy);
    let host = fixture
        .host(&fixture.tenants(&auditor("fan", "fan-out"))?)
        .kinesis_endpoint(&proxy.endpoint())
        .args(args)
        .start()?;
    Ok((fixture, proxy, host))
}

/// Kinesis ends every subscription after five minutes; here a proxy ends each after two
/// seconds, cleanly between two events. Each is made again from the last event's
/// continuation: every record put across the renewals is handled once (none skipped, none
/// twice), and no renewal is taken for a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_the_server_ends_is_made_again_from_its_continuation() -> anyhow::Result<()>
{
    let (fixture, proxy, host) = behind_proxy(
        "fan-out-renewal",
        |proxy| proxy.end_subscriptions_after(Duration::from_secs(2)),
        &[],
    )
    .await?;
    host.wait_for_log("reading shard", 1).await?;
    // At least eight rounds, and on until two subscriptions ended while records came: on a
    // loaded machine a renewal can take longer than the rounds.
    const ROUNDS: u64 = 8;
    const MOST_ROUNDS: u64 = 60;
    const PER_ROUND: u64 = 6;
    let mut rounds = 0;
    while rounds < ROUNDS || (proxy.subscriptions_ended() < 2 && rounds < MOST_ROUNDS) {
        let ids = rounds * PER_ROUND..(rounds + 1) * PER_ROUND;
        fixture
            .put_all("ledger", ids.map(|id| json!({ "id": id, "amount": 5 })))
            .await?;
        // The producer's pace, not a wait.
        tokio::time::sleep(Duration::from_millis(700)).await;
        rounds += 1;
    }
    let total = rounds * PER_ROUND;
    let get_records = handled(&host, "fan", total).await?;
    assert_eq!(get_records, 0.0, "renewed by subscribing, never by polling");
    // Two more renewals after the last record: anything handed twice would have come by now.
    let ended = proxy.subscriptions_ended();
    let renewed = poll_for(Duration::from_secs(30), async || {
        (proxy.subscriptions_ended() >= ended + 2).then_some(())
    })
    .await;
    assert!(
        renewed.is_some(),
        "subscriptions stopped being renewed: {}",
        host.output()
    );
    assert!(ended >= 2, "the records spanned renewals: {ended} ended");
    let scrape = host.scrape().await?;
    assert_eq!(
        scrape.sum("ruststream_records_total", &[("tenant", "fan")]),
        total as f64,
        "each record handled once across the renewals"
    );
    let subscriptions = proxy.calls("SubscribeToShard");
    for renewal in &subscriptions[1..] {
        assert!(
            renewal.body.contains("AFTER_SEQUENCE_NUMBER"),
            "a renewal starts after the last event's continuation: {}",
            renewal.body
        );
    }
    let output = host.output();
    assert!(
        !output.contains("subscribing to the shard failed"),
        "an ended subscription is renewed, not failed: {output}"
    );
    host.stop().await.map(drop)
}

/// A tenant whose identity may not subscribe (IAM denies `SubscribeToShard`) reads nothing,
/// says so naming tenant, stream and action, holds back instead of subscribing in a loop, and
/// reads every record once allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_subscription_iam_denies_says_why_holds_back_and_reads_once_allowed()
-> anyhow::Result<()> {
    let (fixture, proxy, host) = behind_proxy(
        "fan-out-denied",
        |proxy| proxy.deny_unless_signed_by(&["SubscribeToShard"], &[]),
        &["--shard-sync-interval", "1000ms"],
    )
    .await?;
    host.wait_for_log("may not read `ledger`: SubscribeToShard", 1)
        .await?;
    let line = host
        .output()
        .lines()
        .find(|line| line.contains("may not read `ledger`: SubscribeToShard"))
        .map(str::to_owned)
        .unwrap_or_default();
    for named in ["tenant `fan`", "`ledger`", "kinesis:SubscribeToShard"] {
        assert!(line.contains(named), "the denial names {named}: {line}");
    }
    fixture
        .put_all("ledger", (0..6).map(|id| json!({ "id": id, "amount": 5 })))
        .await?;
    let before = proxy.denied("SubscribeToShard");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let tries = proxy.denied("SubscribeToShard") - before;
    assert!(
        (1..=3).contains(&tries),
        "a denied subscription tries again after a hold that doubles, not every round: \
         {tries} tries in 8 s"
    );
    let scrape = host.scrape().await?;
    assert_eq!(
        scrape.sum("ruststream_records_total", &[("tenant", "fan")]),
        0.0,
        "denied, it read nothing"
    );
    let (ok, said) = verb(&host, &["status", "--json"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    assert!(
        said.contains("tenant `fan` may not read `ledger`: SubscribeToShard"),
        "the status says why: {said}"
    );

    proxy.clear_denials();
    handled(&host, "fan", 6).await?;
    host.stop().await.map(drop)
}

/// A consumer deregistered by hand while an app reads through it: its next subscription is
/// refused (`ResourceNotFoundException`), the host registers the consumer again, under the same
/// name, and reads on from its checkpoint. Subscriptions are ended every two seconds (a proxy,
/// as Kinesis does after five minutes), since kinesis-local keeps pushing an open subscription
/// of a consumer it no longer lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_deregistered_under_a_subscription_is_registered_again() -> anyhow::Result<()> {
    let (fixture, proxy, host) = behind_proxy(
        "fan-out-reregister",
        |proxy| proxy.end_subscriptions_after(Duration::from_secs(2)),
        &[],
    )
    .await?;
    host.wait_for_log("reading shard", 1).await?;
    fixture
        .put_all("ledger", (0..6).map(|id| json!({ "id": id, "amount": 5 })))
        .await?;
    handled(&host, "fan", 6).await?;
    let registrations = proxy.calls("RegisterStreamConsumer").len();

    fixture
        .client()
        .deregister_stream_consumer()
        .stream_arn(ledger_arn(&fixture).await?)
        .consumer_name("ruststream-fan-audit")
        .send()
        .await?;
    host.wait_for_log("no longer exists; registering it again", 1)
        .await?;
    let again = poll_for(Duration::from_secs(60), async || {
        let names = consumers(&fixture).await.ok()?;
        names
            .contains(&"ruststream-fan-audit".to_owned())
            .then_some(())
    })
    .await;
    assert!(
        again.is_some(),
        "the consumer was not registered again: {}",
        host.output()
    );
    assert!(
        proxy.calls("RegisterStreamConsumer").len() > registrations,
        "registered again by the host"
    );
    fixture
        .put_all("ledger", (6..12).map(|id| json!({ "id": id, "amount": 5 })))
        .await?;
    handled(&host, "fan", 12).await?;
    host.stop().await.map(drop)
}
