//! An in-memory certificate authority for the API server, its users and local webhook servers.

use std::fmt;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::TestEnvError;

/// Object identifier of the X.520 organizationName attribute (the Kubernetes group of a client cert).
const ORGANIZATION_OID: [u64; 4] = [2, 5, 4, 10];

/// rcgen keys its distinguished name by attribute type, so at most two O attributes fit.
pub(crate) const MAX_GROUPS: usize = 2;

/// A certificate and its private key, both PEM-encoded.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: Vec<u8>,
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The certificate authority every certificate of one control plane chains to.
pub struct TestCa {
    cert_pem: String,
    cert_der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for TestCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCa")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl TestCa {
    /// Creates a fresh self-signed CA (ECDSA P-256).
    pub fn new(common_name: &str) -> Result<TestCa, TestEnvError> {
        let mut params = CertificateParams::default();
        set_validity(&mut params);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(TestCa {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, for `caBundle` fields and client trust stores.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate in DER form.
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// Issues a TLS serving certificate whose SANs are `hosts` (IP literals become IP SANs).
    pub fn issue_server_cert(&self, hosts: &[&str]) -> Result<IssuedCert, TestEnvError> {
        let params = server_params(hosts)?;
        self.sign(&params)
    }

    /// Issues a client certificate that Kubernetes reads as user `user` in `groups`.
    pub(crate) fn issue_client_cert(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<IssuedCert, TestEnvError> {
        let params = client_params(user, groups)?;
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Result<IssuedCert, TestEnvError> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
        })
    }
}

/// Generates a key pair as (private key PKCS#8 PEM, public key SPKI PEM) for service-account tokens.
///
/// kube-apiserver's `--service-account-key-file` does not read a PKCS#8 private key, hence both.
pub(crate) fn generate_key_pair_pem() -> Result<(String, String), TestEnvError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

fn server_params(hosts: &[&str]) -> Result<CertificateParams, TestEnvError> {
    let sans: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let mut params = CertificateParams::new(sans)?;
    set_validity(&mut params);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        DnType::CommonName,
        hosts.first().copied().unwrap_or("localhost"),
    );
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

fn client_params(user: &str, groups: &[&str]) -> Result<CertificateParams, TestEnvError> {
    if groups.len() > MAX_GROUPS {
        return Err(TestEnvError::TooManyGroups {
            max: MAX_GROUPS,
            got: groups.len(),
        });
    }
    let mut params = CertificateParams::default();
    set_validity(&mut params);
    params.distinguished_name = rcgen::DistinguishedName::new();
    let org_types = [
        DnType::OrganizationName,
        DnType::CustomDnType(ORGANIZATION_OID.to_vec()),
    ];
    for (group, ty) in groups.iter().zip(org_types) {
        params.distinguished_name.push(ty, *group);
    }
    params.distinguished_name.push(DnType::CommonName, user);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

/// Valid from a day ago (clock skew) for a year (long demos), instead of rcgen's 1975–4096 default.
fn set_validity(params: &mut CertificateParams) {
    let now = jiff::Timestamp::now();
    let day = jiff::SignedDuration::from_hours(24);
    let to_date = |ts: jiff::Timestamp| {
        let date = ts.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(i32::from(date.year()), date.month() as u8, date.day() as u8)
    };
    if let (Ok(start), Ok(end)) = (now.checked_sub(day), now.checked_add(day * 365)) {
        params.not_before = to_date(start);
        params.not_after = to_date(end);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::RootCertStore;
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::server::WebPkiClientVerifier;

    use super::*;

    /// DER of one RDN attribute: OID then UTF8String value.
    fn attribute_der(oid: &[u8], value: &str) -> Vec<u8> {
        let mut der = vec![0x06, oid.len() as u8];
        der.extend_from_slice(oid);
        der.extend_from_slice(&[0x0c, value.len() as u8]);
        der.extend_from_slice(value.as_bytes());
        der
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    fn verifier(ca: &TestCa) -> Arc<WebPkiServerVerifier> {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca.cert_der().to_vec()))
            .expect("own CA certificate parses");
        WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier builds")
    }

    #[test]
    fn server_cert_is_valid_for_its_sans_only() {
        let ca = TestCa::new("test-ca").expect("CA");
        let issued = ca
            .issue_server_cert(&["127.0.0.1", "localhost"])
            .expect("server cert");
        let leaf = CertificateDer::from(issued.cert_der.clone());
        let verifier = verifier(&ca);
        for host in ["127.0.0.1", "localhost"] {
            let name = ServerName::try_from(host).expect("name");
            verifier
                .verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())
                .unwrap_or_else(|e| panic!("{host} must be accepted: {e}"));
        }
        let other = ServerName::try_from("example.com").expect("name");
        assert!(
            verifier
                .verify_server_cert(&leaf, &[], &other, &[], UnixTime::now())
                .is_err()
        );
    }

    #[test]
    fn client_cert_carries_user_as_cn_and_groups_as_o() {
        let ca = TestCa::new("test-ca").expect("CA");
        let issued = ca
            .issue_client_cert("alice", &["team-a", "system:masters"])
            .expect("client cert");
        let der = &issued.cert_der;
        assert!(contains(der, &attribute_der(&[0x55, 0x04, 0x03], "alice")));
        assert!(contains(der, &attribute_der(&[0x55, 0x04, 0x0a], "team-a")));
        assert!(contains(
            der,
            &attribute_der(&[0x55, 0x04, 0x0a], "system:masters")
        ));

        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca.cert_der().to_vec()))
            .expect("CA parses");
        let client_verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("client verifier");
        client_verifier
            .verify_client_cert(&CertificateDer::from(der.clone()), &[], UnixTime::now())
            .expect("client cert chains to the CA");
    }

    #[test]
    fn client_cert_rejects_more_groups_than_fit() {
        let ca = TestCa::new("test-ca").expect("CA");
        let err = ca.issue_client_cert("bob", &["a", "b", "c"]).err();
        assert!(matches!(
            err,
            Some(TestEnvError::TooManyGroups { max: 2, got: 3 })
        ));
    }

    #[test]
    fn debug_output_hides_private_keys() {
        let ca = TestCa::new("test-ca").expect("CA");
        let issued = ca.issue_client_cert("carol", &[]).expect("cert");
        let shown = format!("{issued:?} {ca:?}");
        assert!(!shown.contains("PRIVATE KEY"));
        assert!(shown.contains("<redacted>"));
    }
}
