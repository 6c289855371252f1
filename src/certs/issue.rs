//! Development and rotation certificates: a small CA and serving certificates signed by it.
use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Subject of every CA made here; a CA is re-created from its key and this name.
const CA_COMMON_NAME: &str = "cftunnel webhook CA";
/// CA lifetime for development certificates.
const DEV_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Serving certificate lifetime for development certificates.
const DEV_SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Fallback backdating if the clock cannot be read as a date.
const BACKDATE: Duration = Duration::from_secs(24 * 3600);

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertGenError {
    #[error("cannot generate a certificate: {0}")]
    Generate(#[source] rcgen::Error),
    #[error("host {host:?} is not a valid DNS name or IP address")]
    BadHost {
        host: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("the CA certificate is not valid PEM")]
    BadCaCertificate(#[source] rustls::pki_types::pem::Error),
    #[error("the CA key is not a usable PEM private key")]
    BadCaKey,
    #[error("the CA key does not match the CA certificate")]
    CaKeyMismatch,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CertGenError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Generate(_) => "generate",
            Self::BadHost { .. } => "bad_host",
            Self::BadCaCertificate(_) => "bad_ca_certificate",
            Self::BadCaKey => "bad_ca_key",
            Self::CaKeyMismatch => "ca_key_mismatch",
            Self::Write { .. } => "write",
        }
    }
}

/// A signing CA; its key never appears in Debug output.
pub struct CertificateAuthority {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl CertificateAuthority {
    /// A new self-signed CA valid for `validity` (backdated one day).
    pub fn generate(validity: Duration) -> Result<Self, CertGenError> {
        let key = KeyPair::generate().map_err(CertGenError::Generate)?;
        let mut params = ca_params();
        set_validity(&mut params, validity);
        let cert = params.self_signed(&key).map_err(CertGenError::Generate)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(ca_params(), key),
        })
    }

    /// Re-opens a CA made by [`CertificateAuthority::generate`] (same subject) from its PEM pair.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertGenError> {
        let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(CertGenError::BadCaCertificate)?;
        let der_key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|_| CertGenError::BadCaKey)?;
        let signing_key = rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(der_key)
            .map_err(|_| CertGenError::BadCaKey)?;
        CertifiedKey::new(vec![cert], signing_key)
            .keys_match()
            .map_err(|_| CertGenError::CaKeyMismatch)?;
        let key = KeyPair::from_pem(key_pem).map_err(|_| CertGenError::BadCaKey)?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            issuer: Issuer::new(ca_params(), key),
        })
    }

    /// The CA certificate, for `caBundle` and client trust stores.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, to be stored in a Secret.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

/// A serving certificate and its key; the key never appears in Debug output.
#[derive(Clone)]
pub struct ServingCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Paths written by [`generate_dev_certs`], plus the CA PEM for a `caBundle`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevCerts {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub ca_pem: String,
}

/// Names a local or in-cluster webhook is reached by.
pub fn default_hosts() -> Vec<String> {
    vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "cftunnel-webhook.cftunnel-system.svc".to_owned(),
        "cftunnel-admission.cftunnel-system.svc".to_owned(),
    ]
}

/// A serving certificate for `hosts` (DNS names or IPs) signed by `ca`, valid for `validity`.
pub fn issue_serving_cert(
    ca: &CertificateAuthority,
    hosts: &[String],
    validity: Duration,
) -> Result<ServingCert, CertGenError> {
    let hosts = if hosts.is_empty() {
        default_hosts()
    } else {
        hosts.to_vec()
    };
    let mut params = CertificateParams::default();
    for host in &hosts {
        // One at a time, so an error names the bad host.
        let single =
            CertificateParams::new(vec![host.clone()]).map_err(|source| CertGenError::BadHost {
                host: host.clone(),
                source,
            })?;
        params.subject_alt_names.extend(single.subject_alt_names);
    }
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, hosts[0].clone());
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, validity);
    let key = KeyPair::generate().map_err(CertGenError::Generate)?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(CertGenError::Generate)?;
    Ok(ServingCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Writes `ca.crt`, `ca.key`, `tls.crt` and `tls.key` into `dir`; keys get mode 0600.
pub fn generate_dev_certs(dir: &Path, hosts: &[String]) -> Result<DevCerts, CertGenError> {
    let ca = CertificateAuthority::generate(DEV_CA_VALIDITY)?;
    let serving = issue_serving_cert(&ca, hosts, DEV_SERVING_VALIDITY)?;
    std::fs::create_dir_all(dir).map_err(|source| CertGenError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let certs = DevCerts {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        tls_cert: dir.join("tls.crt"),
        tls_key: dir.join("tls.key"),
        ca_pem: ca.cert_pem().to_owned(),
    };
    write_file(&certs.ca_cert, ca.cert_pem(), 0o644)?;
    write_file(&certs.ca_key, ca.key_pem(), 0o600)?;
    write_file(&certs.tls_cert, &serving.cert_pem, 0o644)?;
    write_file(&certs.tls_key, &serving.key_pem, 0o600)?;
    Ok(certs)
}

/// Writes through a temporary file renamed into place, so a reader never sees half a file.
pub(crate) fn write_file(path: &Path, content: &str, mode: u32) -> Result<(), CertGenError> {
    let fail = |source| CertGenError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    // The temporary file is created 0600, so a key is never readable by others.
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    file.write_all(content.as_bytes()).map_err(fail)?;
    file.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(fail)?;
    file.persist(path).map_err(|err| fail(err.error))?;
    Ok(())
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Validity from midnight UTC yesterday until `validity` from now, and a random serial so rotated certificates differ.
fn set_validity(params: &mut CertificateParams, validity: Duration) {
    let now = jiff::Timestamp::now();
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let start = today.yesterday().unwrap_or(today);
    let start_at = start
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map(|zoned| zoned.timestamp())
        .unwrap_or(now);
    let since_start = Duration::try_from(now.duration_since(start_at)).unwrap_or(BACKDATE);
    let not_before = rcgen::date_time_ymd(
        i32::from(start.year()),
        u8::try_from(start.month()).unwrap_or(1),
        u8::try_from(start.day()).unwrap_or(1),
    );
    params.not_before = not_before;
    params.not_after = not_before + since_start + validity;
    let mut serial: [u8; 16] = rand::random();
    serial[0] = (serial[0] & 0x7f) | 0x01;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
}

#[cfg(test)]
mod tests {
    use super::*;

    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{ServerName, UnixTime};
    use std::sync::Arc;

    /// Verifies `leaf` for `host` against `ca` as a TLS client would, at `at`.
    fn verify(ca: &str, leaf: &str, host: &str, at: UnixTime) -> Result<(), rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(ca.as_bytes()).expect("ca pem"))?;
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        let leaf = CertificateDer::from_pem_slice(leaf.as_bytes()).expect("leaf pem");
        let name = ServerName::try_from(host.to_owned()).expect("server name");
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], at)
            .map(|_| ())
    }

    #[test]
    fn serving_cert_chains_to_the_ca_for_each_default_host_and_expires() {
        let ca = CertificateAuthority::generate(Duration::from_secs(3600)).expect("ca");
        let leaf = issue_serving_cert(&ca, &[], Duration::from_secs(3600)).expect("leaf");
        for host in default_hosts() {
            assert_eq!(
                verify(ca.cert_pem(), &leaf.cert_pem, &host, UnixTime::now()),
                Ok(()),
                "{host}"
            );
        }
        assert!(
            verify(
                ca.cert_pem(),
                &leaf.cert_pem,
                "elsewhere.example",
                UnixTime::now()
            )
            .is_err()
        );
        let in_two_hours =
            UnixTime::since_unix_epoch(Duration::from_secs(UnixTime::now().as_secs() + 2 * 3600));
        assert!(verify(ca.cert_pem(), &leaf.cert_pem, "localhost", in_two_hours).is_err());
    }

    #[test]
    fn a_reopened_ca_issues_certificates_the_original_ca_vouches_for() {
        let ca = CertificateAuthority::generate(Duration::from_secs(3600)).expect("ca");
        let reopened = CertificateAuthority::from_pem(ca.cert_pem(), ca.key_pem()).expect("reopen");
        let leaf = issue_serving_cert(
            &reopened,
            &["10.0.0.7".to_owned()],
            Duration::from_secs(600),
        )
        .expect("leaf");
        assert_eq!(
            verify(ca.cert_pem(), &leaf.cert_pem, "10.0.0.7", UnixTime::now()),
            Ok(())
        );
    }

    #[test]
    fn ca_debug_hides_the_key() {
        let ca = CertificateAuthority::generate(Duration::from_secs(3600));
        let debug = ca.map(|ca| format!("{ca:?}")).unwrap_or_default();
        assert!(debug.contains("<redacted>"), "{debug}");
        assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    }

    #[test]
    fn rejects_a_bad_host() {
        let ca = CertificateAuthority::generate(Duration::from_secs(3600));
        let err = ca
            .and_then(|ca| {
                issue_serving_cert(&ca, &["bad host\u{e9}".to_owned()], Duration::from_secs(60))
            })
            .err()
            .map(|e| e.metric_label());
        assert_eq!(err, Some("bad_host"));
    }

    #[test]
    fn from_pem_rejects_a_foreign_key() {
        let first = CertificateAuthority::generate(Duration::from_secs(3600));
        let second = CertificateAuthority::generate(Duration::from_secs(3600));
        let reopened = match (&first, &second) {
            (Ok(a), Ok(b)) => CertificateAuthority::from_pem(a.cert_pem(), b.key_pem())
                .err()
                .map(|e| e.metric_label()),
            _ => Some("generate failed"),
        };
        assert_eq!(reopened, Some("ca_key_mismatch"));
    }

    #[test]
    fn writes_four_files_with_private_keys_0600() {
        let dir = tempfile::tempdir();
        let written = dir
            .as_ref()
            .map_err(|e| e.to_string())
            .and_then(|d| generate_dev_certs(d.path(), &[]).map_err(|e| e.to_string()));
        let Ok(certs) = written else {
            panic!("generate_dev_certs failed: {written:?}");
        };
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .ok()
        };
        assert_eq!(mode(&certs.ca_key), Some(0o600));
        assert_eq!(mode(&certs.tls_key), Some(0o600));
        assert_eq!(mode(&certs.tls_cert), Some(0o644));
        assert_eq!(
            std::fs::read_to_string(&certs.ca_cert).ok(),
            Some(certs.ca_pem.clone())
        );
    }
}
