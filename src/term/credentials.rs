//! API credentials from the user's Secret (read on every reconcile, so a rotated token takes
//! effect) and tunnel credentials from the managed Secret, a credentials.json or a token.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use serde::Deserialize;

use super::ReconcileError;
use super::conditions::ReadyReason;
use cftunnel_cloudflare::{Credentials, MIN_TUNNEL_SECRET_BYTES, TunnelToken};
use cftunnel_policy::render::TunnelCredentials;
use cftunnel_policy::render::config::CREDENTIALS_KEY;
use cftunnel_types::CloudflareDetails;

/// Key of the managed Secret holding the base64 tunnel secret before the tunnel exists.
pub const PENDING_SECRET_KEY: &str = "tunnelSecret";

/// What the API Secret holds; `Debug` is deliberately absent (it carries credentials).
pub(crate) struct ApiSecret {
    pub credentials: Credentials,
    /// A whole credentials.json of an existing tunnel.
    pub credential_file: Option<Vec<u8>>,
    /// Only the base64 TunnelSecret of an existing tunnel.
    pub credential_secret: Option<String>,
    /// The Secret's finalizers, for the guard.
    pub finalizers: Vec<String>,
    pub resource_version: Option<String>,
}

fn value(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    let bytes = secret.data.as_ref()?.get(key)?.0.clone();
    let trimmed = String::from_utf8_lossy(&bytes).trim().to_string();
    (!trimmed.is_empty()).then(|| trimmed.into_bytes())
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    value(secret, key).map(|v| String::from_utf8_lossy(&v).into_owned())
}

/// Reads the API Secret named by `spec.cloudflare.secret` in `namespace`.
pub(crate) async fn read_api_secret(
    client: &Client,
    namespace: &str,
    details: &CloudflareDetails,
) -> Result<ApiSecret, ReconcileError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(&details.secret)
        .await
        .map_err(|source| ReconcileError::kube("reading the API Secret", source))?
        .ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::SecretNotFound,
                format!(
                    "Secret {namespace}/{} named by spec.cloudflare.secret does not exist",
                    details.secret
                ),
            )
        })?;
    let credentials = if let Some(token) = text(&secret, &details.api_token_key) {
        Credentials::ApiToken(token)
    } else if let Some(key) = text(&secret, &details.api_key_key) {
        let email = details
            .email
            .clone()
            .filter(|e| !e.is_empty())
            .ok_or_else(|| {
                ReconcileError::blocked(
                    ReadyReason::SecretKeyMissing,
                    format!(
                        "Secret {namespace}/{} holds key {} (a global API key) but spec.cloudflare.email is not set",
                        details.secret, details.api_key_key
                    ),
                )
            })?;
        Credentials::ApiKey { email, key }
    } else {
        return Err(ReconcileError::blocked(
            ReadyReason::SecretKeyMissing,
            format!(
                "Secret {namespace}/{} has neither key {} (API token) nor key {} (global API key)",
                details.secret, details.api_token_key, details.api_key_key
            ),
        ));
    };
    Ok(ApiSecret {
        credentials,
        credential_file: value(&secret, &details.credential_file_key),
        credential_secret: text(&secret, &details.credential_secret_key),
        finalizers: secret.metadata.finalizers.clone().unwrap_or_default(),
        resource_version: secret.metadata.resource_version.clone(),
    })
}

#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "AccountTag")]
    account_tag: String,
    #[serde(rename = "TunnelSecret")]
    tunnel_secret: String,
    #[serde(rename = "TunnelID")]
    tunnel_id: String,
}

/// Parses a credentials.json; errors never quote it.
pub(crate) fn parse_credentials_file(bytes: &[u8]) -> Option<TunnelCredentials> {
    let file: CredentialsFile = serde_json::from_slice(bytes).ok()?;
    decode_secret(&file.tunnel_secret)?;
    Some(TunnelCredentials {
        account_tag: file.account_tag,
        secret_b64: file.tunnel_secret,
        tunnel_id: file.tunnel_id,
    })
}

/// The decoded bytes of a base64 tunnel secret, if it is long enough for cloudflared.
pub(crate) fn decode_secret(secret_b64: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(secret_b64.trim())
        .ok()
        .filter(|b| b.len() >= MIN_TUNNEL_SECRET_BYTES)
}

/// Credentials handed out by the token endpoint.
pub(crate) fn from_token(token: &str) -> Result<TunnelCredentials, ReconcileError> {
    let decoded = TunnelToken::decode(token).map_err(|_| {
        ReconcileError::blocked(
            ReadyReason::CredentialsInvalid,
            "the tunnel token from Cloudflare cannot be decoded".to_string(),
        )
    })?;
    Ok(TunnelCredentials {
        account_tag: decoded.account_tag,
        secret_b64: decoded.secret.expose().to_string(),
        tunnel_id: decoded.tunnel_id,
    })
}

/// What the managed Secret already holds: the rendered credentials, or only the pending secret.
pub enum Stored {
    Credentials(TunnelCredentials),
    Pending(Vec<u8>),
    Nothing,
}

pub fn stored(secret: Option<&Secret>) -> Stored {
    let Some(secret) = secret else {
        return Stored::Nothing;
    };
    if let Some(creds) = value(secret, CREDENTIALS_KEY).and_then(|b| parse_credentials_file(&b)) {
        return Stored::Credentials(creds);
    }
    match text(secret, PENDING_SECRET_KEY).and_then(|s| decode_secret(&s)) {
        Some(bytes) => Stored::Pending(bytes),
        None => Stored::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_file_round_trip_and_short_secret_refused() {
        let secret = STANDARD.encode([7u8; 32]);
        let json = format!(
            r#"{{"AccountTag":"acc","TunnelSecret":"{secret}","TunnelID":"id-1","Endpoint":""}}"#
        );
        let creds = parse_credentials_file(json.as_bytes());
        assert_eq!(
            creds.map(|c| (c.account_tag, c.tunnel_id, c.secret_b64)),
            Some(("acc".into(), "id-1".into(), secret))
        );
        let short = STANDARD.encode([7u8; 8]);
        let json = format!(r#"{{"AccountTag":"a","TunnelSecret":"{short}","TunnelID":"i"}}"#);
        assert!(parse_credentials_file(json.as_bytes()).is_none());
        assert!(parse_credentials_file(b"not json").is_none());
    }
}
