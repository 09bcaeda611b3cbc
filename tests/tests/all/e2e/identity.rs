//! Tenants' AWS identities: a tenant with a `role_arn` reads, checkpoints and keeps its leases
//! with credentials from STS `AssumeRole` (moto's STS server on loopback), the others with the
//! host's own, which come from the AWS default chain (a `credential_process` here). Kinesis and DynamoDB sit behind recording proxies that note the access key each
//! request was signed with, since the local servers do not check signatures themselves.

use std::collections::BTreeSet;
use std::time::Duration;

use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::neighbour::verb;
use ruststream_tests::proxy::{RecordingProxy, SignedRequest};
use ruststream_tests::scrape::Scrape;
use ruststream_tests::servers::AssumedRole;
use ruststream_tests::wait::poll_for;
use serde_json::json;

const ALPHA_ROLE: &str = "arn:aws:iam::123456789012:role/tenants/alpha";
const BETA_ROLE: &str = "arn:aws:iam::123456789012:role/tenants/beta";
/// What `run_host` gives the host as its own credentials.
const HOST_KEY: &str = "test";
const ENTRIES: u64 = 12;

/// `alpha` and `beta` assume roles (alpha with an external id), `gamma` does not; all three
/// run the auditor on `ledger`.
fn tenants() -> String {
    format!(
        r#"
        [[tenants]]
        name = "alpha"
        components = ["{audit}"]
        subscribe = ["ledger"]
        role_arn = "{ALPHA_ROLE}"
        external_id = "alpha-ext"

        [[tenants]]
        name = "beta"
        components = ["{audit}"]
        subscribe = ["ledger"]
        role_arn = "{BETA_ROLE}"

        [[tenants]]
        name = "gamma"
        components = ["{audit}"]
        subscribe = ["ledger"]
        "#,
        audit = guests::LEDGER_AUDIT.path().display(),
    )
}

/// The three tenants' host (see [`tenants`]), leases in DynamoDB, reaching Kinesis, DynamoDB
/// and STS at these endpoints.
fn start_tenants(
    fixture: &Fixture,
    kinesis: &str,
    dynamo: &str,
    sts: &str,
) -> anyhow::Result<BinaryHost> {
    fixture
        .host(&fixture.tenants(&tenants())?)
        .dynamo_leases()
        .kinesis_endpoint(kinesis)
        .dynamo_endpoint(dynamo)
        .args(&["--sts-endpoint", sts])
        .start()
}

/// Scrapes the host's metrics until each of `tenants` has handled [`ENTRIES`] records, for at
/// most a minute.
async fn wait_handled(host: &BinaryHost, tenants: &[&str]) -> anyhow::Result<()> {
    let handled = |s: &Scrape| {
        tenants.iter().all(|tenant| {
            s.sum("ruststream_records_total", &[("tenant", tenant)]) == ENTRIES as f64
        })
    };
    let done = poll_for(Duration::from_secs(60), async || {
        match host.scrape().await {
            Ok(scraped) => handled(&scraped).then_some(Ok(())),
            Err(error) => Some(Err(error)),
        }
    })
    .await;
    done.unwrap_or_else(|| {
        let output = host.output();
        anyhow::bail!("not every tenant of {tenants:?} handled every record: {output}")
    })
}

/// The access keys of the sessions STS handed out as `session`.
fn keys_of(sessions: &[AssumedRole], session: &str) -> BTreeSet<String> {
    sessions
        .iter()
        .filter(|s| s.session_name == session)
        .map(|s| s.access_key_id.clone())
        .collect()
}

/// The keys that signed the requests whose body mentions `needle`.
fn signers(requests: &[SignedRequest], needle: &str) -> BTreeSet<String> {
    requests
        .iter()
        .filter(|r| r.body.contains(needle))
        .map(|r| r.access_key_id.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_s_calls_run_with_its_own_role() -> anyhow::Result<()> {
    let fixture = Fixture::builder("identity")
        .stream("ledger", 1)
        .dynamo()
        .sts()
        .start()
        .await?;
    let kinesis_proxy =
        RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    let dynamo_proxy =
        RecordingProxy::start(&format!("127.0.0.1:{}", fixture.dynamo().port())).await?;
    let host = start_tenants(
        &fixture,
        &kinesis_proxy.endpoint(),
        &dynamo_proxy.endpoint(),
        &fixture.sts().endpoint(),
    )?;
    host.wait_for_log("reading shard", 3).await?;
    fixture.put_all("ledger", entries()).await?;
    wait_handled(&host, &["alpha", "beta", "gamma"]).await?;

    let sessions = fixture.sts().assumed_roles().await?;
    let alpha = keys_of(&sessions, "ruststream-alpha");
    let beta = keys_of(&sessions, "ruststream-beta");
    assert_eq!(alpha.len(), 1, "one session for alpha: {sessions:?}");
    assert_eq!(beta.len(), 1, "one session for beta: {sessions:?}");
    for session in &sessions {
        let (role, external_id) = match session.session_name.as_str() {
            "ruststream-alpha" => (ALPHA_ROLE, Some("alpha-ext")),
            "ruststream-beta" => (BETA_ROLE, None),
            other => panic!("a session nobody should have asked for: {other}"),
        };
        assert_eq!(session.role_arn, role);
        assert_eq!(session.external_id.as_deref(), external_id);
    }

    // Every lease-table call of a tenant is signed with its own key, and only with it.
    let leases = dynamo_proxy.requests();
    let host_key = BTreeSet::from([HOST_KEY.to_owned()]);
    assert_eq!(signers(&leases, "\"ruststream-alpha-"), alpha);
    assert_eq!(signers(&leases, "\"ruststream-beta-"), beta);
    assert_eq!(signers(&leases, "\"ruststream-gamma-"), host_key);

    // Each tenant read the stream with its own key; no other key was used.
    let reads = kinesis_proxy.requests();
    for key in alpha.iter().chain(&beta).chain(&host_key) {
        for call in ["GetShardIterator", "GetRecords"] {
            assert!(
                reads
                    .iter()
                    .any(|r| &r.access_key_id == key && r.target.ends_with(call)),
                "no {call} signed by {key}"
            );
        }
    }
    let used: BTreeSet<String> = reads.iter().map(|r| r.access_key_id.clone()).collect();
    let expected: BTreeSet<String> = alpha.union(&beta).chain(&host_key).cloned().collect();
    assert_eq!(used, expected);
    host.stop().await.map(drop)
}

/// The entries every test writes to `ledger`.
fn entries() -> impl Iterator<Item = serde_json::Value> {
    (0..ENTRIES).map(|id| json!({ "id": id, "amount": 10 }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_cannot_be_assumed_leaves_the_other_tenants_running() -> anyhow::Result<()> {
    let fixture = Fixture::builder("identity-refused")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    // Nothing listens there: STS cannot be reached.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let host = start_tenants(
        &fixture,
        &fixture.kinesis.endpoint(),
        &fixture.dynamo().endpoint(),
        &format!("http://{closed}"),
    )?;
    host.wait_until(Duration::from_secs(120), "a partial start", |log| {
        log.contains("partial start")
    })
    .await?;
    let log_text = host.output();
    let partial = log_text
        .lines()
        .find(|line| line.contains("partial start"))
        .unwrap_or_default();
    for (tenant, role) in [("alpha", ALPHA_ROLE), ("beta", BETA_ROLE)] {
        // Named as `check --config` names it: the tenant, then where the file lists it.
        let refusal = format!("tenant `{tenant}`, config file ");
        let reason = format!("ledger_audit.wasm\": cannot assume role `{role}`");
        assert!(partial.contains(&refusal), "no `{refusal}` in: {partial}");
        assert!(partial.contains(&reason), "no `{reason}` in: {partial}");
    }
    host.wait_for_log("reading shard", 1).await?;
    let output = host.stop().await?;
    let readers: Vec<&str> = output
        .lines()
        .filter(|line| line.contains("reading shard"))
        .collect();
    assert!(
        readers.iter().all(|line| line.contains("tenant=gamma")),
        "only gamma reads: {readers:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_s_credentials_can_come_from_a_credential_process() -> anyhow::Result<()> {
    let fixture = Fixture::builder("identity-process")
        .stream("ledger", 1)
        .start()
        .await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    let dir = fixture.dir();
    let script = dir.join("credentials.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s' '{\"Version\": 1, \"AccessKeyId\": \"PROCESSKEY\", \
         \"SecretAccessKey\": \"process-secret\"}'\n",
    )?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let aws_config = dir.join("aws-config");
    std::fs::write(
        &aws_config,
        format!("[default]\ncredential_process = {}\n", script.display()),
    )?;
    let tenants = fixture.tenants(&format!(
        "[[tenants]]\nname = \"solo\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
        guests::LEDGER_AUDIT.path().display()
    ))?;
    let no_credentials = dir.join("no-credentials");
    let host = fixture
        .host(&tenants)
        .kinesis_endpoint(&proxy.endpoint())
        .adjust(move |command| {
            for key in [
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_PROFILE",
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            ] {
                command.env_remove(key);
            }
            command
                .env("AWS_CONFIG_FILE", &aws_config)
                .env("AWS_SHARED_CREDENTIALS_FILE", no_credentials)
                // The chain never reaches instance metadata (a non-loopback address) here.
                .env("AWS_EC2_METADATA_DISABLED", "true");
        })
        .start()?;
    host.wait_for_log("reading shard", 1).await?;
    fixture.put_all("ledger", entries()).await?;
    wait_handled(&host, &["solo"]).await?;
    let signers: BTreeSet<String> = proxy
        .requests()
        .into_iter()
        .map(|r| r.access_key_id)
        .collect();
    assert_eq!(signers, BTreeSet::from(["PROCESSKEY".to_owned()]));
    host.stop().await.map(drop)
}

/// `alpha`'s subscription error in the host's status (`None` while it has none).
async fn alpha_error(host: &BinaryHost) -> anyhow::Result<Option<String>> {
    let (ok, said) = verb(host, &["status", "--json"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    let status: serde_json::Value = serde_json::from_str(&said)?;
    let alpha = status["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|tenant| tenant["name"] == "alpha");
    let error = alpha.map(|t| &t["apps"][0]["subscriptions"][0]["error"]);
    Ok(error.and_then(|e| e.as_str()).map(str::to_owned))
}

/// Waits until alpha's status error names `action`, and returns it.
async fn alpha_denied(host: &BinaryHost, action: &str) -> anyhow::Result<String> {
    let said = poll_for(Duration::from_secs(60), async || {
        alpha_error(host)
            .await
            .ok()
            .flatten()
            .filter(|e| e.contains(&format!("kinesis:{action}")))
    })
    .await;
    said.ok_or_else(|| anyhow::anyhow!("alpha's status never named {action}: {}", host.output()))
}

/// A tenant whose role IAM does not let read the stream reads nothing and says why, naming
/// the tenant, the stream and the action, in its status and in one log line per reason; the
/// tenant beside it reads on. Denied its listing it takes no lease; allowed to list but denied
/// its reads, it holds its leases back (no take and release every round). Once its policy
/// allows it, it reads every record, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_iam_denies_reads_nothing_says_why_and_reads_once_allowed() -> anyhow::Result<()> {
    let fixture = Fixture::builder("identity-denied")
        .stream("ledger", 1)
        .dynamo()
        .sts()
        .start()
        .await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    // Only the host's own key may read: the tenants' roles may not.
    proxy.deny_unless_signed_by(
        &["ListShards", "GetShardIterator", "GetRecords"],
        &[HOST_KEY],
    );
    // alpha and beta read with roles of their own, which IAM denies; gamma with the host's.
    let host = fixture
        .host(&fixture.tenants(&tenants())?)
        .dynamo_leases()
        .kinesis_endpoint(&proxy.endpoint())
        .args(&["--sts-endpoint", &fixture.sts().endpoint()])
        // A round a second: a denied identity retried every round would show.
        .args(&["--shard-sync-interval", "1000ms"])
        .start()?;
    host.wait_for_log("reading shard", 1).await?;
    fixture.put_all("ledger", entries()).await?;
    wait_handled(&host, &["gamma"]).await?;

    // Denied its listing: the error names tenant, stream and action; no lease is taken.
    let listing = alpha_denied(&host, "ListShards").await?;
    assert!(
        listing.starts_with("tenant `alpha` may not read `ledger`: ListShards on `ledger`"),
        "{listing}"
    );
    let said = |what: &str| host.output().lines().filter(|l| l.contains(what)).count();
    assert_eq!(said("nothing is read: tenant `alpha`"), 1, "said once");
    assert_eq!(proxy.denied("GetShardIterator"), 0, "no lease was taken");

    // Allowed to list, denied its reads: it takes the lease, is denied, and holds back. Its
    // shard opens at the tip, pinned a second before it is taken: the entries above are
    // more than that before, so alpha's records are exactly the ones put later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.clear_denials();
    proxy.deny_unless_signed_by(&["GetShardIterator", "GetRecords"], &[HOST_KEY]);
    let reading = alpha_denied(&host, "GetShardIterator").await?;
    assert!(
        reading.starts_with("tenant `alpha` may not read `ledger`: GetShardIterator on `ledger`/"),
        "{reading}"
    );
    let alpha = keys_of(&fixture.sts().assumed_roles().await?, "ruststream-alpha");
    let alpha_tries = || {
        let calls = proxy.calls("GetShardIterator");
        let alpha_s = calls.iter().filter(|c| alpha.contains(&c.access_key_id));
        alpha_s.filter(|c| c.denied).count()
    };
    let held_from = alpha_tries();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let tries = alpha_tries() - held_from;
    assert!(
        (1..=3).contains(&tries),
        "a denied identity tries again after a hold that doubles (1-2 s, 2-4 s, 4-8 s), not \
         every round: {tries} tries in 8 s"
    );

    // Allowed: alpha reads every record put since it opened, and its error is gone.
    proxy.clear_denials();
    let later = (ENTRIES..2 * ENTRIES).map(|id| json!({ "id": id, "amount": 10 }));
    fixture.put_all("ledger", later).await?;
    let handled = poll_for(Duration::from_secs(60), async || {
        let scrape = host.scrape().await.ok()?;
        let of = |tenant| scrape.sum("ruststream_records_total", &[("tenant", tenant)]);
        let denied_then = of("alpha") == ENTRIES as f64 && of("beta") == ENTRIES as f64;
        (denied_then && of("gamma") == 2.0 * ENTRIES as f64).then_some(())
    })
    .await;
    assert!(
        handled.is_some(),
        "alpha did not read on: {}",
        host.output()
    );
    let cleared = poll_for(Duration::from_secs(30), async || {
        matches!(alpha_error(&host).await, Ok(None)).then_some(())
    })
    .await;
    assert!(cleared.is_some(), "alpha's error stayed: {}", host.output());
    host.stop().await.map(drop)
}
