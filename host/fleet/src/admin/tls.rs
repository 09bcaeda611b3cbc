//! TLS for the admin API (rustls, with the certificate chain and key the operator gives):
//! required for remote admin, so the token never crosses a network in clear.
//!
//! `TlsListener` hands the HTTP server connections whose handshake is done. Handshakes run
//! beside the accept loop, each bounded in time and a few at once, so a client that stalls in
//! its handshake holds up nobody else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most handshakes under way at once; connections past it are closed at once.
const MAX_HANDSHAKES: usize = 64;

/// The certificate chain and private key files (PEM) the admin API serves TLS with.
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    /// The certificate chain, the server's own first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why the admin API cannot serve TLS with the files given.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("cannot read the admin TLS {what} {}", path.display())]
    Read {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds nothing usable.
    #[error("the admin TLS {what} {} holds no {expected}: {reason}", path.display())]
    Pem {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What it should hold.
        expected: &'static str,
        /// What the PEM reader said.
        reason: String,
    },
    /// The certificate names none of the names clients reach the API by: no client could
    /// verify it.
    #[error("the admin TLS certificate {} cannot be served: {reason}", path.display())]
    Names {
        /// The certificate file.
        path: PathBuf,
        /// Why, with the `openssl` line that makes one that can.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, an unsupported key).
    #[error("the admin TLS certificate {} and key {} cannot be used together: {source}",
        cert.display(), key.display())]
    Refused {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
}

/// The server's TLS configuration: the operator's chain and key, TLS 1.2 and 1.3, HTTP/1.1.
/// The certificate must name one of `names`, the names clients reach the API by.
///
/// # Errors
/// [`TlsError`] naming the file and what is wrong with it.
pub(crate) fn server_config(
    files: &TlsFiles,
    names: &[String],
) -> Result<Arc<ServerConfig>, TlsError> {
    let pem = |what, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            what,
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = pem("certificate", &files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem {
            what: "certificate",
            path: files.cert.clone(),
            expected: "certificate",
            reason: error.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            what: "certificate",
            path: files.cert.clone(),
            expected: "certificate",
            reason: "no `BEGIN CERTIFICATE` section".to_owned(),
        });
    }
    super::certificates::check_names(&chain[0], names).map_err(|reason| TlsError::Names {
        path: files.cert.clone(),
        reason,
    })?;
    let key_pem = pem("key", &files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| TlsError::Pem {
        what: "key",
        path: files.key.clone(),
        expected: "private key",
        reason: error.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let refused = |source| TlsError::Refused {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(refused)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(refused)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepted connections, their TLS handshake done.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
    accepting: JoinHandle<()>,
}

impl TlsListener {
    /// Serves TLS with `config` on `listener`.
    ///
    /// # Errors
    /// When the listener's address cannot be read.
    pub(crate) fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (sender, ready) = mpsc::channel(MAX_HANDSHAKES);
        let accepting = tokio::spawn(accept(listener, TlsAcceptor::from(config), sender));
        Ok(Self {
            ready,
            local_addr,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // Closes the port: nothing accepts for this server any more.
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop ended (it only does when aborted): nothing will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!("admin API: cannot accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "admin API: too many TLS handshakes at once, closing");
            continue;
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    // A send fails only once the server stopped.
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%peer, "admin API: TLS handshake failed: {error}");
                }
                Err(_) => tracing::debug!(%peer, "admin API: TLS handshake timed out"),
            }
        });
    }
}
