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

    /// When the certificate served now expires (Unix seconds); `None` if it does not parse.
    pub fn not_after(&self) -> Option<i64> {
        let served = self.current();
        let leaf = served.cert.first()?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
        Some(cert.validity().not_after.timestamp())
    }

    /// Polls the files every `interval` until `stop` turns true.
    pub(crate) async fn poll(self: Arc<Self>, interval: Duration, mut stop: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = super::until_stopped(&mut stop) => return,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{CertificateAuthority, ServingCert, issue_serving_cert};

    const HOUR: Duration = Duration::from_secs(3600);

    fn serving(ca: &CertificateAuthority) -> ServingCert {
        issue_serving_cert(ca, &["localhost".to_owned()], HOUR).expect("certificate issued")
    }

    fn write(dir: &Path, pair: &ServingCert) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, &pair.cert_pem).expect("cert written");
        std::fs::write(&key, &pair.key_pem).expect("key written");
        (cert, key)
    }

    fn leaf(resolver: &ReloadingResolver) -> Vec<u8> {
        resolver.current().cert[0].to_vec()
    }

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .expect("pem parses")
            .to_vec()
    }

    #[test]
    fn reload_swaps_to_a_new_matching_pair_and_reports_unchanged_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = CertificateAuthority::generate(HOUR).expect("ca");
        let first = serving(&ca);
        let (cert, key) = write(dir.path(), &first);
        let resolver = ReloadingResolver::load(&cert, &key).expect("first pair loads");
        assert_eq!(leaf(&resolver), der(&first.cert_pem));
        assert_eq!(resolver.reload_now().ok(), Some(ReloadOutcome::Unchanged));

        let second = serving(&ca);
        write(dir.path(), &second);
        assert_eq!(resolver.reload_now().ok(), Some(ReloadOutcome::Swapped));
        assert_eq!(leaf(&resolver), der(&second.cert_pem));
    }

    #[test]
    fn the_expiry_is_the_served_certificates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = CertificateAuthority::generate(HOUR * 24).expect("ca");
        let (cert, key) = write(dir.path(), &serving(&ca));
        let resolver = ReloadingResolver::load(&cert, &key).expect("first pair loads");
        let first = resolver.not_after().expect("an expiry");
        let now = jiff::Timestamp::now().as_second();
        // Valid for an hour from now (the start is backdated, the end is not).
        assert!(
            (now + 3000..=now + 3700).contains(&first),
            "{first} vs {now}"
        );
        let longer = issue_serving_cert(&ca, &["localhost".to_owned()], HOUR * 10).expect("issued");
        write(dir.path(), &longer);
        assert_eq!(resolver.reload_now().ok(), Some(ReloadOutcome::Swapped));
        let second = resolver.not_after().expect("an expiry");
        assert!(second > first + 8 * 3600, "{second} vs {first}");
    }

    #[test]
    fn a_key_that_does_not_match_keeps_the_old_pair() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = CertificateAuthority::generate(HOUR).expect("ca");
        let first = serving(&ca);
        let (cert, key) = write(dir.path(), &first);
        let resolver = ReloadingResolver::load(&cert, &key).expect("first pair loads");

        // A new certificate whose key has not been written yet.
        std::fs::write(&cert, serving(&ca).cert_pem).expect("cert written");
        let err = resolver
            .reload_now()
            .err()
            .map(|e| (e.metric_label(), e.to_string()));
        let message = format!(
            "the key in {} does not match the certificate in {}",
            key.display(),
            cert.display()
        );
        assert_eq!(err, Some(("key_mismatch", message)));
        assert_eq!(leaf(&resolver), der(&first.cert_pem));
    }

    #[test]
    fn garbage_files_are_refused_without_quoting_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = CertificateAuthority::generate(HOUR).expect("ca");
        let (cert, key) = write(dir.path(), &serving(&ca));
        let resolver = ReloadingResolver::load(&cert, &key).expect("first pair loads");

        std::fs::write(&cert, "not a certificate").expect("written");
        let err = resolver.reload_now().err().map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!("{} holds no PEM certificate", cert.display()))
        );

        write(dir.path(), &serving(&ca));
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        )
        .expect("written");
        let err = resolver.reload_now().err();
        let shown = err
            .as_ref()
            .map(|e| format!("{e} {e:?}"))
            .unwrap_or_default();
        assert_eq!(err.map(|e| e.metric_label()), Some("unsupported_key"));
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
    }

    #[test]
    fn load_fails_when_files_are_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("absent.crt");
        let err = ReloadingResolver::load(&missing, dir.path().join("absent.key"))
            .err()
            .map(|e| e.metric_label());
        assert_eq!(err, Some("read"));
    }
}
