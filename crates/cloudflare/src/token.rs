//! The connector token: standard base64 of `{"a": account, "t": tunnel, "s": base64 secret}`.
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::error::CloudflareError;
use super::models::SecretString;

/// A decoded connector token. Debug hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TunnelToken {
    pub account_tag: String,
    pub tunnel_id: String,
    /// The tunnel secret, still base64 as in the token.
    pub secret: SecretString,
    /// Optional endpoint (`"e"`), absent in ordinary tokens.
    pub endpoint: Option<String>,
}

impl fmt::Debug for TunnelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunnelToken")
            .field("account_tag", &self.account_tag)
            .field("tunnel_id", &self.tunnel_id)
            .field("secret", &self.secret)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    a: String,
    s: String,
    t: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<String>,
}

impl TunnelToken {
    /// Decodes a token; errors never quote it.
    pub fn decode(token: &str) -> Result<Self, CloudflareError> {
        let json = STANDARD.decode(token.trim()).map_err(|_| {
            CloudflareError::InvalidInput("tunnel token is not standard base64".into())
        })?;
        let wire: Wire = serde_json::from_slice(&json).map_err(|_| {
            CloudflareError::InvalidInput(
                "tunnel token does not hold the JSON object {a, t, s}".into(),
            )
        })?;
        Ok(Self {
            account_tag: wire.a,
            tunnel_id: wire.t,
            secret: SecretString::new(wire.s),
            endpoint: wire.e.filter(|e| !e.is_empty()),
        })
    }

    /// Encodes a token the way cloudflared expects it.
    pub fn encode(&self) -> String {
        let wire = Wire {
            a: self.account_tag.clone(),
            s: self.secret.expose().to_owned(),
            t: self.tunnel_id.clone(),
            e: self.endpoint.clone(),
        };
        // Serialising a struct of strings cannot fail.
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        STANDARD.encode(json)
    }

    /// The secret's bytes (the token carries them base64-encoded).
    pub(crate) fn secret_bytes(&self) -> Result<Vec<u8>, CloudflareError> {
        STANDARD.decode(self.secret.expose().trim()).map_err(|_| {
            CloudflareError::InvalidInput("tunnel secret is not standard base64".into())
        })
    }

    /// True if the decoded secret equals `expected` (constant time over the length).
    pub fn secret_matches(&self, expected: &[u8]) -> bool {
        match self.secret_bytes() {
            Ok(actual) => constant_time_eq(&actual, expected),
            Err(_) => false,
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [
        1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6,
        7, 8,
    ];

    #[test]
    fn decodes_token_and_compares_decoded_secret_bytes() {
        let json = r#"{"a":"0123456789abcdef0123456789abcdef","t":"f70ff985-a4ef-4643-bbbc-4a0ed4fc8415","s":"AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg="}"#;
        let token = TunnelToken::decode(&STANDARD.encode(json)).unwrap();
        assert_eq!(token.account_tag, "0123456789abcdef0123456789abcdef");
        assert_eq!(token.tunnel_id, "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415");
        assert_eq!(token.endpoint, None);
        assert_eq!(token.secret_bytes().unwrap(), SECRET);
        assert!(token.secret_matches(&SECRET));
        let mut other = SECRET;
        other[31] = 9;
        assert!(!token.secret_matches(&other));
        assert!(!token.secret_matches(&SECRET[..31]));
        // The comparison is on bytes, not on the base64 text.
        assert!(!token.secret_matches(token.secret.expose().as_bytes()));
    }

    #[test]
    fn round_trips_and_hides_secret() {
        let token = TunnelToken {
            account_tag: "acc".into(),
            tunnel_id: "tid".into(),
            secret: SecretString::new(STANDARD.encode(SECRET)),
            endpoint: None,
        };
        let encoded = token.encode();
        assert_eq!(
            String::from_utf8(STANDARD.decode(&encoded).unwrap()).unwrap(),
            format!(
                r#"{{"a":"acc","s":"{}","t":"tid"}}"#,
                STANDARD.encode(SECRET)
            )
        );
        assert_eq!(TunnelToken::decode(&encoded).unwrap(), token);
        let debug = format!("{token:?}");
        assert!(debug.contains("secret: ***"), "{debug}");
        assert!(!debug.contains(&STANDARD.encode(SECRET)));
    }

    #[test]
    fn malformed_tokens_are_rejected_without_echo() {
        let err = TunnelToken::decode("not base64 !!").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: tunnel token is not standard base64"
        );
        let err = TunnelToken::decode(&STANDARD.encode(r#"{"a":"x"}"#)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: tunnel token does not hold the JSON object {a, t, s}"
        );
    }
}
