//! The admin HTTP API of `ruststream run`: status, readiness, seek, pause and resume, deploy,
//! reload and rollback, over JSON (see `routes` for the routes and `model` for the bodies).
//!
//! The API has no authentication: whoever reaches it can load code into a tenant and pause it.
//! So it listens on loopback ([`DEFAULT_ADDR`]) and [`serve`] refuses any other address unless
//! remote access is allowed explicitly. The host's side is the [`Control`] trait; this module is
//! only the HTTP layer over it.

pub(crate) mod control;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod model;
mod routes;
#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use control::Control;

use crate::http_server::{self, HttpServer};
pub(crate) use routes::MAX_COMPONENT_BYTES;

/// Where the admin API listens unless told otherwise: loopback, port 9465.
pub(crate) const DEFAULT_ADDR: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9465));

/// The admin API would listen on a non-loopback address without remote access allowed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the admin API would listen on {addr}, which is not a loopback address; it has no \
     authentication, so listen on 127.0.0.1 or allow remote access explicitly \
     (--allow-remote-admin)"
)]
pub(crate) struct NotLoopback {
    /// The address asked for.
    addr: SocketAddr,
}

/// Starts the admin API over `control` on `addr` (port 0: any free port, see
/// [`HttpServer::local_addr`]) and returns once it listens. A non-loopback `addr` is refused
/// unless `allow_remote`; an address that cannot be bound is an error naming it.
pub(crate) async fn serve<C: Control>(
    addr: SocketAddr,
    allow_remote: bool,
    control: Arc<C>,
) -> anyhow::Result<HttpServer> {
    if !allow_remote && !addr.ip().is_loopback() {
        return Err(NotLoopback { addr }.into());
    }
    let app = routes::router(control, MAX_COMPONENT_BYTES);
    Ok(http_server::serve("admin API", addr, app).await?)
}
