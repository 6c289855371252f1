//! Serving certificate that is re-read from disk, so rotation needs no restart.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// Why a certificate/key pair could not be loaded. Messages name files, never their content.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not a valid PEM certificate chain")]
    BadCertificate {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no usable PEM private key")]
    BadKey {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the key in {key} is not supported")]
    UnsupportedKey {
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("the key in {key} does not match the certificate in {cert}")]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

impl TlsError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::NoCertificate { .. } => "no_certificate",
            Self::BadCertificate { .. } => "bad_certificate",
            Self::BadKey { .. } => "bad_key",
            Self::UnsupportedKey { .. } => "unsupported_key",
            Self::KeyMismatch { .. } => "key_mismatch",
        }
    }
}

/// What a reload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The files hold the pair already served.
    Unchanged,
    /// A new pair was loaded; new handshakes use it.
    Swapped,
}

/// Fingerprint of the file contents, so unchanged files are not re-parsed and symlink mtimes do not matter.
type Fingerprint = [u8; 32];

#[derive(Debug, Default)]
struct Seen {
    loaded: Fingerprint,
    /// Last pair refused, so a bad pair is warned about once rather than on every poll.
    refused: Option<Fingerprint>,
}

/// A `ResolvesServerCert` whose pair is swapped when the files on disk change.
#[derive(Debug)]
pub struct ReloadingResolver {
    cert_file: PathBuf,
    key_file: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    seen: Mutex<Seen>,
}

impl ReloadingResolver {
    /// Loads the first pair; fails if it does not load, since there is nothing to serve.
    pub fn load(
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Result<Arc<Self>, TlsError> {
        let cert_file = cert_file.into();
        let key_file = key_file.into();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (cert_pem, key_pem) = read_pair(&cert_file, &key_file)?;
        let certified = parse_pair(&provider, &cert_file, &key_file, &cert_pem, &key_pem)?;
        Ok(Arc::new(Self {
            seen: Mutex::new(Seen {
                loaded: fingerprint(&cert_pem, &key_pem),
                refused: None,
            }),
            current: RwLock::new(Arc::new(certified)),
            cert_file,
            key_file,
            provider,
        }))
    }

    /// Re-reads both files now; a pair that does not parse or match leaves the served pair in place.
    pub fn reload_now(&self) -> Result<ReloadOutcome, TlsError> {
        let (cert_pem, key_pem) = read_pair(&self.cert_file, &self.key_file)?;
        let print = fingerprint(&cert_pem, &key_pem);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.loaded == print {
            return Ok(ReloadOutcome::Unchanged);
        }
        match parse_pair(
            &self.provider,
            &self.cert_file,
            &self.key_file,
            &cert_pem,
            &key_pem,
        ) {
            Ok(certified) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(certified);
                *seen = Seen {
                    loaded: print,
                    refused: None,
                };
                tracing::info!(cert = %self.cert_file.display(), "loaded a new serving certificate");
                Ok(ReloadOutcome::Swapped)
            }
            Err(err) => {
                if seen.refused != Some(print) {
                    seen.refused = Some(print);
                    tracing::warn!(error = %err, "kept the current serving certificate");
                }
                Err(err)
            }
        }
    }

    /// The pair served to new handshakes.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Polls the files every `interval` until `stop` turns true.
    pub(crate) async fn poll(self: Arc<Self>, interval: Duration, mut stop: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = super::server::until_stopped(&mut stop) => return,
                _ = ticker.tick() => {
                    let resolver = self.clone();
                    // File reads block; keep them off the async workers.
                    let reloaded = tokio::task::spawn_blocking(move || resolver.reload_now()).await;
                    if let Ok(Err(err @ TlsError::Read { .. })) = reloaded {
                        tracing::warn!(error = %err, "kept the current serving certificate");
                    }
                }
            }
        }
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// TLS 1.2 and 1.3 with ring, ALPN h2 and http/1.1, certificates from `resolver`.
pub fn server_config(resolver: Arc<ReloadingResolver>) -> Result<ServerConfig, rustls::Error> {
    let provider = resolver.provider.clone();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Reads both files by path each time, so a swapped `..data` symlink is followed.
fn read_pair(cert_file: &Path, key_file: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    Ok((read(cert_file)?, read(key_file)?))
}

fn fingerprint(cert_pem: &[u8], key_pem: &[u8]) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update((cert_pem.len() as u64).to_be_bytes());
    hasher.update(cert_pem);
    hasher.update(key_pem);
    hasher.finalize().into()
}

fn parse_pair(
    provider: &CryptoProvider,
    cert_file: &Path,
    key_file: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::BadCertificate {
            path: cert_file.to_owned(),
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_file.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::BadKey {
        path: key_file.to_owned(),
        source,
    })?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|source| TlsError::UnsupportedKey {
            key: key_file.to_owned(),
            source,
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|source| TlsError::KeyMismatch {
            cert: cert_file.to_owned(),
            key: key_file.to_owned(),
            source,
        })?;
    Ok(certified)
}
