//! What the admin API asks of the host: [`Control`], implemented by the running host, and the
//! [`ControlError`]s it answers with.
//!
//! The trait is generic rather than `dyn` so the host's futures need no boxing; each async
//! operation's future is `Send` because the server runs handlers on the multi-threaded runtime.

use std::future::Future;

use super::model::{
    AppVersionList, Deployed, ErrorEvent, HostHistory, HostStatus, RedriveListed, RedriveRequest,
    SeekPosition, ShadowDeployed, ShadowDropped, Undeployed,
};

/// The operations the admin API exposes, carried out by the host. Names (`tenant`, `app`,
/// `subscriber`, `component`) come from the request path as the operator typed them: the
/// implementation looks them up and answers an unknown one with the matching `Unknown*` error.
pub trait Control: Send + Sync + 'static {
    /// A snapshot of the host: every tenant, app, subscription and shard.
    fn status(&self) -> HostStatus;
    /// Reasons the host is not ready; empty when ready.
    fn not_ready(&self) -> Vec<String>;
    /// What the console plots: each shard's lag and each app's records a second, sampled
    /// into bounded rings; of `tenant` only when given.
    fn history(&self, tenant: Option<&str>) -> HostHistory {
        let _ = tenant;
        HostHistory {
            interval_ms: 1000,
            lag: Vec::new(),
            rate: Vec::new(),
        }
    }
    /// What readiness reports without failing on it (an operator's pause).
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
    /// Moves the subscription's shards to `position`; returns the ids of the shards moved.
    fn seek(
        &self,
        tenant: &str,
        app: &str,
        subscriber: &str,
        position: SeekPosition,
    ) -> impl Future<Output = Result<Vec<String>, ControlError>> + Send;
    /// Stops handing the tenant's handlers records until [`Control::resume`]. Pausing a paused
    /// tenant is not an error.
    fn pause(&self, tenant: &str) -> impl Future<Output = Result<(), ControlError>> + Send;
    /// Resumes a paused (or quarantined) tenant. Resuming a running tenant is not an error.
    fn resume(&self, tenant: &str) -> impl Future<Output = Result<(), ControlError>> + Send;
    /// Loads `wasm` as component `component` of `tenant` (a new version of the app it declares,
    /// or a new app) through the host's reload path.
    fn deploy(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
    ) -> impl Future<Output = Result<Deployed, ControlError>> + Send;
    /// Stops component `component` of `tenant`, one that came by upload under a name the
    /// tenants file does not list, for good: a restart does not run it again.
    fn undeploy(
        &self,
        tenant: &str,
        component: &str,
    ) -> impl Future<Output = Result<Undeployed, ControlError>> + Send;
    /// Re-reads the config and component files (what SIGHUP does).
    fn reload(&self) -> impl Future<Output = Result<Vec<Deployed>, ControlError>> + Send;
    /// Swaps the app back to its previous version, or with `to` (a content hash or a unique
    /// prefix of one) to that kept version.
    fn rollback(
        &self,
        tenant: &str,
        app: &str,
        to: Option<String>,
    ) -> impl Future<Output = Result<Deployed, ControlError>> + Send;
    /// The versions the host keeps of the app, newest first.
    fn versions(&self, tenant: &str, app: &str) -> Result<AppVersionList, ControlError>;
    /// Starts a dead-letter redrive in the host (or, with `dry_run`, plans it) and answers
    /// with its progress (or plan), as JSON.
    fn start_redrive(
        &self,
        request: RedriveRequest,
    ) -> impl Future<Output = Result<serde_json::Value, ControlError>> + Send {
        let _ = request;
        async { Err(ControlError::Redrive("this host runs no redrives".into())) }
    }
    /// Runs `wasm` beside the app that component `component` of `tenant` runs, as its shadow
    /// (replacing any shadow it had), on `sample_percent` of the records.
    fn deploy_shadow(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
        sample_percent: u32,
    ) -> impl Future<Output = Result<ShadowDeployed, ControlError>> + Send {
        let _ = (wasm, sample_percent);
        let error = ControlError::UnknownComponent {
            tenant: tenant.to_owned(),
            component: component.to_owned(),
        };
        async { Err(error) }
    }
    /// Drops the shadow of `tenant`'s `app`.
    fn abort_shadow(
        &self,
        tenant: &str,
        app: &str,
    ) -> impl Future<Output = Result<ShadowDropped, ControlError>> + Send {
        let error = ControlError::NoShadow {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
        };
        async { Err(error) }
    }
    /// Swaps the shadow of `tenant`'s `app` in through the normal swap (judged by the rollout
    /// like any swap), ending the shadow.
    fn promote(
        &self,
        tenant: &str,
        app: &str,
    ) -> impl Future<Output = Result<Deployed, ControlError>> + Send {
        let error = ControlError::NoShadow {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
        };
        async { Err(error) }
    }
    /// The progress of a redrive this host started, as JSON.
    fn redrive(&self, id: &str) -> Result<serde_json::Value, ControlError> {
        Err(ControlError::UnknownRedrive(id.to_owned()))
    }
    /// The redrives this host keeps (running, ended, or to resume), by id.
    fn redrives(&self) -> Vec<RedriveListed> {
        Vec::new()
    }
    /// The warnings and errors this host logged lately (see
    /// [`RecentErrors::read`](crate::recent_errors::RecentErrors::read)).
    fn recent_errors(&self, tenant: Option<&str>, since_ms: u64, limit: usize) -> Vec<ErrorEvent> {
        let _ = (tenant, since_ms, limit);
        Vec::new()
    }
}

/// Why the host did not carry out an operation. Each variant has its own HTTP status (see
/// `routes`); names are quoted with control characters escaped by the server, not here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No tenant of that name is configured (404).
    #[error("no tenant `{0}`")]
    UnknownTenant(String),
    /// The tenant runs no app of that name (404).
    #[error("tenant `{tenant}` has no app `{app}`")]
    UnknownApp {
        /// The tenant asked for.
        tenant: String,
        /// The app it does not run.
        app: String,
    },
    /// The app has no subscriber of that name (404).
    #[error("app `{app}` of tenant `{tenant}` has no subscriber `{subscriber}`")]
    UnknownSubscriber {
        /// The tenant asked for.
        tenant: String,
        /// Its app.
        app: String,
        /// The subscriber the app does not declare.
        subscriber: String,
    },
    /// The component was refused: it does not load, or the tenant may not run what it
    /// declares (422). The running version, if any, keeps running.
    #[error("component `{component}` of tenant `{tenant}` refused: {reason}")]
    Refused {
        /// The tenant it was for.
        tenant: String,
        /// The component's file or upload name.
        component: String,
        /// Why, one line.
        reason: String,
    },
    /// The app has no previous version to roll back to (409).
    #[error("app `{app}` of tenant `{tenant}` has no previous version to roll back to")]
    NothingToRollBack {
        /// The tenant asked for.
        tenant: String,
        /// Its app.
        app: String,
    },
    /// The fleet's desired state could not be changed (409): another change came first (it
    /// is named), or its stores failed; this host may run the new version until it converges
    /// back on what is recorded.
    #[error("the fleet's desired state was not changed: {0}")]
    Desired(String),
    /// The tenants file cannot be read or is invalid (422); nothing was reloaded.
    #[error("the tenants file was not reloaded: {0}")]
    Config(String),
    /// The seek cannot be carried out in the shards' current state (not held by this host, a
    /// sequence number the shard does not hold) (409).
    #[error("cannot seek: {0}")]
    Seek(String),
    /// The tenant runs no component of that name (404).
    #[error("tenant `{tenant}` runs no component `{component}`")]
    UnknownComponent {
        /// The tenant asked for.
        tenant: String,
        /// The component it does not run.
        component: String,
    },
    /// The component is one the tenants file lists: it is stopped there, not by undeploy (409).
    #[error(
        "component `{component}` of tenant `{tenant}` is listed in the tenants file: remove it \
         there, and the reload stops it"
    )]
    Configured {
        /// The tenant asked for.
        tenant: String,
        /// Its component.
        component: String,
    },
    /// No kept version of the app has that hash (404).
    #[error(
        "app `{app}` of tenant `{tenant}` keeps no version `{hash}`: `ruststream versions \
         {tenant} {app}` lists those it keeps"
    )]
    UnknownVersion {
        /// The tenant asked for.
        tenant: String,
        /// Its app.
        app: String,
        /// The hash or prefix asked for.
        hash: String,
    },
    /// Several kept versions start with the prefix given (409).
    #[error("`{prefix}` is the start of {} kept versions ({}): give more of the hash",
        hashes.len(), hashes.join(", "))]
    AmbiguousVersion {
        /// The prefix asked for.
        prefix: String,
        /// The hashes it starts.
        hashes: Vec<String>,
    },
    /// The version asked for is the one running (409).
    #[error("version `{hash}` of app `{app}` of tenant `{tenant}` is the live one already")]
    AlreadyLive {
        /// The tenant asked for.
        tenant: String,
        /// Its app.
        app: String,
        /// The live version's hash.
        hash: String,
    },
    /// No redrive of that id was started on this host since it started (404).
    #[error("this host started no redrive `{0}` (since it started)")]
    UnknownRedrive(String),
    /// The redrive cannot be started (409): how the host keeps leases, a bad time, another
    /// run holding it.
    #[error("cannot redrive: {0}")]
    Redrive(String),
    /// The app runs no shadow version (404).
    #[error(
        "app `{app}` of tenant `{tenant}` runs no shadow version: `ruststream deploy {tenant} \
         FILE --shadow` starts one"
    )]
    NoShadow {
        /// The tenant asked for.
        tenant: String,
        /// Its app.
        app: String,
    },
    /// The state directory failed (500); what runs is unchanged.
    #[error("{0}")]
    State(String),
}
