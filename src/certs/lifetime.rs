//! Pure certificate decisions: when the CA rotates, when the serving certificate is re-issued,
//! and which CAs the trust bundle (`caBundle`) holds. No I/O; `now` is always an argument.
use std::fmt;

use jiff::Timestamp;
use rcgen::PublicKeyData as _;
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};

/// A certificate is replaced once less than `1 / RENEW_DIVISOR` of its lifetime remains: a
/// one-year serving certificate after eight months, a ten-year CA after six years and eight
/// months (its successor is trusted beside it until it expires).
pub(crate) const RENEW_DIVISOR: i64 = 3;

/// At most this many CAs in a trust bundle: the current one and the one it replaced.
pub(crate) const MAX_BUNDLE_CAS: usize = 2;

/// What one certificate says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// The subject public key bits (no algorithm identifier).
    pub public_key: Vec<u8>,
}

/// Why a certificate (or the CA) is replaced now. Never carries key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenewReason {
    /// There is none yet.
    Missing,
    /// The stored PEM does not parse, or its key does not parse.
    Unreadable,
    /// Past `notAfter`.
    Expired,
    /// Less than a third of its lifetime left.
    NearExpiry,
    /// Not signed by the current CA (the CA was rotated).
    OtherIssuer,
    /// Does not name this host.
    HostMissing(String),
    /// The stored key is not the certificate's key.
    KeyMismatch,
}

impl fmt::Display for RenewReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("none exists yet"),
            Self::Unreadable => f.write_str("the stored certificate or key does not parse"),
            Self::Expired => f.write_str("it has expired"),
            Self::NearExpiry => f.write_str("less than a third of its lifetime is left"),
            Self::OtherIssuer => f.write_str("it is not signed by the current CA"),
            Self::HostMissing(host) => write!(f, "it does not name {host}"),
            Self::KeyMismatch => f.write_str("the stored key does not match it"),
        }
    }
}

/// Reads the first certificate of `pem`; `None` when there is none or it does not parse.
pub fn read_cert(pem: &str) -> Option<CertFacts> {
    let block = Pem::iter_from_buffer(pem.as_bytes()).next()?.ok()?;
    facts(&block)
}

fn facts(block: &Pem) -> Option<CertFacts> {
    let (_, cert) = X509Certificate::from_der(&block.contents).ok()?;
    let timestamp = |t: x509_parser::time::ASN1Time| Timestamp::from_second(t.timestamp()).ok();
    let dns_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(CertFacts {
        not_before: timestamp(cert.validity().not_before)?,
        not_after: timestamp(cert.validity().not_after)?,
        dns_names,
        public_key: cert.public_key().subject_public_key.data.to_vec(),
    })
}

/// Whether a certificate valid from `facts.not_before` to `facts.not_after` is due at `now`.
pub(crate) fn lifetime_renewal(facts: &CertFacts, now: Timestamp) -> Option<RenewReason> {
    let (start, end, now) = (
        facts.not_before.as_second(),
        facts.not_after.as_second(),
        now.as_second(),
    );
    if now >= end {
        return Some(RenewReason::Expired);
    }
    let lifetime = (end - start).max(0);
    (end - now < lifetime / RENEW_DIVISOR).then_some(RenewReason::NearExpiry)
}

/// Whether the CA in `ca_pem` must be replaced at `now`.
pub(crate) fn ca_renewal(ca_pem: Option<&str>, now: Timestamp) -> Option<RenewReason> {
    let Some(pem) = ca_pem else {
        return Some(RenewReason::Missing);
    };
    match read_cert(pem) {
        Some(facts) => lifetime_renewal(&facts, now),
        None => Some(RenewReason::Unreadable),
    }
}

/// A stored serving pair, as PEM.
#[derive(Clone, Copy)]
pub(crate) struct StoredPair<'a> {
    pub cert_pem: &'a str,
    pub key_pem: &'a str,
}

/// Whether the serving pair must be re-issued by the CA `ca_pem` for `hosts` at `now`.
pub(crate) fn serving_renewal(
    pair: Option<StoredPair<'_>>,
    ca_pem: &str,
    hosts: &[String],
    now: Timestamp,
) -> Option<RenewReason> {
    let Some(pair) = pair else {
        return Some(RenewReason::Missing);
    };
    let Some(facts) = read_cert(pair.cert_pem) else {
        return Some(RenewReason::Unreadable);
    };
    let Ok(key) = rcgen::KeyPair::from_pem(pair.key_pem) else {
        return Some(RenewReason::Unreadable);
    };
    if key.der_bytes() != facts.public_key.as_slice() {
        return Some(RenewReason::KeyMismatch);
    }
    if !signed_by(pair.cert_pem, ca_pem) {
        return Some(RenewReason::OtherIssuer);
    }
    if let Some(host) = hosts.iter().find(|h| !facts.dns_names.contains(h)) {
        return Some(RenewReason::HostMissing(host.clone()));
    }
    lifetime_renewal(&facts, now)
}

/// True when the first certificate of `cert_pem` carries a valid signature of the CA `ca_pem`.
pub fn signed_by(cert_pem: &str, ca_pem: &str) -> bool {
    let first = |pem: &str| Pem::iter_from_buffer(pem.as_bytes()).next()?.ok();
    let (Some(leaf), Some(ca)) = (first(cert_pem), first(ca_pem)) else {
        return false;
    };
    let (Ok((_, leaf)), Ok((_, ca))) = (
        X509Certificate::from_der(&leaf.contents),
        X509Certificate::from_der(&ca.contents),
    ) else {
        return false;
    };
    leaf.verify_signature(Some(ca.public_key())).is_ok()
}

/// The trust bundle: `current` first, then CAs of `previous` that are still valid at `now`
/// and differ from `current`, at most [`MAX_BUNDLE_CAS`] in all. During a CA rotation this keeps
/// the replaced CA trusted, so certificates it signed stay valid until they are re-issued.
pub(crate) fn trust_bundle(current: &str, previous: &str, now: Timestamp) -> String {
    let current_der = Pem::iter_from_buffer(current.as_bytes())
        .next()
        .and_then(Result::ok)
        .map(|p| p.contents);
    let mut bundle = normalized(current);
    let mut count = 1;
    for block in Pem::iter_from_buffer(previous.as_bytes()).flatten() {
        if count >= MAX_BUNDLE_CAS {
            break;
        }
        let valid = facts(&block).is_some_and(|f| now < f.not_after);
        if valid && Some(&block.contents) != current_der.as_ref() {
            bundle.push_str(&to_pem(&block.contents));
            count += 1;
        }
    }
    bundle
}

/// The PEM of the first certificate of `pem`, re-encoded canonically (or `pem` as given).
fn normalized(pem: &str) -> String {
    Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .map(|p| to_pem(&p.contents))
        .unwrap_or_else(|| pem.to_owned())
}

fn to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
#[path = "lifetime_tests.rs"]
mod tests;
