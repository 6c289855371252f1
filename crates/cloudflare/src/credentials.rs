//! API credentials: how they authenticate requests, and how they are kept out of logs.
use std::fmt;

use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use super::error::CloudflareError;

const X_AUTH_EMAIL: HeaderName = HeaderName::from_static("x-auth-email");
const X_AUTH_KEY: HeaderName = HeaderName::from_static("x-auth-key");

/// Either an API token (preferred) or the global API key with its account email.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Sent as `Authorization: Bearer <token>`.
    ApiToken(String),
    /// Sent as `X-Auth-Email` + `X-Auth-Key`.
    ApiKey { email: String, key: String },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ApiToken(_) => f.write_str("ApiToken(***)"),
            Self::ApiKey { email, .. } => f
                .debug_struct("ApiKey")
                .field("email", email)
                .field("key", &format_args!("***"))
                .finish(),
        }
    }
}

impl Credentials {
    /// Hex SHA-256 of the credential: a stable key for per-credential state that reveals nothing.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        match self {
            Self::ApiToken(token) => {
                hasher.update(b"token\0");
                hasher.update(token.as_bytes());
            }
            Self::ApiKey { email, key } => {
                hasher.update(b"key\0");
                hasher.update(email.as_bytes());
                hasher.update(b"\0");
                hasher.update(key.as_bytes());
            }
        }
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Builds the authentication headers once, all marked sensitive so no layer prints them.
    pub(crate) fn auth_headers(&self) -> Result<HeaderMap, CloudflareError> {
        let mut headers = HeaderMap::new();
        match self {
            Self::ApiToken(token) => {
                if token.trim().is_empty() {
                    return Err(CloudflareError::InvalidInput("API token is empty".into()));
                }
                let value = sensitive(&format!("Bearer {token}"), "API token")?;
                headers.insert(AUTHORIZATION, value);
            }
            Self::ApiKey { email, key } => {
                if email.trim().is_empty() || key.trim().is_empty() {
                    return Err(CloudflareError::InvalidInput(
                        "API key and email must both be set".into(),
                    ));
                }
                headers.insert(X_AUTH_EMAIL, sensitive(email, "API email")?);
                headers.insert(X_AUTH_KEY, sensitive(key, "API key")?);
            }
        }
        Ok(headers)
    }
}

/// A header value flagged sensitive; the error names the field, never the value.
fn sensitive(value: &str, what: &str) -> Result<HeaderValue, CloudflareError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        CloudflareError::InvalidInput(format!(
            "{what} contains characters not allowed in an HTTP header"
        ))
    })?;
    header.set_sensitive(true);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_token_and_key() {
        let token = Credentials::ApiToken("tok-SECRET-123".into());
        let key = Credentials::ApiKey {
            email: "ops@example.com".into(),
            key: "key-SECRET-456".into(),
        };
        assert_eq!(format!("{token:?}"), "ApiToken(***)");
        assert_eq!(
            format!("{key:?}"),
            r#"ApiKey { email: "ops@example.com", key: *** }"#
        );
    }

    #[test]
    fn headers_are_sensitive_and_well_formed() {
        let headers = Credentials::ApiToken("abc".into()).auth_headers().unwrap();
        let auth = &headers[AUTHORIZATION];
        assert!(auth.is_sensitive());
        assert_eq!(auth.to_str().unwrap(), "Bearer abc");
        assert!(!format!("{headers:?}").contains("abc"));

        let headers = Credentials::ApiKey {
            email: "e@x.io".into(),
            key: "k1".into(),
        }
        .auth_headers()
        .unwrap();
        assert_eq!(headers[&X_AUTH_EMAIL], "e@x.io");
        assert_eq!(headers[&X_AUTH_KEY], "k1");
        assert!(headers[&X_AUTH_KEY].is_sensitive());
        assert!(!headers.contains_key(AUTHORIZATION));
    }

    #[test]
    fn bad_token_is_rejected_without_echo() {
        let err = Credentials::ApiToken("bad\ntoken-XYZ".into())
            .auth_headers()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: API token contains characters not allowed in an HTTP header"
        );
        assert!(!format!("{err:?}").contains("XYZ"));
    }

    #[test]
    fn fingerprints_differ_per_credential_and_hide_it() {
        let a = Credentials::ApiToken("one".into()).fingerprint();
        let b = Credentials::ApiToken("two".into()).fingerprint();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(a, Credentials::ApiToken("one".into()).fingerprint());
        assert!(!a.contains("one"));
    }
}
