//! DNS record models: what Cloudflare returns, and the request body the client always sends.
use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::CloudflareError;

/// Record types of the v4 API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DnsRecordType {
    A,
    Aaaa,
    Caa,
    Cert,
    Cname,
    Dnskey,
    Ds,
    Https,
    Loc,
    Mx,
    Naptr,
    Ns,
    Openpgpkey,
    Ptr,
    Smimea,
    Srv,
    Sshfp,
    Svcb,
    Tlsa,
    Txt,
    Uri,
}

impl DnsRecordType {
    /// The wire name (`CNAME`, `TXT`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::Aaaa => "AAAA",
            Self::Caa => "CAA",
            Self::Cert => "CERT",
            Self::Cname => "CNAME",
            Self::Dnskey => "DNSKEY",
            Self::Ds => "DS",
            Self::Https => "HTTPS",
            Self::Loc => "LOC",
            Self::Mx => "MX",
            Self::Naptr => "NAPTR",
            Self::Ns => "NS",
            Self::Openpgpkey => "OPENPGPKEY",
            Self::Ptr => "PTR",
            Self::Smimea => "SMIMEA",
            Self::Srv => "SRV",
            Self::Sshfp => "SSHFP",
            Self::Svcb => "SVCB",
            Self::Tlsa => "TLSA",
            Self::Txt => "TXT",
            Self::Uri => "URI",
        }
    }

    /// Only A, AAAA and CNAME records can go through Cloudflare's proxy.
    pub(crate) fn is_proxiable(self) -> bool {
        matches!(self, Self::A | Self::Aaaa | Self::Cname)
    }
}

impl fmt::Display for DnsRecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A DNS record as Cloudflare returns it, the fields cftunnel reads: a DNS sync holds the
/// zone's every record for its whole run (20,000 at ten thousand hostnames), so the rest of
/// the answer (`zone_id`, `zone_name`, `tags`, `proxiable`, timestamps, `meta`, `settings`)
/// is not kept. `record_type` stays a string so unknown types parse.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DnsRecord {
    pub id: String,
    #[serde(rename = "type")]
    pub record_type: String,
    pub name: String,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default)]
    pub proxied: Option<bool>,
    #[serde(default)]
    pub comment: Option<String>,
}

impl DnsRecord {
    /// True if the record has type `t`.
    pub fn is_type(&self, t: DnsRecordType) -> bool {
        self.record_type.eq_ignore_ascii_case(t.as_str())
    }
}

/// `ttl: 1` means automatic (and is what proxied records get).
pub const TTL_AUTO: u32 = 1;

/// Body of record create, overwrite (PUT) and patch. Always carries type, name, content and ttl;
/// `proxied` is sent for A/AAAA/CNAME only; `comment` when set (`Some("")` clears it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewDnsRecord {
    #[serde(rename = "type")]
    pub record_type: DnsRecordType,
    pub name: String,
    pub content: String,
    pub ttl: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxied: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl NewDnsRecord {
    /// A record; `proxied` is dropped for types that cannot be proxied.
    pub fn new(
        record_type: DnsRecordType,
        name: impl Into<String>,
        content: impl Into<String>,
        ttl: u32,
        proxied: bool,
        comment: Option<String>,
    ) -> Self {
        Self {
            record_type,
            name: name.into(),
            content: content.into(),
            ttl,
            proxied: record_type.is_proxiable().then_some(proxied),
            comment,
        }
    }

    /// The proxied CNAME that routes `name` to a tunnel (`ttl` automatic, as proxying requires).
    pub fn tunnel_cname(name: impl Into<String>, tunnel_id: &str, comment: Option<String>) -> Self {
        Self::new(
            DnsRecordType::Cname,
            name,
            format!("{tunnel_id}.cfargotunnel.com"),
            TTL_AUTO,
            true,
            comment,
        )
    }

    /// A TXT record with automatic TTL (content is sent as given).
    pub fn txt(
        name: impl Into<String>,
        content: impl Into<String>,
        comment: Option<String>,
    ) -> Self {
        Self::new(DnsRecordType::Txt, name, content, TTL_AUTO, false, comment)
    }

    /// What is sent for `proxied` (None for types that cannot be proxied).
    pub fn proxied(&self) -> Option<bool> {
        self.proxied
    }

    /// Refuses bodies the API would reject for shape reasons.
    pub fn validate(&self) -> Result<(), CloudflareError> {
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(CloudflareError::InvalidInput(format!(
                "DNS record name must have 1 to 255 characters, got {}",
                self.name.len()
            )));
        }
        if self.content.is_empty() {
            return Err(CloudflareError::InvalidInput(format!(
                "DNS record {} has empty content",
                self.name
            )));
        }
        if self.ttl != TTL_AUTO && !(30..=86_400).contains(&self.ttl) {
            return Err(CloudflareError::InvalidInput(format!(
                "DNS record TTL must be 1 (automatic) or 30..=86400, got {}",
                self.ttl
            )));
        }
        if let Some(comment) = &self.comment
            && comment.contains(['\n', '\r'])
        {
            return Err(CloudflareError::InvalidInput(
                "DNS record comment must not contain line breaks".into(),
            ));
        }
        Ok(())
    }
}

/// Filter on the record comment (case-insensitive on Cloudflare's side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentFilter {
    Exact(String),
    Contains(String),
    StartsWith(String),
    EndsWith(String),
    Present,
    Absent,
}

/// Filters of the DNS record list; unset fields are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsRecordFilter {
    pub record_type: Option<DnsRecordType>,
    /// Exact FQDN.
    pub name: Option<String>,
    /// Name prefix (`name.startswith`).
    pub name_startswith: Option<String>,
    /// Exact content.
    pub content: Option<String>,
    pub comment: Option<CommentFilter>,
    /// Page size, 1..=1000 (default 1000).
    pub per_page: Option<u32>,
}

impl DnsRecordFilter {
    /// Query pairs for these filters (without paging).
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(t) = self.record_type {
            query.push(("type", t.as_str().to_owned()));
        }
        if let Some(name) = &self.name {
            query.push(("name", name.clone()));
        }
        if let Some(prefix) = &self.name_startswith {
            query.push(("name.startswith", prefix.clone()));
        }
        if let Some(content) = &self.content {
            query.push(("content", content.clone()));
        }
        match &self.comment {
            Some(CommentFilter::Exact(v)) => query.push(("comment.exact", v.clone())),
            Some(CommentFilter::Contains(v)) => query.push(("comment.contains", v.clone())),
            Some(CommentFilter::StartsWith(v)) => query.push(("comment.startswith", v.clone())),
            Some(CommentFilter::EndsWith(v)) => query.push(("comment.endswith", v.clone())),
            Some(CommentFilter::Present) => query.push(("comment.present", String::new())),
            Some(CommentFilter::Absent) => query.push(("comment.absent", String::new())),
            None => {}
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cname_body_has_every_field_and_txt_has_no_proxied() {
        let cname = NewDnsRecord::tunnel_cname("app.example.com", "abc", Some("cftunnel x".into()));
        assert_eq!(
            serde_json::to_value(&cname).unwrap(),
            json!({"type":"CNAME","name":"app.example.com","content":"abc.cfargotunnel.com",
                   "ttl":1,"proxied":true,"comment":"cftunnel x"})
        );
        let txt = NewDnsRecord::new(DnsRecordType::Txt, "_m.x", "\"v\"", 1, true, None);
        assert_eq!(
            serde_json::to_value(&txt).unwrap(),
            json!({"type":"TXT","name":"_m.x","content":"\"v\"","ttl":1})
        );
    }

    #[test]
    fn validation_rejects_bad_ttl_empty_content_and_newlines() {
        let bad_ttl = NewDnsRecord::new(DnsRecordType::A, "a.x", "192.0.2.1", 5, false, None);
        assert_eq!(
            bad_ttl.validate().unwrap_err().to_string(),
            "invalid input: DNS record TTL must be 1 (automatic) or 30..=86400, got 5"
        );
        let empty = NewDnsRecord::txt("a.x", "", None);
        assert_eq!(
            empty.validate().unwrap_err().to_string(),
            "invalid input: DNS record a.x has empty content"
        );
        let newline = NewDnsRecord::txt("a.x", "v", Some("a\nb".into()));
        assert!(newline.validate().is_err());
        assert!(NewDnsRecord::txt("a.x", "v", None).validate().is_ok());
    }

    #[test]
    fn filter_query_uses_api_parameter_names() {
        let filter = DnsRecordFilter {
            record_type: Some(DnsRecordType::Txt),
            name_startswith: Some("_managed.".into()),
            comment: Some(CommentFilter::StartsWith("cftunnel ".into())),
            ..Default::default()
        };
        assert_eq!(
            filter.query(),
            vec![
                ("type", "TXT".to_owned()),
                ("name.startswith", "_managed.".to_owned()),
                ("comment.startswith", "cftunnel ".to_owned()),
            ]
        );
    }
}
