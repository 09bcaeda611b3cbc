//! A fleet of `ruststream run` processes on one lease namespace (DynamoDB-local), tenant
//! `acme` running the `versioned` test guest (v1 from its tenants file) on a 3-shard `events`
//! stream: what the fleet deploy tests and the `fleet_deploys` bench start.
//!
//! With [`Deploys::Fleet`] every host's tenants file names the component bucket [`BUCKET`]
//! (moto's S3), so deploys are recorded in the fleet's desired state; with
//! [`Deploys::PerHost`] each host's deploys are its own, as before fleet deploys.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::e2e::put_json;
use crate::fixture::{BinaryHost, Fixture};
use crate::guests;
use crate::neighbour::verb;
use crate::servers::sdk_config;
use crate::wait::poll_for;

/// The component bucket of a fleet with [`Deploys::Fleet`].
pub const BUCKET: &str = "fleet-components";

/// Whose deploys are whose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deploys {
    /// Recorded in the fleet's desired state: every host runs what a deploy through any one
    /// of them made live.
    Fleet,
    /// Each host's own.
    PerHost,
}

/// The hosts and the servers they run against.
pub struct FleetOf {
    /// The local servers and the test's directory.
    pub fixture: Fixture,
    /// The hosts, in the order they were started.
    pub hosts: Vec<BinaryHost>,
    deploys: Deploys,
    /// The operator token every host of a [`Deploys::Fleet`] fleet shares.
    admin_token: String,
}

impl FleetOf {
    /// Starts the servers (a fixture named `name`) and one host per owner id of `hosts`, and
    /// waits until each has loaded its tenants.
    ///
    /// # Errors
    /// A server or a host does not start.
    pub async fn start(name: &str, hosts: &[&str], deploys: Deploys) -> Result<Self> {
        let fixture = Fixture::builder(name)
            .stream("events", 3)
            .stream("legacy", 1)
            .stream("audit", 1)
            .stream("ledger", 1)
            .dynamo()
            .sts()
            .start()
            .await?;
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk_config(&fixture.sts().endpoint()).await)
                .force_path_style(true)
                .build(),
        );
        s3.create_bucket().bucket(BUCKET).send().await?;
        std::fs::copy(
            guests::VERSIONED_V1.path(),
            fixture.dir().join("versioned.wasm"),
        )?;
        // Not a secret worth guessing: a test's, on loopback.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos();
        let admin_token = format!("{nanos:032x}{:032x}", std::process::id());
        let mut fleet = Self {
            fixture,
            hosts: Vec::new(),
            deploys,
            admin_token,
        };
        for owner in hosts {
            fleet.add_host(owner)?;
        }
        for host in &fleet.hosts {
            host.wait_for_log("every tenant is loaded", 1).await?;
        }
        Ok(fleet)
    }

    /// Starts host `owner` with a state directory (and tenants file) of its own, empty if
    /// the owner is new.
    ///
    /// # Errors
    /// The host does not start.
    pub fn add_host(&mut self, owner: &str) -> Result<&BinaryHost> {
        let fixture = &self.fixture;
        std::fs::create_dir_all(fixture.dir().join(owner))?;
        let bucket = match self.deploys {
            Deploys::Fleet => format!("[host]\ncomponent_bucket = \"{BUCKET}\"\n"),
            Deploys::PerHost => String::new(),
        };
        let tenants = format!(
            r#"
            {bucket}
            [[tenants]]
            name = "acme"
            components = ["{component}"]
            subscribe = ["events", "legacy", "audit", "ledger"]
            "#,
            component = fixture.dir().join("versioned.wasm").display(),
        );
        let file = fixture.tenants_file(&format!("{owner}/tenants.toml"), &tenants)?;
        if self.deploys == Deploys::Fleet {
            // One operator token for the fleet, as a Secret gives every pod of the Kubernetes
            // manifests (`RUSTSTREAM_ADMIN_TOKEN`); here through each host's token file, which
            // the verbs read as usual.
            let state = crate::process::state_dir(&file);
            std::fs::create_dir_all(&state)?;
            std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
            let token = state.join("admin-token");
            std::fs::write(&token, format!("{}\n", self.admin_token))?;
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600))?;
        }
        let host = fixture
            .host(&file)
            .log(&format!("{owner}.log"))
            .dynamo_leases()
            .owner(owner)
            .args(&["--s3-endpoint", &fixture.sts().endpoint()])
            // A judge quick to decide: four calls, a 20 % margin.
            .args(&["--rollout-calls", "4", "--rollout-margin", "0.2"])
            .start()?;
        self.hosts.push(host);
        Ok(self.hosts.last().expect("just pushed"))
    }

    /// Waits until the hosts read every shard of `events` (from the tip, before a record is
    /// written).
    ///
    /// # Errors
    /// Not within a minute; the error holds every host's log.
    pub async fn every_shard_read(&self) -> Result<()> {
        let logs = || {
            self.hosts
                .iter()
                .map(BinaryHost::output)
                .collect::<Vec<_>>()
        };
        let reading = poll_for(Duration::from_secs(60), async || {
            let read: usize = (logs().iter())
                .map(|log| log.matches("reading shard stream=events").count())
                .sum();
            (read >= 3).then_some(())
        })
        .await;
        anyhow::ensure!(
            reading.is_some(),
            "not every shard of events is read: {}",
            logs().join("\n-----\n")
        );
        Ok(())
    }

    /// Waits until no shard of `events` changed hands, as the hosts' `status` says, for
    /// `quiet` (longer than the balancing's 10 s round: a round that moved nothing).
    ///
    /// # Errors
    /// Not within `quiet` and a minute more.
    pub async fn owners_settled(&self, quiet: Duration) -> Result<()> {
        let mut last: Option<(Vec<(String, String)>, Instant)> = None;
        let settled = poll_for(quiet + Duration::from_secs(60), async || {
            let mut owners = Vec::new();
            for host in &self.hosts {
                let status = status(host).await?;
                let apps = status["tenants"][0]["apps"].as_array().cloned()?;
                let held = (apps.iter())
                    .flat_map(|app| app["subscriptions"].as_array().cloned().unwrap_or_default())
                    .filter(|subscription| subscription["stream"] == "events")
                    .flat_map(|subscription| {
                        subscription["shards"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter(|shard| shard["owner"] == status["owner"]);
                owners.extend(
                    held.map(|shard| (shard["shard_id"].to_string(), status["owner"].to_string())),
                );
            }
            owners.sort();
            match &last {
                Some((before, since)) if *before == owners => {
                    (since.elapsed() >= quiet).then_some(())
                }
                _ => {
                    last = Some((owners, Instant::now()));
                    None
                }
            }
        })
        .await;
        anyhow::ensure!(
            settled.is_some(),
            "the shards of events kept changing hands"
        );
        Ok(())
    }

    /// Stops every host gracefully.
    ///
    /// # Errors
    /// A host does not stop cleanly.
    pub async fn stop(self) -> Result<()> {
        for host in self.hosts {
            host.stop().await?;
        }
        Ok(())
    }
}

/// Explicit hash keys on each of the three shards of `events`.
const THIRDS: [&str; 3] = [
    "1",
    "120000000000000000000000000000000000000",
    "240000000000000000000000000000000000000",
];

/// Puts `{"id": id}` on `events`, on its shard `id % 3`.
///
/// # Errors
/// The put fails.
pub async fn put_event(kinesis: &aws_sdk_kinesis::Client, id: u64) -> Result<()> {
    let key = THIRDS[(id % 3) as usize];
    put_json(
        kinesis,
        "events",
        &serde_json::json!({ "id": id }),
        Some(key),
    )
    .await?;
    Ok(())
}

/// `host`'s `status --json`.
async fn status(host: &BinaryHost) -> Option<serde_json::Value> {
    let (ok, said) = verb(host, &["status", "--json"]).await.ok()?;
    serde_json::from_str(&said).ok().filter(|_| ok)
}

/// `acme`'s apps as `host`'s `status --json` shows them.
pub async fn acme_apps(host: &BinaryHost) -> Option<Vec<serde_json::Value>> {
    status(host).await?["tenants"][0]["apps"]
        .as_array()
        .cloned()
}

/// The content hash of the version `host` runs for `acme`'s `versioned`.
pub async fn live_hash(host: &BinaryHost) -> Option<String> {
    let apps = acme_apps(host).await?;
    let app = apps.iter().find(|app| app["component"] == "versioned")?;
    app["content_hash"].as_str().map(str::to_owned)
}

/// Waits until every host of `hosts` runs `hash`; how long it took.
///
/// # Errors
/// Not within a minute; the error holds every host's log.
pub async fn all_run(hosts: &[BinaryHost], hash: &str) -> Result<Duration> {
    let start = Instant::now();
    let converged = poll_for(Duration::from_secs(60), async || {
        for host in hosts {
            if live_hash(host).await.as_deref() != Some(hash) {
                return None;
            }
        }
        Some(start.elapsed())
    })
    .await;
    converged.ok_or_else(|| {
        let outputs: Vec<String> = hosts.iter().map(BinaryHost::output).collect();
        anyhow::anyhow!("not every host runs {hash}: {}", outputs.join("\n-----\n"))
    })
}
