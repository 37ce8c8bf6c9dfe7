//! HTTPS: `server.tls_cert` and `server.tls_key` (PEM files) turn the listener into a TLS one
//! (rustls, TLS 1.2 and 1.3). Handshakes run on their own tasks, each with a time limit, so that
//! a client that connects and says nothing holds up no one else; a failed handshake is counted
//! and dropped, never an error of the server.

use crate::ServerError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose handshake is done, waiting for the server to take them.
const READY_CONNECTIONS: usize = 128;

/// The server's TLS settings from a certificate chain and its private key, both PEM files.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let tls = |what: &str, path: &Path, e: &dyn std::fmt::Display| ServerError::Tls {
        message: format!("{what} {}: {e}", path.display()),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| tls("cannot read the certificate", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| tls("cannot read the certificate", cert, &e))?;
    if chain.is_empty() {
        return Err(tls("no certificate (PEM 'BEGIN CERTIFICATE') in", cert, &"empty"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        tls("cannot read a private key (PEM, PKCS#8, PKCS#1 or SEC1) from", key, &e)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls { message: e.to_string() })?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| ServerError::Tls {
            message: format!(
                "the key {} does not go with the certificate {}: {e}",
                key.display(),
                cert.display()
            ),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener that hands the server TLS connections whose handshake is done.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    /// Handshakes that failed or timed out.
    pub failed_handshakes: Arc<AtomicU64>,
}

impl TlsListener {
    /// Accepts TCP connections on `listener` (on the current tokio runtime) and runs their
    /// handshakes with `config`.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (send, ready) = mpsc::channel(READY_CONNECTIONS);
        let failed_handshakes = Arc::new(AtomicU64::new(0));
        let failed = failed_handshakes.clone();
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, address) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // out of file descriptors and the like: wait, as axum's own loop does
                        eprintln!("needle: accepting a connection failed: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                // results are small writes that must go out at once (see `serve`)
                let _ = tcp.set_nodelay(true);
                let (acceptor, ready, failed) = (acceptor.clone(), send.clone(), failed.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = ready.send((stream, address)).await;
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
                if send.is_closed() {
                    return;
                }
            }
        });
        Ok(Self { ready, local, failed_handshakes })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // the accepting task ended: nothing more will come
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
