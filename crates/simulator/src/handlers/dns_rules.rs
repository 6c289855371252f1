//! DNS record validation and the conflict rules between records sharing a name.
use std::net::{Ipv4Addr, Ipv6Addr};

use http::StatusCode;
use serde_json::{Map, Value};

use crate::envelope::ApiError;
use crate::state::SimDnsRecord;

/// Types whose records need only `content` (and `priority` for MX), as the schema requires.
const SUPPORTED_TYPES: [&str; 7] = ["A", "AAAA", "CNAME", "TXT", "NS", "PTR", "MX"];

/// Types the schema knows that carry a structured `data` object instead.
const DATA_TYPES: [&str; 13] = [
    "CAA", "CERT", "DNSKEY", "DS", "HTTPS", "LOC", "NAPTR", "SMIMEA", "SRV", "SSHFP", "SVCB",
    "TLSA", "URI",
];

/// A validated record request, before ids and timestamps are attached.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Draft {
    pub record_type: String,
    pub name: String,
    pub content: String,
    pub ttl: u32,
    pub proxied: bool,
    pub priority: Option<u16>,
    pub comment: Option<String>,
    pub tags: Vec<String>,
}

pub(super) fn proxiable(record_type: &str) -> bool {
    matches!(record_type, "A" | "AAAA" | "CNAME")
}

/// Validates a full record body; fields left out take Cloudflare's defaults.
pub(super) fn parse_draft(body: &Map<String, Value>, zone_name: &str) -> Result<Draft, ApiError> {
    let record_type = required_text(body, "type")?.to_ascii_uppercase();
    if DATA_TYPES.contains(&record_type.as_str()) {
        return Err(ApiError::dns_validation(format!(
            "{record_type} records carry `data`, which this simulator does not support"
        )));
    }
    if !SUPPORTED_TYPES.contains(&record_type.as_str()) {
        return Err(ApiError::dns_validation(format!(
            "unknown record type {record_type:?}"
        )));
    }
    let name = qualify(required_text(body, "name")?, zone_name);
    if name.len() > 255 {
        return Err(ApiError::dns_validation(
            "`name` is longer than 255 characters",
        ));
    }
    let content = required_text(body, "content")?.to_string();
    check_content(&record_type, &name, &content)?;
    let ttl = match body.get("ttl") {
        None | Some(Value::Null) => 1,
        Some(value) => value
            .as_u64()
            .filter(|t| *t == 1 || (30..=86_400).contains(t))
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    9021,
                    "TTL must be between 30 and 86400 seconds, or 1 for Automatic.",
                )
            })?,
    };
    let proxied = match body.get("proxied") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(p)) => *p,
        Some(_) => return Err(ApiError::dns_validation("`proxied` must be a boolean")),
    };
    if proxied && !proxiable(&record_type) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            9004,
            "This record type cannot be proxied.",
        ));
    }
    let priority = match body.get("priority") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| {
                    ApiError::dns_validation("`priority` must be between 0 and 65535")
                })?,
        ),
    };
    if record_type == "MX" && priority.is_none() {
        return Err(ApiError::dns_validation("MX records require `priority`"));
    }
    let comment = match body.get("comment") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if c.contains(['\n', '\r']) => {
            return Err(ApiError::dns_validation(
                "`comment` must not contain line breaks",
            ));
        }
        Some(Value::String(c)) if c.is_empty() => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(ApiError::dns_validation("`comment` must be a string")),
    };
    let tags = match body.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::dns_validation("`tags` must be strings"))?,
        Some(_) => {
            return Err(ApiError::dns_validation(
                "`tags` must be an array of strings",
            ));
        }
    };
    Ok(Draft {
        record_type,
        name,
        content,
        ttl,
        proxied,
        priority,
        comment,
        tags,
    })
}

fn required_text<'b>(body: &'b Map<String, Value>, field: &str) -> Result<&'b str, ApiError> {
    match body.get(field) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.trim()),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(ApiError::dns_validation(
            format!("missing required field `{field}`"),
        )),
        Some(_) => Err(ApiError::dns_validation(format!(
            "`{field}` must be a string"
        ))),
    }
}

/// Lower-cases, drops a trailing dot, expands `@` and relative names to FQDNs in the zone.
pub(super) fn qualify(name: &str, zone_name: &str) -> String {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "@" || name == zone_name {
        zone_name.to_string()
    } else if name.ends_with(&format!(".{zone_name}")) {
        name
    } else {
        format!("{name}.{zone_name}")
    }
}

fn check_content(record_type: &str, name: &str, content: &str) -> Result<(), ApiError> {
    match record_type {
        "A" if content.parse::<Ipv4Addr>().is_err() => Err(ApiError::dns_validation(
            "Content for A record must be a valid IPv4 address.",
        )),
        "AAAA" if content.parse::<Ipv6Addr>().is_err() => Err(ApiError::dns_validation(
            "Content for AAAA record must be a valid IPv6 address.",
        )),
        "CNAME" if content.trim_end_matches('.').eq_ignore_ascii_case(name) => Err(
            ApiError::dns_validation("CNAME content must not match the record's name."),
        ),
        _ => Ok(()),
    }
}

/// Refuses a record that duplicates or clashes with another one (`except` is the record updated).
pub(super) fn check_conflicts(
    draft: &Draft,
    records: &[SimDnsRecord],
    except: Option<&str>,
) -> Result<(), ApiError> {
    let same_name = records
        .iter()
        .filter(|r| except != Some(r.id.as_str()) && r.name.eq_ignore_ascii_case(&draft.name));
    for existing in same_name {
        if existing.record_type == draft.record_type && same_content(draft, existing) {
            return Err(conflict(81058, "An identical record already exists."));
        }
        let existing_aliasing = matches!(existing.record_type.as_str(), "A" | "AAAA" | "CNAME");
        if draft.record_type == "CNAME" && existing_aliasing {
            return Err(conflict(
                81053,
                "An A, AAAA, or CNAME record with that host already exists.",
            ));
        }
        if matches!(draft.record_type.as_str(), "A" | "AAAA") && existing.record_type == "CNAME" {
            return Err(conflict(
                81054,
                "A CNAME record with that host already exists.",
            ));
        }
    }
    Ok(())
}

fn same_content(draft: &Draft, existing: &SimDnsRecord) -> bool {
    if matches!(draft.record_type.as_str(), "CNAME" | "NS" | "PTR" | "MX") {
        draft
            .content
            .trim_end_matches('.')
            .eq_ignore_ascii_case(existing.content.trim_end_matches('.'))
    } else {
        draft.content == existing.content
    }
}

fn conflict(code: u32, message: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}
