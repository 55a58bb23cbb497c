//! TLS for the daemon: rustls (TLS 1.2 and 1.3 only, the ring provider) with a certificate
//! chain and a private key from PEM files (`tls.certFile`, `tls.keyFile`). The pair is read at
//! start (a daemon never starts with a pair it cannot use) and again whenever either file
//! changes or the daemon gets SIGHUP; a new pair that does not load is logged and the one in
//! use is kept, so a half-written renewal never takes the daemon down.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// How often the files are looked at for a change.
const POLL: Duration = Duration::from_secs(5);

/// The certificate and key files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, leaf first.
    pub cert: PathBuf,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The pair in use, and the files' modification times it was read at.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    stamp: Mutex<(Option<SystemTime>, Option<SystemTime>)>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Reads and checks the pair: a chain, a key it can sign with, and the two belonging together.
fn load_pair(files: &TlsFiles) -> Result<Arc<CertifiedKey>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let cert_path = files.cert.display();
    let key_path = files.key.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| format!("tls.certFile: {cert_path}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls.certFile: {cert_path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "tls.certFile: {cert_path}: no certificate (a PEM `CERTIFICATE` block) in it"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("tls.keyFile: {key_path}: no private key in it ({e})"))?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("tls.keyFile: {key_path}: {e}"))?;
    let pair = CertifiedKey::new(certs, signing);
    pair.keys_match().map_err(|e| {
        format!(
            "tls: the key in {key_path} does not belong to the certificate in {cert_path} ({e})"
        )
    })?;
    Ok(Arc::new(pair))
}

/// Accepts TLS connections with the pair in use.
#[derive(Clone)]
pub struct TlsAcceptor {
    acceptor: tokio_rustls::TlsAcceptor,
    pairs: Arc<Reloading>,
}

impl TlsAcceptor {
    /// Loads the pair (an error says which file and why) and makes the acceptor.
    pub fn load(files: &TlsFiles) -> Result<TlsAcceptor, String> {
        let pair = load_pair(files)?;
        let pairs = Arc::new(Reloading {
            files: files.clone(),
            current: RwLock::new(pair),
            stamp: Mutex::new((modified(&files.cert), modified(&files.key))),
        });
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("tls: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(pairs.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            pairs,
        })
    }

    /// The TLS handshake on `stream`.
    pub async fn accept(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        self.acceptor.accept(stream).await
    }

    /// Reads the pair again if a file changed (or always, when `force`): whether a new pair is
    /// in use. A pair that does not load is an error, and the one in use stays.
    pub fn reload(&self, force: bool) -> Result<bool, String> {
        let files = &self.pairs.files;
        let now = (modified(&files.cert), modified(&files.key));
        let mut stamp = self.pairs.stamp.lock().unwrap_or_else(|e| e.into_inner());
        if !force && *stamp == now {
            return Ok(false);
        }
        // Marked seen whatever happens: a broken pair is reported once, not every poll.
        *stamp = now;
        let pair = load_pair(files)?;
        *self
            .pairs
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner()) = pair;
        Ok(true)
    }

    /// Reloads on SIGHUP and when a file changes, until `closing` turns true.
    pub fn spawn_reloader(&self, mut closing: tokio::sync::watch::Receiver<bool>) {
        let this = self.clone();
        tokio::spawn(async move {
            #[cfg(unix)]
            let mut hup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                #[cfg(unix)]
                let hangup = async {
                    match hup.as_mut() {
                        Some(h) => {
                            h.recv().await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                #[cfg(not(unix))]
                let hangup = std::future::pending::<()>();
                let stop = async {
                    let _ = closing.wait_for(|c| *c).await.map(|_| ());
                };
                let force = tokio::select! {
                    _ = stop => return,
                    _ = tokio::time::sleep(POLL) => false,
                    _ = hangup => true,
                };
                match this.reload(force) {
                    Ok(true) => tracing::info!(
                        cert = %this.pairs.files.cert.display(),
                        "TLS certificate reloaded"
                    ),
                    Ok(false) => {}
                    Err(e) => tracing::error!(
                        error = %e,
                        "the new TLS certificate could not be loaded; the one in use is kept"
                    ),
                }
            }
        });
    }
}
