//! One small HTTP server of `ruststream run` (the admin API, the metrics endpoint): bound
//! before it is reported, stopped gracefully, and named in every error.

use std::io;
use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Why a server could not be started, or failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// The address could not be bound (in use, not local, not permitted).
    #[error("cannot listen for the {what} on {addr}")]
    Bind {
        /// What was to listen there.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server stopped with an error.
    #[error("the {what} on {addr} failed")]
    Serve {
        /// What listened there.
        what: &'static str,
        /// The address it listened on.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server's task panicked.
    #[error("the {what} on {addr} stopped abnormally")]
    Aborted {
        /// What listened there.
        what: &'static str,
        /// The address it listened on.
        addr: SocketAddr,
    },
}

/// Serves `router` on `addr` (port 0: any free port, see [`HttpServer::local_addr`]) and
/// returns once it listens, logging `{what} listening` with the address.
///
/// # Errors
/// [`ServeError::Bind`] when `addr` cannot be bound.
pub(crate) async fn serve(
    what: &'static str,
    addr: SocketAddr,
    router: Router,
) -> Result<HttpServer, ServeError> {
    let listener = bind(what, addr).await?;
    let local_addr = local_addr(what, addr, &listener)?;
    Ok(serve_on(what, listener, local_addr, router, "http"))
}

/// Binds `addr` for the server `what`.
///
/// # Errors
/// [`ServeError::Bind`] when `addr` cannot be bound.
pub(crate) async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { what, addr, source })
}

/// The address `listener`, bound for `addr`, listens on.
///
/// # Errors
/// [`ServeError::Bind`] when it cannot be read.
pub(crate) fn local_addr(
    what: &'static str,
    addr: SocketAddr,
    listener: &TcpListener,
) -> Result<SocketAddr, ServeError> {
    listener
        .local_addr()
        .map_err(|source| ServeError::Bind { what, addr, source })
}

/// Serves `router` on `listener` (bound at `local_addr`, spoken over `scheme`), logging
/// `{what} listening` with the address.
pub(crate) fn serve_on<L>(
    what: &'static str,
    listener: L,
    local_addr: SocketAddr,
    router: Router,
    scheme: &'static str,
) -> HttpServer
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                // A dropped handle stops the server as a sent signal does.
                let _ = stopped.await;
            })
            .await
    });
    tracing::info!(addr = %local_addr, scheme = %scheme, "{what} listening");
    HttpServer {
        what,
        local_addr,
        stop,
        task,
    }
}

/// A running server. Dropping it stops the server too, without waiting for it.
#[derive(Debug)]
pub(crate) struct HttpServer {
    what: &'static str,
    local_addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

impl HttpServer {
    /// The address the server listens on (the port chosen when asked for port 0).
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections, waits for the requests under way to be answered (a deploy
    /// can take a compile's time: bound this with a timeout if that matters) and returns.
    ///
    /// # Errors
    /// How the server failed, if it did.
    pub(crate) async fn shutdown(self) -> Result<(), ServeError> {
        let (what, addr) = (self.what, self.local_addr);
        // An error only says the server has stopped already; its task says why.
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(ServeError::Serve { what, addr, source }),
            Err(_) => Err(ServeError::Aborted { what, addr }),
        }
    }
}
