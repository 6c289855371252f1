//! What the private-network bodies may hold: texts and their lengths, ranges, hostnames.
//! Every refusal is 400/1001 with the field named.
use serde_json::{Map, Value};

use crate::cidr::Cidr;
use crate::envelope::ApiError;

/// Longest route comment, IP routes (the 2026 API reference) and hostname routes alike (no
/// limit is stated for hostname routes; the simulator holds them to the same one, inferred).
pub(crate) const ROUTE_COMMENT_MAX: usize = 100;
/// Longest virtual network name and comment (the schema's `maxLength`).
pub(crate) const NETWORK_TEXT_MAX: usize = 256;
/// Hostnames have fewer than 255 characters.
pub(crate) const HOSTNAME_MAX: usize = 254;

/// A string field of at most `max` characters; `None` when absent or `null`.
pub(super) fn text(
    body: &Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.chars().count() <= max => Ok(Some(text.clone())),
        Some(Value::String(_)) => Err(ApiError::invalid_request(format!(
            "`{key}` must have at most {max} characters"
        ))),
        Some(_) => Err(ApiError::invalid_request(format!(
            "`{key}` must be a string"
        ))),
    }
}

/// A string field that must be present and not blank.
pub(super) fn required_text(
    body: &Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<String, ApiError> {
    text(body, key, max)?
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::invalid_request(format!("missing required field `{key}`")))
}

/// A boolean field; `None` when absent or `null`.
pub(super) fn flag(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(ApiError::invalid_request(format!(
            "`{key}` must be true or false"
        ))),
    }
}

/// The `network` field as canonical CIDR text; `None` when absent.
pub(super) fn network(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    text(body, "network", usize::MAX)?
        .map(|text| {
            Cidr::parse(&text)
                .map(|cidr| cidr.to_string())
                .map_err(|e| ApiError::invalid_request(format!("`network`: {e}")))
        })
        .transpose()
}

/// A CIDR query filter (`network_subset`, `network_superset`); `None` when absent.
pub(super) fn cidr_filter(value: Option<&str>, key: &str) -> Result<Option<Cidr>, ApiError> {
    value
        .map(|text| {
            Cidr::parse(text).map_err(|e| ApiError::invalid_request(format!("`{key}`: {e}")))
        })
        .transpose()
}

/// The `hostname` field, normalised; `None` when absent.
pub(super) fn hostname(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    text(body, "hostname", usize::MAX)?
        .map(|raw| {
            normalize_hostname(&raw)
                .map_err(|e| ApiError::invalid_request(format!("`hostname` {raw:?}: {e}")))
        })
        .transpose()
}

/// A private hostname as stored: lower-case, leading `*` and `.` and a trailing `.` trimmed
/// (`*.internal.local` routes `internal.local` and everything under it). Refused: empty, a
/// `*` anywhere else, an empty label, a character other than a letter, digit, `-` or `_`
/// in a label, 255 characters or more.
pub(crate) fn normalize_hostname(raw: &str) -> Result<String, String> {
    let name = raw
        .trim()
        .trim_start_matches(['*', '.'])
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if name.is_empty() {
        return Err("is empty".into());
    }
    if name.len() > HOSTNAME_MAX {
        return Err(format!("is longer than {HOSTNAME_MAX} characters"));
    }
    if name.contains('*') {
        return Err("has a `*` other than a leading one".into());
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if !name.split('.').all(label_ok) {
        return Err("is not a hostname".into());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_are_trimmed_lowered_and_checked() {
        let ok = |raw: &str| normalize_hostname(raw).expect(raw);
        assert_eq!(ok("*.Internal.Local"), "internal.local");
        assert_eq!(ok(".db.corp."), "db.corp");
        assert_eq!(ok("office-1.local"), "office-1.local");
        assert_eq!(ok("_svc.local"), "_svc.local");
        for bad in ["", "*.", "a.*.local", "a..local", "a b.local", "ä.local"] {
            assert!(normalize_hostname(bad).is_err(), "{bad:?}");
        }
        assert!(normalize_hostname(&"a".repeat(255)).is_err());
        assert_eq!(ok(&"a".repeat(254)).len(), 254);
    }
}
