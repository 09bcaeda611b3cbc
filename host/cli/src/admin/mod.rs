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

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use control::Control;
pub(crate) use routes::MAX_COMPONENT_BYTES;

/// Where the admin API listens unless told otherwise: loopback, port 9465.
pub(crate) const DEFAULT_ADDR: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9465));

/// Why the admin API could not be started, or failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// A non-loopback address without `allow_remote`.
    #[error(
        "the admin API would listen on {addr}, which is not a loopback address; it has no \
         authentication, so listen on 127.0.0.1 or allow remote access explicitly \
         (--allow-remote-admin)"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound (in use, not local, not permitted).
    #[error("cannot listen for the admin API on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server stopped with an error.
    #[error("the admin API on {addr} failed")]
    Serve {
        /// The address it listened on.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server's task panicked.
    #[error("the admin API on {addr} stopped abnormally")]
    Aborted {
        /// The address it listened on.
        addr: SocketAddr,
    },
}

/// Starts the admin API over `control` on `addr` (port 0: any free port, see
/// [`AdminServer::local_addr`]) and returns once it listens. A non-loopback `addr` is refused
/// unless `allow_remote`; an address that cannot be bound is an error naming it.
pub(crate) async fn serve<C: Control>(
    addr: SocketAddr,
    allow_remote: bool,
    control: Arc<C>,
) -> anyhow::Result<AdminServer> {
    if !allow_remote && !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback { addr }.into());
    }
    let bind = |source| ServeError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let local_addr = listener.local_addr().map_err(bind)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let app = routes::router(control, MAX_COMPONENT_BYTES);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                // A dropped handle stops the server as a sent signal does.
                let _ = stopped.await;
            })
            .await
    });
    tracing::info!(addr = %local_addr, "admin API listening");
    Ok(AdminServer {
        local_addr,
        stop,
        task,
    })
}

/// A running admin API. Dropping it stops the server too, without waiting for it.
#[derive(Debug)]
pub(crate) struct AdminServer {
    local_addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

impl AdminServer {
    /// The address the server listens on (the port chosen when asked for port 0; the host
    /// logs it as `admin API listening`).
    #[cfg(test)]
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections, waits for the requests under way to be answered (a deploy
    /// can take a compile's time: bound this with a timeout if that matters) and returns.
    pub(crate) async fn shutdown(self) -> anyhow::Result<()> {
        let addr = self.local_addr;
        // An error only says the server has stopped already; its task says why.
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(ServeError::Serve { addr, source }.into()),
            Err(_) => Err(ServeError::Aborted { addr }.into()),
        }
    }
}
