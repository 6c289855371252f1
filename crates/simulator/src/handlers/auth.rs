//! Credential checks: a Bearer token, or an `X-Auth-Email` + `X-Auth-Key` pair.
use http::{HeaderMap, StatusCode};
use sha2::{Digest, Sha256};

use crate::envelope::ApiError;
use crate::state::State;

/// Who made the request, once the credentials check out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    Token(String),
    ApiKey,
}

/// Mapping: malformed header → 400/6003, none → 401/10000, unknown → 403/10000.
pub(crate) fn authenticate(state: &State, headers: &HeaderMap) -> Result<Caller, ApiError> {
    if let Some(value) = headers.get(http::header::AUTHORIZATION) {
        let token = bearer_token(value).ok_or_else(|| malformed(6111, "Authorization"))?;
        return if state.tokens.iter().any(|t| t == token) {
            Ok(Caller::Token(token.to_string()))
        } else {
            Err(ApiError::authentication(StatusCode::FORBIDDEN))
        };
    }
    let email = header_text(headers, "x-auth-email");
    let key = header_text(headers, "x-auth-key");
    match (email, key) {
        (None, None) => Err(ApiError::authentication(StatusCode::UNAUTHORIZED)),
        (Some(Ok(email)), Some(Ok(key))) => {
            if state
                .api_keys
                .iter()
                .any(|(e, k)| e.eq_ignore_ascii_case(email) && k == key)
            {
                Ok(Caller::ApiKey)
            } else {
                Err(ApiError::authentication(StatusCode::FORBIDDEN))
            }
        }
        (_, None | Some(Err(()))) => Err(malformed(6103, "X-Auth-Key")),
        (None | Some(Err(())), _) => Err(malformed(6102, "X-Auth-Email")),
    }
}

/// Token verification: only a known Bearer token is "valid and active".
pub(crate) fn verified_token(state: &State, headers: &HeaderMap) -> Result<String, ApiError> {
    match authenticate(state, headers) {
        Ok(Caller::Token(token)) => Ok(token),
        Ok(Caller::ApiKey) => Err(ApiError::invalid_token()),
        Err(error) if error.status == StatusCode::FORBIDDEN => Err(ApiError::invalid_token()),
        Err(error) => Err(error),
    }
}

/// Hex characters kept of the credential's SHA-256: enough to tell credentials apart in a test.
const FINGERPRINT_LEN: usize = 12;

/// A short non-reversible name for the credential a request carried (known or not), so limits
/// and the log can tell callers apart without holding a secret; `None` without a well-formed one.
pub(crate) fn fingerprint(headers: &HeaderMap) -> Option<String> {
    let mut hasher = Sha256::new();
    if let Some(value) = headers.get(http::header::AUTHORIZATION) {
        hasher.update(b"token:");
        hasher.update(bearer_token(value)?.as_bytes());
    } else {
        let email = header_text(headers, "x-auth-email")?.ok()?;
        let key = header_text(headers, "x-auth-key")?.ok()?;
        hasher.update(b"key:");
        hasher.update(email.to_ascii_lowercase().as_bytes());
        hasher.update(b":");
        hasher.update(key.as_bytes());
    }
    let digest = hasher.finalize();
    let bytes = digest.iter().take(FINGERPRINT_LEN / 2);
    Some(bytes.map(|byte| format!("{byte:02x}")).collect())
}

fn bearer_token(value: &http::HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<Result<&'a str, ()>> {
    headers.get(name).map(|v| {
        v.to_str()
            .map_err(|_| ())
            .map(str::trim)
            .and_then(|s| if s.is_empty() { Err(()) } else { Ok(s) })
    })
}

fn malformed(inner: u32, header: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, 6003, "Invalid request headers")
        .with_chain(inner, format!("Invalid format for {header} header"))
}
