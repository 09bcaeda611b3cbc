//! The admin HTTP API of `ruststream run`: status, readiness, seek, pause and resume, deploy,
//! reload, rollback and the kept versions, over JSON (see `routes` for the routes and `model`
//! for the bodies).
//!
//! Only operators reach it: every route but `/healthz` and `/readyz` needs the host's token
//! (`token`), a request must be addressed to the API's own address or a configured name
//! (`allowed_hosts`), bodies are JSON or, for uploads, wasm, and one upload runs at a time
//! within the compile size bound (`guard`). It listens on loopback ([`DEFAULT_ADDR`]); another
//! address needs `--allow-remote-admin`, and remote admin needs TLS (`tls`). The host's side
//! is the [`Control`] trait; this module is only the HTTP layer over it.

pub mod allowed_hosts;
mod audit;
pub mod caller;
pub mod certificates;
mod console;
pub mod control;
mod error;
mod extract;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod guard;
pub mod model;
mod routes;
mod scope;
mod session;
#[cfg(test)]
pub(crate) mod tests;
pub mod tls;
pub mod token;
mod token_routes;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use allowed_hosts::{AllowedHosts, HostName};
pub(crate) use audit::AuditLog;
use control::Control;
use tls::{TlsFiles, TlsListener};
use token::AdminToken;

use crate::tokens::TokenStore;

pub use crate::http_server::ServeError;
use crate::http_server::{self, HttpServer};

/// Where the admin API listens unless told otherwise: loopback, port 9465.
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9465));

/// Why the admin API was not started.
#[derive(Debug, thiserror::Error)]
pub enum AdminStartError {
    /// A non-loopback address without remote admin allowed.
    #[error(
        "the admin API would listen on {addr}, which is not a loopback address: listen on \
         127.0.0.1, or allow remote admin explicitly (--allow-remote-admin, with TLS)"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Remote admin allowed without TLS.
    #[error(
        "--allow-remote-admin needs TLS: give --admin-tls-cert and --admin-tls-key (a \
         certificate chain and its private key, PEM); without them the admin token would cross \
         the network in clear"
    )]
    RemoteWithoutTls,
    /// The TLS files cannot be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The address cannot be bound.
    #[error(transparent)]
    Serve(#[from] http_server::ServeError),
}

/// How the admin API is served.
#[derive(Debug, Clone)]
pub(crate) struct AdminOptions {
    /// Where it listens (port 0: any free port, see [`HttpServer::local_addr`]).
    pub addr: SocketAddr,
    /// Whether a non-loopback address is allowed (TLS is then required).
    pub allow_remote: bool,
    /// The certificate and key to serve TLS with.
    pub tls: Option<TlsFiles>,
    /// The token every request but the probes must carry.
    pub token: AdminToken,
    /// Names the API answers to besides its address.
    pub hosts: Vec<HostName>,
    /// Largest upload: the compile size bound.
    pub max_upload: usize,
    /// Where the changes asked of it are recorded.
    pub audit: AuditLog,
    /// Where tenant tokens are kept; none: the host takes the operator's token only.
    pub tenant_tokens: Option<Arc<dyn TokenStore>>,
}

/// Starts the admin API over `control` and returns once it listens.
///
/// # Errors
/// [`AdminStartError`]: a non-loopback address without `allow_remote`, remote admin without
/// TLS, TLS files that cannot be used, or an address that cannot be bound.
pub(crate) async fn serve<C: Control>(
    options: AdminOptions,
    control: Arc<C>,
) -> Result<HttpServer, AdminStartError> {
    let addr = options.addr;
    if !options.allow_remote && !addr.ip().is_loopback() {
        return Err(AdminStartError::NotLoopback { addr });
    }
    if options.allow_remote && options.tls.is_none() {
        return Err(AdminStartError::RemoteWithoutTls);
    }
    // A certificate must name how clients reach the API, or no client could verify it.
    let names = AllowedHosts::new(addr, true, options.hosts.clone()).served_names();
    let tls = options
        .tls
        .as_ref()
        .map(|files| tls::server_config(files, &names))
        .transpose()?;
    let what = "admin API";
    let listener = http_server::bind(what, addr).await?;
    let local_addr = http_server::local_addr(what, addr, &listener)?;
    let hosts = AllowedHosts::new(local_addr, tls.is_some(), options.hosts);
    let mut guard = guard::Guard::new(options.token, hosts, options.max_upload);
    if let Some(store) = options.tenant_tokens {
        guard = guard.with_tenant_tokens(store);
    }
    let guard = Arc::new(guard);
    let router = routes::router(control, guard, Arc::new(options.audit));
    Ok(match tls {
        Some(config) => {
            let listener = TlsListener::new(listener, config)
                .map_err(|source| http_server::ServeError::Bind { what, addr, source })?;
            http_server::serve_on(what, listener, local_addr, router, "https")
        }
        None => http_server::serve_on(what, listener, local_addr, router, "http"),
    })
}
