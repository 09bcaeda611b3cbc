//! Tenants' AWS identities: a tenant with a `role_arn` reads, checkpoints and keeps its leases
//! with credentials from STS `AssumeRole` (moto's STS server on loopback), the others with the
//! host's own, which come from the AWS default chain (a `credential_process` here). Kinesis and DynamoDB sit behind recording proxies that note the access key each
//! request was signed with, since the local servers do not check signatures themselves.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ruststream_tests::e2e::put_json;
use ruststream_tests::guests;
use ruststream_tests::http::http;
use ruststream_tests::process::{Running, host_command, metrics_addr, run_host_at};
use ruststream_tests::proxy::{RecordingProxy, SignedRequest};
use ruststream_tests::scrape::Scrape;
use ruststream_tests::servers::{AssumedRole, LocalDynamo, LocalKinesis, LocalSts};
use ruststream_tests::wait::{eventually, poll_for};
use serde_json::json;

const ALPHA_ROLE: &str = "arn:aws:iam::123456789012:role/tenants/alpha";
const BETA_ROLE: &str = "arn:aws:iam::123456789012:role/tenants/beta";
/// What `run_host` gives the host as its own credentials.
const HOST_KEY: &str = "test";
const ENTRIES: u64 = 12;

/// `alpha` and `beta` assume roles (alpha with an external id), `gamma` does not; all three
/// run the auditor on `ledger`, leases in DynamoDB.
fn write_config(dir: &Path) -> anyhow::Result<PathBuf> {
    let config = dir.join("tenants.toml");
    let audit = guests::LEDGER_AUDIT.path();
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            lease_store = "dynamodb"
            create_lease_table = true

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
            audit = audit.display(),
        ),
    )?;
    Ok(config)
}

/// The three tenants' host (see [`write_config`]) in scratch directory `name`, against these
/// endpoints; returns it with its log's path.
fn start_tenants(
    name: &str,
    kinesis: &str,
    dynamo: &str,
    sts: &str,
) -> anyhow::Result<(Running, PathBuf)> {
    let dir = scratch(name)?;
    let config = write_config(&dir)?;
    let log = dir.join("host.log");
    let args = ["--dynamodb-endpoint", dynamo, "--sts-endpoint", sts];
    Ok((run_host_at(&config, kinesis, &log, &args)?, log))
}

fn scratch(name: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ruststream-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn scrape(log: &Path) -> anyhow::Result<Scrape> {
    let output = || std::fs::read_to_string(log).unwrap_or_default();
    let addr = poll_for(Duration::from_secs(30), async || metrics_addr(&output()))
        .await
        .ok_or_else(|| anyhow::anyhow!("no metrics endpoint: {}", output()))?;
    let (status, body) =
        tokio::task::spawn_blocking(move || http(&addr, "GET", "/metrics", b"")).await??;
    anyhow::ensure!(status == 200, "GET /metrics: {status} {body}");
    Scrape::parse(&body)
}

/// Scrapes the host's metrics until each of `tenants` has handled [`ENTRIES`] records, for at
/// most a minute.
async fn wait_handled(log: &Path, tenants: &[&str]) -> anyhow::Result<()> {
    let handled = |s: &Scrape| {
        tenants.iter().all(|tenant| {
            s.sum("ruststream_records_total", &[("tenant", tenant)]) == ENTRIES as f64
        })
    };
    let done = poll_for(Duration::from_secs(60), async || match scrape(log).await {
        Ok(scraped) => handled(&scraped).then_some(Ok(())),
        Err(error) => Some(Err(error)),
    })
    .await;
    done.unwrap_or_else(|| {
        let output = std::fs::read_to_string(log).unwrap_or_default();
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
    let (kinesis, dynamo, sts) = tokio::try_join!(
        LocalKinesis::start(),
        LocalDynamo::start(),
        LocalSts::start()
    )?;
    let kinesis_proxy = RecordingProxy::start(&format!("127.0.0.1:{}", kinesis.port())).await?;
    let dynamo_proxy = RecordingProxy::start(&format!("127.0.0.1:{}", dynamo.port())).await?;
    kinesis.create_stream("ledger", 1).await?;
    let (host, log) = start_tenants(
        "identity",
        &kinesis_proxy.endpoint(),
        &dynamo_proxy.endpoint(),
        &sts.endpoint(),
    )?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let reading = eventually(Duration::from_secs(60), || {
        output().matches("reading shard").count() >= 3
    })
    .await;
    anyhow::ensure!(reading, "shards never opened: {}", output());

    let client = kinesis.client().await;
    for id in 0..ENTRIES {
        put_json(&client, "ledger", &json!({ "id": id, "amount": 10 }), None).await?;
    }
    wait_handled(&log, &["alpha", "beta", "gamma"]).await?;

    let sessions = sts.assumed_roles().await?;
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
    stop(host, &log).await.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_cannot_be_assumed_leaves_the_other_tenants_running() -> anyhow::Result<()> {
    let (kinesis, dynamo) = tokio::try_join!(LocalKinesis::start(), LocalDynamo::start())?;
    kinesis.create_stream("ledger", 1).await?;
    // Nothing listens there: STS cannot be reached.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let (host, log) = start_tenants(
        "identity-refused",
        &kinesis.endpoint(),
        &dynamo.endpoint(),
        &format!("http://{closed}"),
    )?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let partial = eventually(Duration::from_secs(120), || {
        output().contains("partial start")
    })
    .await;
    anyhow::ensure!(partial, "no partial start reported: {}", output());
    let log_text = output();
    let partial = log_text
        .lines()
        .find(|line| line.contains("partial start"))
        .unwrap_or_default();
    for (tenant, role) in [("alpha", ALPHA_ROLE), ("beta", BETA_ROLE)] {
        let refusal = format!(
            "tenant `{tenant}`: component `ledger_audit` failed to load: cannot assume role `{role}`"
        );
        assert!(partial.contains(&refusal), "no `{refusal}` in: {partial}");
    }
    let reading = eventually(Duration::from_secs(60), || {
        output().contains("reading shard")
    })
    .await;
    anyhow::ensure!(reading, "gamma never read: {}", output());
    let output = stop(host, &log).await?;
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
    let kinesis = LocalKinesis::start().await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", kinesis.port())).await?;
    kinesis.create_stream("ledger", 1).await?;
    let dir = scratch("identity-process")?;
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
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"solo\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
            guests::LEDGER_AUDIT.path().display()
        ),
    )?;
    let log = dir.join("host.log");
    let mut command = host_command(&config, &proxy.endpoint(), &[]);
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
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        // The chain never reaches instance metadata (a non-loopback address) here.
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(std::fs::File::create(&log)?);
    let host = Running(command.spawn()?);
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let reading = eventually(Duration::from_secs(60), || {
        output().contains("reading shard")
    })
    .await;
    anyhow::ensure!(reading, "the shard never opened: {}", output());
    let client = kinesis.client().await;
    for id in 0..ENTRIES {
        put_json(&client, "ledger", &json!({ "id": id, "amount": 10 }), None).await?;
    }
    wait_handled(&log, &["solo"]).await?;
    let signers: BTreeSet<String> = proxy
        .requests()
        .into_iter()
        .map(|r| r.access_key_id)
        .collect();
    assert_eq!(signers, BTreeSet::from(["PROCESSKEY".to_owned()]));
    stop(host, &log).await.map(drop)
}

/// Stops the host with SIGTERM, checks that it exits cleanly and returns its log.
async fn stop(mut host: Running, log: &Path) -> anyhow::Result<String> {
    host.signal("TERM")?;
    let exit = tokio::task::spawn_blocking(move || host.0.wait()).await??;
    let output = std::fs::read_to_string(log).unwrap_or_default();
    anyhow::ensure!(exit.success(), "exit {exit:?}: {output}");
    Ok(output)
}
