use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::*;
use crate::certs::{CertificateAuthority, ServingCert, issue_serving_cert};

const HOUR: Duration = Duration::from_secs(3600);
const HOST: &str = "cftunnel-webhook.cftunnel-system.svc";

fn ca(validity: Duration) -> CertificateAuthority {
    CertificateAuthority::generate(validity).expect("CA generated")
}

fn serving(ca: &CertificateAuthority, validity: Duration) -> ServingCert {
    issue_serving_cert(ca, &[HOST.to_owned()], validity).expect("serving certificate issued")
}

fn hosts() -> Vec<String> {
    vec![HOST.to_owned()]
}

fn pair(cert: &ServingCert) -> Option<StoredPair<'_>> {
    Some(StoredPair {
        cert_pem: &cert.cert_pem,
        key_pem: &cert.key_pem,
    })
}

fn later(hours: i64) -> Timestamp {
    Timestamp::now() + SignedDuration::from_hours(hours)
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).expect("timestamp in range")
}

fn facts(not_before: i64, not_after: i64) -> CertFacts {
    CertFacts {
        not_before: at(not_before),
        not_after: at(not_after),
        dns_names: vec![],
        public_key: vec![],
    }
}

fn certs_in(bundle: &str) -> usize {
    bundle.matches("-----BEGIN CERTIFICATE-----").count()
}

#[test]
fn renews_only_in_the_last_third_of_the_lifetime() {
    let cert = facts(0, 3000);
    assert_eq!(lifetime_renewal(&cert, at(0)), None);
    assert_eq!(lifetime_renewal(&cert, at(2000)), None);
    assert_eq!(
        lifetime_renewal(&cert, at(2001)),
        Some(RenewReason::NearExpiry)
    );
    assert_eq!(
        lifetime_renewal(&cert, at(3000)),
        Some(RenewReason::Expired)
    );
    assert_eq!(
        lifetime_renewal(&cert, at(99_999)),
        Some(RenewReason::Expired)
    );
}

proptest! {
    #[test]
    fn renewal_is_monotonic_in_time(start in 0i64..1_000_000, len in 1i64..1_000_000, a in 0i64..3_000_000, b in 0i64..3_000_000) {
        let cert = facts(start, start + len);
        let (early, late) = (a.min(b), a.max(b));
        // Once due, a certificate stays due.
        if lifetime_renewal(&cert, at(early)).is_some() {
            prop_assert!(lifetime_renewal(&cert, at(late)).is_some());
        }
        // Never due while more than a third of the lifetime is left.
        if start + len - early > len / RENEW_DIVISOR {
            prop_assert_eq!(lifetime_renewal(&cert, at(early)), None);
        }
    }
}

#[test]
fn reads_validity_and_dns_names_of_a_serving_certificate() {
    let ca = ca(HOUR);
    let leaf = serving(&ca, HOUR);
    let read = read_cert(&leaf.cert_pem).expect("parses");
    assert_eq!(read.dns_names, hosts());
    let lifetime = read.not_after.as_second() - read.not_before.as_second();
    assert!(
        lifetime > 3600 && lifetime <= 3600 + 2 * 24 * 3600,
        "{lifetime}"
    );
    assert_eq!(read_cert("not a certificate"), None);
}

#[test]
fn a_fresh_serving_certificate_is_kept() {
    let ca = ca(10 * HOUR);
    let leaf = serving(&ca, 24 * HOUR);
    assert_eq!(
        serving_renewal(pair(&leaf), ca.cert_pem(), &hosts(), Timestamp::now()),
        None
    );
}

#[test]
fn serving_renewal_names_each_reason() {
    let ca = ca(10 * HOUR);
    let leaf = serving(&ca, 24 * HOUR);
    let other = self::ca(10 * HOUR);
    let now = Timestamp::now();
    assert_eq!(
        serving_renewal(None, ca.cert_pem(), &hosts(), now),
        Some(RenewReason::Missing)
    );
    assert_eq!(
        serving_renewal(pair(&leaf), other.cert_pem(), &hosts(), now),
        Some(RenewReason::OtherIssuer)
    );
    let elsewhere = vec!["other.cftunnel-system.svc".to_owned()];
    assert_eq!(
        serving_renewal(pair(&leaf), ca.cert_pem(), &elsewhere, now),
        Some(RenewReason::HostMissing(elsewhere[0].clone()))
    );
    let foreign_key = serving(&ca, HOUR).key_pem;
    let mismatched = StoredPair {
        cert_pem: &leaf.cert_pem,
        key_pem: &foreign_key,
    };
    assert_eq!(
        serving_renewal(Some(mismatched), ca.cert_pem(), &hosts(), now),
        Some(RenewReason::KeyMismatch)
    );
    let garbage = StoredPair {
        cert_pem: "garbage",
        key_pem: &leaf.key_pem,
    };
    assert_eq!(
        serving_renewal(Some(garbage), ca.cert_pem(), &hosts(), now),
        Some(RenewReason::Unreadable)
    );
    // A day-long certificate (backdated to yesterday's midnight) is due well within 3 days.
    assert_eq!(
        serving_renewal(pair(&leaf), ca.cert_pem(), &hosts(), later(72)),
        Some(RenewReason::Expired)
    );
}

#[test]
fn ca_renewal_follows_the_lifetime() {
    let ca = ca(HOUR);
    assert_eq!(
        ca_renewal(None, Timestamp::now()),
        Some(RenewReason::Missing)
    );
    assert_eq!(
        ca_renewal(Some("junk"), Timestamp::now()),
        Some(RenewReason::Unreadable)
    );
    // Backdated to yesterday's midnight, an hour-long CA is already in its last third.
    assert_eq!(
        ca_renewal(Some(ca.cert_pem()), Timestamp::now()),
        Some(RenewReason::NearExpiry)
    );
    let long = self::ca(3650 * 24 * HOUR);
    assert_eq!(ca_renewal(Some(long.cert_pem()), Timestamp::now()), None);
}

#[test]
fn rotation_keeps_the_old_ca_beside_the_new_one() {
    let old = ca(100 * HOUR);
    let new = ca(100 * HOUR);
    let bundle = trust_bundle(new.cert_pem(), old.cert_pem(), Timestamp::now());
    assert_eq!(certs_in(&bundle), 2);
    assert!(bundle.starts_with(new.cert_pem()), "current CA first");
    assert!(bundle.ends_with(old.cert_pem()), "replaced CA kept");
    // A certificate the old CA signed still verifies against the bundle's second entry, and
    // one the new CA signs against its first.
    let old_leaf = serving(&old, HOUR);
    let new_leaf = serving(&new, HOUR);
    assert!(signed_by(&old_leaf.cert_pem, old.cert_pem()));
    assert!(signed_by(&new_leaf.cert_pem, &bundle));
    assert!(!signed_by(&old_leaf.cert_pem, new.cert_pem()));
}

#[test]
fn the_bundle_drops_expired_cas_duplicates_and_anything_past_two() {
    let first = ca(HOUR);
    let second = ca(100 * HOUR);
    let third = ca(100 * HOUR);
    // The old CA expired: only the current remains.
    let bundle = trust_bundle(second.cert_pem(), first.cert_pem(), later(72));
    assert_eq!(bundle, second.cert_pem());
    // The current CA is never listed twice.
    let again = trust_bundle(second.cert_pem(), &bundle, Timestamp::now());
    assert_eq!(again, second.cert_pem());
    // A second rotation keeps only the newest two.
    let rotated_twice = trust_bundle(
        third.cert_pem(),
        &format!("{}{}", second.cert_pem(), first.cert_pem()),
        Timestamp::now(),
    );
    assert_eq!(
        rotated_twice,
        format!("{}{}", third.cert_pem(), second.cert_pem())
    );
}

#[test]
fn renew_reasons_read_as_sentences_without_key_material() {
    assert_eq!(
        RenewReason::HostMissing(HOST.into()).to_string(),
        format!("it does not name {HOST}")
    );
    assert_eq!(
        RenewReason::NearExpiry.to_string(),
        "less than a third of its lifetime is left"
    );
}
