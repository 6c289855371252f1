//! The checks Access bodies share: Go duration text and policy rules.
use serde_json::{Map, Value};

use super::access::invalid;
use crate::envelope::ApiError;

/// Go's duration units, longest first where one is a prefix of another.
const DURATION_UNITS: [&str; 7] = ["ns", "us", "µs", "ms", "s", "m", "h"];

/// Every selector the subset's `access_rule` knows.
const KNOWN_SELECTORS: [&str; 19] = [
    "email",
    "email_list",
    "email_domain",
    "everyone",
    "ip",
    "ip_list",
    "certificate",
    "group",
    "azureAD",
    "github-organization",
    "gsuite",
    "okta",
    "saml",
    "service_token",
    "any_valid_service_token",
    "external_evaluation",
    "geo",
    "auth_method",
    "device_posture",
];

/// Go's `time.ParseDuration` text without a sign: `300ms`, `2h45m`, `1.5h`, or `0`.
pub(super) fn is_duration(text: &str) -> bool {
    if text == "0" {
        return true;
    }
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..end];
        if !number.chars().any(|c| c.is_ascii_digit()) || number.matches('.').count() > 1 {
            return false;
        }
        rest = &rest[end..];
        let Some(unit) = DURATION_UNITS.iter().find(|u| rest.starts_with(**u)) else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

/// An optional duration field; `default` when absent or null.
pub(super) fn duration(
    body: &Map<String, Value>,
    field: &str,
    default: &str,
) -> Result<String, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(text)) if is_duration(text) => Ok(text.clone()),
        Some(_) => Err(invalid(format!(
            "`{field}` must be a duration such as 24h or 2h45m"
        ))),
    }
}

/// A list of rules (`include`, `exclude`, `require`); `required` refuses an absent one.
pub(super) fn rules(
    body: &Map<String, Value>,
    field: &str,
    required: bool,
) -> Result<Vec<Value>, ApiError> {
    let list = match body.get(field) {
        None | Some(Value::Null) if required => {
            return Err(invalid(format!("`{field}` is required")));
        }
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(invalid(format!("`{field}` must be a list of rules"))),
    };
    for (index, rule) in list.iter().enumerate() {
        check_rule(&format!("{field}[{index}]"), rule)?;
    }
    Ok(list.clone())
}

/// One rule: an object with exactly one selector, of a kind the simulator checks.
fn check_rule(at: &str, rule: &Value) -> Result<(), ApiError> {
    let Some(selectors) = rule.as_object() else {
        return Err(invalid(format!("{at} must be an object")));
    };
    let mut entries = selectors.iter();
    let (Some((kind, inner)), None) = (entries.next(), entries.next()) else {
        return Err(invalid(format!("{at} must hold exactly one selector")));
    };
    let text = |field: &str| -> Result<&str, ApiError> {
        match inner.get(field) {
            Some(Value::String(value)) if !value.trim().is_empty() => Ok(value),
            _ => Err(invalid(format!("{at}.{kind}.{field} is required"))),
        }
    };
    match kind.as_str() {
        "email" => {
            let email = text("email")?;
            if !is_email(email) {
                return Err(invalid(format!("{at}.email.email is not an email address")));
            }
        }
        "email_domain" => {
            text("domain")?;
        }
        "group" => {
            text("id")?;
        }
        "service_token" => {
            text("token_id")?;
        }
        "any_valid_service_token" | "everyone" => {
            if !inner.is_object() {
                return Err(invalid(format!("{at}.{kind} must be an object")));
            }
        }
        other if KNOWN_SELECTORS.contains(&other) => {
            return Err(invalid(format!("{at}: `{other}` rules are not simulated")));
        }
        other => return Err(invalid(format!("{at}: unknown selector `{other}`"))),
    }
    Ok(())
}

/// `local@domain`, both parts present, no spaces: enough to keep answers schema-valid.
fn is_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_go() {
        for good in [
            "24h", "300ms", "2h45m", "1.5h", "0", "0s", "10µs", "5us", "1h0m0s",
        ] {
            assert!(is_duration(good), "{good}");
        }
        for bad in ["", "24", "h", "1d", "-1h", "1..5h", ".h", "1h 2m", "24H"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }

    #[test]
    fn emails_need_both_parts() {
        assert!(is_email("ops@example.com"));
        for bad in ["ops", "@example.com", "ops@", "a@b@c", "o ps@example.com"] {
            assert!(!is_email(bad), "{bad}");
        }
    }
}
