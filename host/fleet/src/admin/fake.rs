//! A fake [`Control`] for tests of the routes, the client and the status view: one tenant,
//! `acme`, running app `ledger` (subscriber `book` over two shards) and app `fresh`, which has
//! no previous version. It records what it was asked and answers as a host would.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::control::{Control, ControlError};
use super::model::{
    AppStatus, AppVersionList, Deployed, ErrorEvent, HostStatus, KeptVersion, OutcomeCounts,
    RedriveListed, Refusal, ReservedMemory, RolloutStatus, SeekPosition, ShardState, ShardStatus,
    SubscriptionStatus, TenantStatus, Undeployed, VersionInfo, VersionOrigin,
};
use super::tls::TlsFiles;
use super::token::AdminToken;
use super::{AdminOptions, AdminStartError, AuditLog, ServeError};
use crate::http_server::HttpServer;

/// The tenant the fake runs.
pub const TENANT: &str = "acme";
/// The ids of the redrives the fake keeps: acme's, then the operator's.
pub const REDRIVES: [&str; 2] = ["rd-acme", "rd-all"];
/// The shards of `acme`/`ledger`/`book`.
pub const SHARDS: [&str; 2] = ["shardId-000000000000", "shardId-000000000001"];

/// A host in memory: see the module doc for what it runs.
#[derive(Debug, Default)]
pub struct FakeControl {
    /// Reasons `not_ready` gives.
    pub not_ready: Mutex<Vec<String>>,
    /// Whether `acme` is paused.
    pub paused: Mutex<bool>,
    /// Every deploy asked for: tenant, component name, byte count.
    pub deploys: Mutex<Vec<(String, String, usize)>>,
    /// Every seek asked for.
    pub seeks: Mutex<Vec<SeekPosition>>,
    /// When set, `reload` answers that the tenants file is invalid.
    pub bad_config: Mutex<bool>,
}

/// The admin API over a [`FakeControl`], served on a free loopback port: what the admin
/// client is tested against over real HTTP. Uploads up to 1 MiB; no tenant tokens.
#[derive(Debug)]
pub struct FakeAdmin {
    server: HttpServer,
    control: Arc<FakeControl>,
}

impl FakeAdmin {
    /// Serves plain HTTP on 127.0.0.1 to requests carrying `token`.
    ///
    /// # Errors
    /// No loopback port is free.
    pub async fn serve(token: &str) -> Result<Self, AdminStartError> {
        Self::start(token, None).await
    }

    /// Serves HTTPS with the test certificate (see [`test_certificate`]), which names
    /// 127.0.0.1 and localhost.
    ///
    /// # Errors
    /// No loopback port is free, or the fixture files are missing.
    pub async fn serve_tls(token: &str) -> Result<Self, AdminStartError> {
        let (cert, key) = test_certificate();
        Self::start(token, Some(TlsFiles { cert, key })).await
    }

    async fn start(token: &str, tls: Option<TlsFiles>) -> Result<Self, AdminStartError> {
        let options = AdminOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            tls,
            token: test_token(token),
            hosts: Vec::new(),
            max_upload: 1 << 20,
            audit: AuditLog::new("test", None),
            tenant_tokens: None,
        };
        let control = Arc::new(FakeControl::default());
        let server = super::serve(options, control.clone()).await?;
        Ok(Self { server, control })
    }

    /// The host behind the API: what it was asked.
    pub fn control(&self) -> &FakeControl {
        &self.control
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops it once the requests under way are answered.
    ///
    /// # Errors
    /// How the server failed, if it did.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.server.shutdown().await
    }
}

/// An admin token with this text, as if read from a file.
pub fn test_token(text: &str) -> AdminToken {
    AdminToken::for_tests(text)
}

/// The test certificate chain and its private key (PEM) of `tests/fixtures/admin-tls`.
pub fn test_certificate() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/admin-tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

fn tenant(name: &str) -> Result<(), ControlError> {
    if name == TENANT {
        Ok(())
    } else {
        Err(ControlError::UnknownTenant(name.to_owned()))
    }
}

fn app(tenant_name: &str, app: &str) -> Result<(), ControlError> {
    tenant(tenant_name)?;
    if app == "ledger" || app == "fresh" {
        Ok(())
    } else {
        Err(ControlError::UnknownApp {
            tenant: tenant_name.to_owned(),
            app: app.to_owned(),
        })
    }
}

fn deployed(app: &str, component: &str, version: &str, swapped: bool) -> Deployed {
    Deployed {
        tenant: TENANT.to_owned(),
        app: app.to_owned(),
        component: component.to_owned(),
        version: version.to_owned(),
        content_hash: format!("{version}-hash-0123456789abcdef"),
        swapped,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Control for FakeControl {
    fn status(&self) -> HostStatus {
        let mut status = sample_status();
        status.not_ready = self.not_ready();
        status.ready = status.not_ready.is_empty();
        status.tenants[0].paused = *lock(&self.paused);
        status
    }

    fn not_ready(&self) -> Vec<String> {
        lock(&self.not_ready).clone()
    }

    async fn seek(
        &self,
        tenant: &str,
        app_name: &str,
        subscriber: &str,
        position: SeekPosition,
    ) -> Result<Vec<String>, ControlError> {
        app(tenant, app_name)?;
        if subscriber != "book" {
            return Err(ControlError::UnknownSubscriber {
                tenant: tenant.to_owned(),
                app: app_name.to_owned(),
                subscriber: subscriber.to_owned(),
            });
        }
        lock(&self.seeks).push(position.clone());
        match position {
            SeekPosition::Sequence { shard, .. } if SHARDS.contains(&shard.as_str()) => {
                Ok(vec![shard])
            }
            SeekPosition::Sequence { shard, .. } => Err(ControlError::Seek(format!(
                "shard `{shard}` is not one of the subscription's"
            ))),
            _ => Ok(SHARDS.iter().map(|&shard| shard.to_owned()).collect()),
        }
    }

    async fn pause(&self, name: &str) -> Result<(), ControlError> {
        tenant(name)?;
        *lock(&self.paused) = true;
        Ok(())
    }

    async fn resume(&self, name: &str) -> Result<(), ControlError> {
        tenant(name)?;
        *lock(&self.paused) = false;
        Ok(())
    }

    async fn deploy(
        &self,
        name: &str,
        component: &str,
        wasm: Vec<u8>,
    ) -> Result<Deployed, ControlError> {
        tenant(name)?;
        lock(&self.deploys).push((name.to_owned(), component.to_owned(), wasm.len()));
        if !wasm.starts_with(b"\0asm") {
            return Err(ControlError::Refused {
                tenant: name.to_owned(),
                component: component.to_owned(),
                reason: "not a WebAssembly component".to_owned(),
            });
        }
        let swapped = component == "ledger";
        Ok(deployed(component, component, "0.3.0", swapped))
    }

    async fn undeploy(&self, name: &str, component: &str) -> Result<Undeployed, ControlError> {
        tenant(name)?;
        match component {
            "ledger" => Err(ControlError::Configured {
                tenant: name.to_owned(),
                component: component.to_owned(),
            }),
            "fresh" => Ok(Undeployed {
                tenant: name.to_owned(),
                component: component.to_owned(),
                app: "fresh".to_owned(),
            }),
            _ => Err(ControlError::UnknownComponent {
                tenant: name.to_owned(),
                component: component.to_owned(),
            }),
        }
    }

    async fn reload(&self) -> Result<Vec<Deployed>, ControlError> {
        if *lock(&self.bad_config) {
            return Err(ControlError::Config(
                "tenants.toml: unknown field `tenant`".to_owned(),
            ));
        }
        Ok(vec![deployed("ledger", "ledger.wasm", "0.2.1", true)])
    }

    async fn rollback(
        &self,
        tenant: &str,
        app_name: &str,
        to: Option<String>,
    ) -> Result<Deployed, ControlError> {
        app(tenant, app_name)?;
        match to.as_deref() {
            None if app_name == "fresh" => Err(ControlError::NothingToRollBack {
                tenant: tenant.to_owned(),
                app: app_name.to_owned(),
            }),
            None => Ok(deployed("ledger", "ledger-0.1.wasm", "0.1.0", true)),
            Some(hash) if "0.0.9-hash-0123456789abcdef".starts_with(hash) => {
                Ok(deployed("ledger", "ledger-0.0.wasm", "0.0.9", true))
            }
            Some(hash) => Err(ControlError::UnknownVersion {
                tenant: tenant.to_owned(),
                app: app_name.to_owned(),
                hash: hash.to_owned(),
            }),
        }
    }

    fn versions(&self, tenant: &str, app_name: &str) -> Result<AppVersionList, ControlError> {
        app(tenant, app_name)?;
        let kept = |version: &str, at_ms, came_by, live| KeptVersion {
            content_hash: format!("{version}-hash-0123456789abcdef"),
            version: version.to_owned(),
            component: app_name.to_owned(),
            at_ms,
            came_by,
            live,
        };
        Ok(AppVersionList {
            tenant: tenant.to_owned(),
            app: app_name.to_owned(),
            versions: vec![
                kept("0.2.0", 3_000, VersionOrigin::Upload, true),
                kept("0.1.0", 2_000, VersionOrigin::File, false),
                kept("0.0.9", 1_000, VersionOrigin::File, false),
            ],
            fleet: false,
        })
    }

    fn redrive(&self, id: &str) -> Result<serde_json::Value, ControlError> {
        (self.redrives().into_iter())
            .find(|listed| listed.id == id)
            .map(|listed| listed.progress)
            .ok_or_else(|| ControlError::UnknownRedrive(id.to_owned()))
    }

    /// Two redrives: [`REDRIVES`]`[0]` of acme's dead letters, running; `[1]` of every
    /// tenant's (an operator's), finished.
    fn redrives(&self) -> Vec<RedriveListed> {
        let listed = |id: &str, tenant: Option<&str>, state: &str| RedriveListed {
            id: id.to_owned(),
            stream: "books.dead".into(),
            tenant: tenant.map(str::to_owned),
            running: state == "running",
            progress: serde_json::json!({ "id": id, "state": state, "redriven": 3 }),
        };
        vec![
            listed(REDRIVES[0], Some(TENANT), "running"),
            listed(REDRIVES[1], None, "finished"),
        ]
    }

    /// One event of acme's, one of tenant `other`, one of the host's own; `tenant` keeps one
    /// tenant's.
    fn recent_errors(&self, tenant: Option<&str>, since_ms: u64, limit: usize) -> Vec<ErrorEvent> {
        let event = |seq: u64, tenant: Option<&str>| ErrorEvent {
            seq,
            at_ms: 1_000 + seq,
            at: "1970-01-01T00:00:01.000Z".into(),
            level: "WARN".into(),
            target: "ruststream_kinesis::runner".into(),
            tenant: tenant.map(str::to_owned),
            app: None,
            subscriber: None,
            stream: None,
            shard: None,
            message: format!("event {seq}"),
        };
        let mut events = vec![
            event(2, Some(TENANT)),
            event(1, Some("other")),
            event(0, None),
        ];
        events.retain(|e| tenant.is_none_or(|t| e.tenant.as_deref() == Some(t)));
        events.retain(|e| e.at_ms >= since_ms);
        events.truncate(limit);
        events
    }
}

/// A host status with one of everything: a refusal, a rollout, a held shard and a shard
/// nobody holds.
pub fn sample_status() -> HostStatus {
    let held = ShardStatus {
        state: ShardState::Reading,
        owner: Some("host-a".to_owned()),
        checkpoint: Some("4959".to_owned()),
        held_at: Some("4960".to_owned()),
        held_since_ms: Some(1_000_000),
        delivered: 120,
        outcomes: OutcomeCounts {
            ack: 100,
            drop: 2,
            retry: 17,
            retry_after: 0,
            trapped: 1,
            foreign_copies: 0,
        },
        millis_behind_latest: Some(250),
        read: Some(ruststream_kinesis::kinesis::ReadMode::Polling),
        reads: None,
        subscribed_since_ms: None,
        paused: false,
        // Not sent over the admin API: zero, as a status parsed from JSON has them.
        unhandled: 0,
        copies_pending: 0,
        iterator_age_ms: None,
    };
    let idle = ShardStatus {
        state: ShardState::Stopped,
        owner: None,
        checkpoint: None,
        held_at: None,
        held_since_ms: None,
        delivered: 0,
        outcomes: OutcomeCounts::default(),
        millis_behind_latest: None,
        read: None,
        reads: None,
        subscribed_since_ms: None,
        paused: true,
        unhandled: 0,
        copies_pending: 0,
        iterator_age_ms: None,
    };
    let ledger = AppStatus {
        name: "ledger".to_owned(),
        component: "ledger.wasm".to_owned(),
        version: "0.2.0".to_owned(),
        content_hash: "sha256:1a2b3c4d5e6f7a8b9c0d".to_owned(),
        previous: Some(VersionInfo {
            component: "ledger-0.1.wasm".to_owned(),
            version: "0.1.0".to_owned(),
            content_hash: "sha256:9f8e7d6c5b4a39281706".to_owned(),
        }),
        rollout: Some(RolloutStatus {
            calls: 40,
            failures: 1,
            judged_over: 100,
            replaced_failure_permille: 0,
            verdict: "pending".to_owned(),
        }),
        rollbacks: 1,
        shadow: None,
        fleet: None,
        subscriptions: vec![SubscriptionStatus {
            subscriber: "book".to_owned(),
            stream: "ledger".to_owned(),
            error: None,
            shards: BTreeMap::from([(SHARDS[0].to_owned(), held), (SHARDS[1].to_owned(), idle)]),
            hosts: BTreeMap::from([("host-a".to_owned(), SHARDS.map(str::to_owned).to_vec())]),
        }],
    };
    let fresh = AppStatus {
        name: "fresh".to_owned(),
        component: "fresh.wasm".to_owned(),
        version: "1.0.0".to_owned(),
        content_hash: "abc".to_owned(),
        previous: None,
        rollout: None,
        rollbacks: 0,
        shadow: None,
        fleet: None,
        subscriptions: vec![SubscriptionStatus {
            subscriber: "audit".to_owned(),
            stream: "secret".to_owned(),
            error: Some("stream `secret` is not granted to tenant `acme`".to_owned()),
            shards: BTreeMap::new(),
            hosts: BTreeMap::new(),
        }],
    };
    HostStatus {
        owner: "host-a".to_owned(),
        ready: true,
        not_ready: Vec::new(),
        tenants: vec![TenantStatus {
            name: TENANT.to_owned(),
            paused: false,
            pause_reason: None,
            instance_memory: ReservedMemory {
                live_bytes: 128 << 20,
                shadow_bytes: 0,
                budget_bytes: Some(256 << 20),
            },
            apps: vec![ledger, fresh],
            refused: vec![Refusal {
                component: "bad.wasm".to_owned(),
                reason: "imports `wasi:sockets`, which no tenant is granted".to_owned(),
                at_ms: 1_010_000,
            }],
        }],
    }
}
