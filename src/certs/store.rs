//! The two certificate Secrets: created when absent (409 AlreadyExists → read the winner's),
//! replaced when due by a server-side apply that carries the `resourceVersion` read (409
//! Conflict → read the winner's).
use std::collections::BTreeMap;
use std::fmt;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use super::lifetime::{RenewReason, StoredPair, ca_renewal, serving_renewal, trust_bundle};
use super::{CertError, CertSettings, FIELD_MANAGER, WRITE_ATTEMPTS};
use crate::certs::{CertificateAuthority, ServingCert, issue_serving_cert};

const CERT_KEY: &str = "tls.crt";
const KEY_KEY: &str = "tls.key";
const BUNDLE_KEY: &str = "ca.crt";

/// The current CA and the trust bundle (`caBundle`) that goes with it.
pub struct CaMaterial {
    pub authority: CertificateAuthority,
    pub bundle: String,
}

impl fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaMaterial")
            .field("authority", &self.authority)
            .field("bundle", &self.bundle)
            .finish()
    }
}

/// What one read of a Secret led to.
enum Step<T> {
    Done(T),
    /// Someone else wrote it meanwhile: read again.
    Retry,
}

/// The CA from its Secret: created when absent, rotated when due (the replaced CA stays in the
/// bundle), and the bundle pruned of expired CAs.
pub async fn ensure_ca(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    now: Timestamp,
) -> Result<CaMaterial, CertError> {
    let name = &settings.ca_secret;
    for _ in 0..WRITE_ATTEMPTS {
        let live = secrets
            .get_opt(name)
            .await
            .map_err(|e| CertError::kube(format!("read Secret {}", place(settings, name)), e))?;
        let step = match live {
            None => create_ca(secrets, settings, now).await?,
            Some(secret) => keep_or_rotate_ca(secrets, settings, &secret, now).await?,
        };
        if let Step::Done(ca) = step {
            return Ok(ca);
        }
    }
    Err(contended(settings, name))
}

async fn create_ca(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    now: Timestamp,
) -> Result<Step<CaMaterial>, CertError> {
    let authority = CertificateAuthority::generate(settings.ca_validity)?;
    let bundle = trust_bundle(authority.cert_pem(), "", now);
    let secret = ca_secret(settings, &authority, &bundle, None);
    let created = create(secrets, settings, &settings.ca_secret, &secret).await?;
    if created {
        tracing::info!(secret = %place(settings, &settings.ca_secret), "created the webhook CA");
        return Ok(Step::Done(CaMaterial { authority, bundle }));
    }
    Ok(Step::Retry)
}

async fn keep_or_rotate_ca(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    secret: &Secret,
    now: Timestamp,
) -> Result<Step<CaMaterial>, CertError> {
    let cert = text(secret, CERT_KEY);
    let stored_bundle = text(secret, BUNDLE_KEY).unwrap_or_default();
    let opened = match (cert, text(secret, KEY_KEY)) {
        (Some(cert), Some(key)) => CertificateAuthority::from_pem(cert, key).ok(),
        _ => None,
    };
    let reason = match &opened {
        Some(authority) => ca_renewal(Some(authority.cert_pem()), now),
        None => Some(RenewReason::Unreadable),
    };
    let version = secret.metadata.resource_version.clone();
    let (authority, previous) = match (opened, reason) {
        (Some(authority), None) => {
            let bundle = trust_bundle(authority.cert_pem(), stored_bundle, now);
            if bundle == stored_bundle {
                return Ok(Step::Done(CaMaterial { authority, bundle }));
            }
            // Only the bundle changed: a replaced CA expired.
            (authority, stored_bundle.to_owned())
        }
        (_, reason) => {
            let reason = reason.unwrap_or(RenewReason::Unreadable);
            tracing::info!(secret = %place(settings, &settings.ca_secret), %reason, "rotating the webhook CA");
            // The replaced CA stays trusted beside the new one until it expires.
            let previous = format!("{}{}", cert.unwrap_or_default(), stored_bundle);
            (
                CertificateAuthority::generate(settings.ca_validity)?,
                previous,
            )
        }
    };
    let bundle = trust_bundle(authority.cert_pem(), &previous, now);
    let desired = ca_secret(settings, &authority, &bundle, version);
    if apply(secrets, settings, &settings.ca_secret, &desired).await? {
        Ok(Step::Done(CaMaterial { authority, bundle }))
    } else {
        Ok(Step::Retry)
    }
}

/// The serving pair from its Secret: issued when absent, re-issued by `ca` when due.
pub async fn ensure_serving(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    ca: &CaMaterial,
    now: Timestamp,
) -> Result<ServingCert, CertError> {
    let name = &settings.serving_secret;
    let hosts = settings.hosts();
    for _ in 0..WRITE_ATTEMPTS {
        let live = secrets
            .get_opt(name)
            .await
            .map_err(|e| CertError::kube(format!("read Secret {}", place(settings, name)), e))?;
        let stored = live.as_ref().and_then(|s| {
            Some(StoredPair {
                cert_pem: text(s, CERT_KEY)?,
                key_pem: text(s, KEY_KEY)?,
            })
        });
        let reason = match (&live, stored) {
            (Some(_), None) => Some(RenewReason::Unreadable),
            (_, stored) => serving_renewal(stored, ca.authority.cert_pem(), &hosts, now),
        };
        let Some(reason) = reason else {
            if let Some(pair) = stored {
                return Ok(ServingCert {
                    cert_pem: pair.cert_pem.to_owned(),
                    key_pem: pair.key_pem.to_owned(),
                });
            }
            continue;
        };
        let pair = issue_serving_cert(&ca.authority, &hosts, settings.serving_validity)?;
        let version = live.and_then(|s| s.metadata.resource_version);
        let exists = version.is_some();
        let desired = serving_secret(settings, &pair, ca.authority.cert_pem(), version);
        let written = if exists {
            apply(secrets, settings, name, &desired).await?
        } else {
            create(secrets, settings, name, &desired).await?
        };
        if written {
            tracing::info!(secret = %place(settings, name), %reason, "issued a webhook serving certificate");
            return Ok(pair);
        }
    }
    Err(contended(settings, name))
}

/// POSTs `secret`; `false` when another writer created it first.
async fn create(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    name: &str,
    secret: &Secret,
) -> Result<bool, CertError> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match secrets.create(&params, secret).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
        Err(e) => Err(CertError::kube(
            format!("create Secret {}", place(settings, name)),
            e,
        )),
    }
}

/// Applies `secret` (which carries the resourceVersion read); `false` when it changed meanwhile.
async fn apply(
    secrets: &Api<Secret>,
    settings: &CertSettings,
    name: &str,
    secret: &Secret,
) -> Result<bool, CertError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match secrets.patch(name, &params, &Patch::Apply(secret)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => Ok(false),
        Err(e) => Err(CertError::kube(
            format!("write Secret {}", place(settings, name)),
            e,
        )),
    }
}

fn ca_secret(
    settings: &CertSettings,
    authority: &CertificateAuthority,
    bundle: &str,
    resource_version: Option<String>,
) -> Secret {
    secret(
        settings,
        &settings.ca_secret,
        [
            (CERT_KEY, authority.cert_pem()),
            (KEY_KEY, authority.key_pem()),
            (BUNDLE_KEY, bundle),
        ],
        resource_version,
    )
}

fn serving_secret(
    settings: &CertSettings,
    pair: &ServingCert,
    ca_pem: &str,
    resource_version: Option<String>,
) -> Secret {
    secret(
        settings,
        &settings.serving_secret,
        [
            (CERT_KEY, pair.cert_pem.as_str()),
            (KEY_KEY, pair.key_pem.as_str()),
            (BUNDLE_KEY, ca_pem),
        ],
        resource_version,
    )
}

fn secret(
    settings: &CertSettings,
    name: &str,
    data: [(&str, &str); 3],
    resource_version: Option<String>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "cftunnel".to_owned(),
            )])),
            resource_version,
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn text<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    let bytes = secret.data.as_ref()?.get(key)?;
    std::str::from_utf8(&bytes.0).ok()
}

fn place(settings: &CertSettings, name: &str) -> String {
    format!("{}/{name}", settings.namespace)
}

fn contended(settings: &CertSettings, name: &str) -> CertError {
    CertError::Contended {
        namespace: settings.namespace.clone(),
        name: name.to_owned(),
        attempts: WRITE_ATTEMPTS,
    }
}
