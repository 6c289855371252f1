//! The `_managed.<fqdn>` TXT record in the Go operator's format, and its codec.
//!
//! Content is JSON `{"DnsId","TunnelName","TunnelId"}` (plus `"Owner"` when a cluster id is
//! set). cftunnel writes the bare JSON object, exactly as the Go operator does: the Go operator
//! decodes the content with `json.Unmarshal` into its record struct, so a quoted string would
//! make it fail on every record (`cannot unmarshal string into Go value`) and a rollback to it
//! could no longer manage or delete them. Cloudflare stores TXT content as sent (its dashboard
//! only warns about unquoted content) and splits strings over 255 bytes itself. Reading stays
//! lenient: bare JSON, quoted strings with `\"`, `\\` and `\DDD` escapes joined together (as
//! earlier cftunnel versions wrote, and as a TXT edited in the dashboard may read), or one pair of
//! quotes around unescaped JSON.
use serde::{Deserialize, Serialize};

/// Prefix of every ownership TXT name.
pub const TXT_PREFIX: &str = "_managed.";

/// Longest RFC 1035 character string.
pub(crate) const TXT_CHUNK_BYTES: usize = 255;

/// The ownership TXT payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedTxt {
    /// Record id of the CNAME this TXT vouches for.
    #[serde(rename = "DnsId", default)]
    pub dns_id: String,
    /// The tunnel's name on Cloudflare.
    #[serde(rename = "TunnelName", default)]
    pub tunnel_name: String,
    #[serde(rename = "TunnelId")]
    pub tunnel_id: String,
    /// The cluster id of the cftunnel installation, when it has one.
    #[serde(rename = "Owner", default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl ManagedTxt {
    /// Record content: the bare JSON object, the form the Go operator decodes.
    pub(crate) fn to_content(&self) -> String {
        // Serializing a struct of strings cannot fail; an empty object would be parsed as foreign.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// True if `content` is this payload in the written form (not only one that parses to it):
    /// a TXT in an older, quoted form is rewritten so the Go operator can read it after a rollback.
    pub(crate) fn is_written_as(&self, content: &str) -> bool {
        serde_json::from_str::<ManagedTxt>(content.trim())
            .ok()
            .as_ref()
            == Some(self)
    }

    /// Reads content written by cftunnel or by the Go operator; `None` if it is not this format
    /// (a `TunnelId` is required).
    pub fn parse(content: &str) -> Option<ManagedTxt> {
        let trimmed = content.trim();
        let candidates = [
            Some(trimmed.to_string()),
            unquote_txt(trimmed),
            strip_one_quote_pair(trimmed).map(str::to_string),
        ];
        candidates
            .into_iter()
            .flatten()
            .find_map(|json| serde_json::from_str::<ManagedTxt>(&json).ok())
            .filter(|txt| !txt.tunnel_id.trim().is_empty())
    }
}

/// `_managed.<fqdn>`; for a wildcard `*.<rest>`, `_managed.wildcard.<rest>`.
pub fn managed_txt_name(fqdn: &str) -> String {
    match fqdn.strip_prefix("*.") {
        Some(rest) => format!("{TXT_PREFIX}wildcard.{rest}"),
        None => format!("{TXT_PREFIX}{fqdn}"),
    }
}

/// `value` as quoted character strings, split at char boundaries into chunks of at most 255
/// bytes (before escaping), separated by one space.
pub fn quote_txt(value: &str) -> String {
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in value.chars() {
        if current.len() + c.len_utf8() > TXT_CHUNK_BYTES {
            chunks.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    chunks
        .iter()
        .map(|chunk| {
            let escaped = chunk.replace('\\', "\\\\").replace('"', "\\\"");
            format!("\"{escaped}\"")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Joins a sequence of quoted character strings, undoing `\X` and `\DDD` escapes; `None` if
/// `content` is not such a sequence.
pub fn unquote_txt(content: &str) -> Option<String> {
    let bytes = content.trim().as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut strings = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' => i += 1,
            b'"' => {
                i = read_quoted(bytes, i + 1, &mut out)?;
                strings += 1;
            }
            _ => return None,
        }
    }
    if strings == 0 {
        return None;
    }
    String::from_utf8(out).ok()
}

/// Reads one character string whose opening quote is before `start`; returns the index after
/// its closing quote.
fn read_quoted(bytes: &[u8], start: usize, out: &mut Vec<u8>) -> Option<usize> {
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\\' => {
                let digits = bytes
                    .get(i + 1..i + 4)
                    .filter(|d| d.iter().all(u8::is_ascii_digit));
                match digits {
                    Some(d) => {
                        let value = d.iter().fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0'));
                        out.push(u8::try_from(value).ok()?);
                        i += 4;
                    }
                    None => {
                        out.push(*bytes.get(i + 1)?);
                        i += 2;
                    }
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

fn strip_one_quote_pair(content: &str) -> Option<&str> {
    content
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> ManagedTxt {
        ManagedTxt {
            dns_id: "0123456789abcdef0123456789abcdef".into(),
            tunnel_name: "edge".into(),
            tunnel_id: "c1744f8b-faa1-48a4-9e5c-02ac921467fa".into(),
            owner: None,
        }
    }

    #[test]
    fn writes_the_bare_json_object_the_go_operator_decodes() {
        assert_eq!(
            sample().to_content(),
            r#"{"DnsId":"0123456789abcdef0123456789abcdef","TunnelName":"edge","TunnelId":"c1744f8b-faa1-48a4-9e5c-02ac921467fa"}"#
        );
        let owned = ManagedTxt {
            owner: Some("prod".into()),
            ..sample()
        };
        assert!(owned.to_content().ends_with(r#","Owner":"prod"}"#));
    }

    #[test]
    fn quoted_content_reads_but_is_not_the_written_form() {
        let quoted = quote_txt(&sample().to_content());
        assert_eq!(ManagedTxt::parse(&quoted), Some(sample()));
        assert!(!sample().is_written_as(&quoted));
        assert!(sample().is_written_as(&sample().to_content()));
    }

    /// The Go operator's `DnsManagedRecordTxt`: three string fields, decoded from the record
    /// content with Go's `json.Unmarshal`, which (like serde here) refuses a JSON string where it
    /// expects an object and ignores fields it does not know (`Owner`).
    #[derive(Deserialize)]
    struct GoOperatorTxt {
        #[serde(rename = "DnsId")]
        dns_id: String,
        #[serde(rename = "TunnelName")]
        tunnel_name: String,
        #[serde(rename = "TunnelId")]
        tunnel_id: String,
    }

    #[test]
    fn reads_the_go_operators_unquoted_json() {
        let go = r#"{"DnsId":"0123456789abcdef0123456789abcdef","TunnelName":"edge","TunnelId":"c1744f8b-faa1-48a4-9e5c-02ac921467fa"}"#;
        assert_eq!(ManagedTxt::parse(go), Some(sample()));
        let quoted_unescaped = format!("\"{go}\"");
        assert_eq!(ManagedTxt::parse(&quoted_unescaped), Some(sample()));
    }

    #[test]
    fn joins_chunks_and_decimal_escapes() {
        let content = r#""{\"DnsId\":\"0123456789abcdef0123456789abcdef\",\"Tunnel" "Name\":\"edge\",\"TunnelId\":\"c1744f8b-faa1-48a4-9e5c-02ac921467fa\"\125""#;
        assert_eq!(ManagedTxt::parse(content), Some(sample()));
    }

    #[test]
    fn refuses_what_is_not_the_format() {
        for content in [
            "",
            "\"heritage=external-dns,owner=x\"",
            r#"{"DnsId":"x","TunnelName":"y"}"#,
            r#"{"TunnelId":"  "}"#,
            "\"unterminated",
            "\"a\\",
        ] {
            assert_eq!(ManagedTxt::parse(content), None, "{content}");
        }
    }

    #[test]
    fn wildcard_txt_names() {
        assert_eq!(
            managed_txt_name("app.example.com"),
            "_managed.app.example.com"
        );
        assert_eq!(
            managed_txt_name("*.apps.example.com"),
            "_managed.wildcard.apps.example.com"
        );
    }

    #[test]
    fn long_values_are_split_into_255_byte_strings() {
        let quoted = quote_txt(&"é".repeat(200));
        let parts: Vec<&str> = quoted.split("\" \"").collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(unquote_txt(&quoted), Some("é".repeat(200)));
        assert_eq!(quote_txt(""), "\"\"");
    }

    fn any_txt() -> impl Strategy<Value = ManagedTxt> {
        (
            any::<String>(),
            "\\PC{0,300}",
            "[a-zA-Z0-9\"\\\\ {}:,-]{1,80}",
            proptest::option::of(any::<String>()),
        )
            .prop_filter("a TunnelId with content", |(_, _, id, _)| {
                !id.trim().is_empty()
            })
            .prop_map(|(dns_id, tunnel_name, tunnel_id, owner)| ManagedTxt {
                dns_id,
                tunnel_name,
                tunnel_id,
                owner,
            })
    }

    proptest! {
        #[test]
        fn written_content_reads_back(txt in any_txt()) {
            prop_assert_eq!(ManagedTxt::parse(&txt.to_content()), Some(txt.clone()));
            prop_assert!(txt.is_written_as(&txt.to_content()));
        }

        #[test]
        fn the_go_operator_decodes_every_txt_written(txt in any_txt()) {
            let go: GoOperatorTxt = serde_json::from_str(&txt.to_content())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(go.dns_id, txt.dns_id);
            prop_assert_eq!(go.tunnel_name, txt.tunnel_name);
            prop_assert_eq!(go.tunnel_id, txt.tunnel_id);
        }

        #[test]
        fn go_format_reads_back(txt in any_txt()) {
            let go = serde_json::to_string(&txt).unwrap();
            prop_assert_eq!(ManagedTxt::parse(&go), Some(txt));
        }

        #[test]
        fn chunks_hold_at_most_255_bytes(value in "\\PC{0,700}") {
            let quoted = quote_txt(&value);
            prop_assert_eq!(unquote_txt(&quoted), Some(value.clone()));
            let mut rest = quoted.as_str();
            while let Some(start) = rest.find('"') {
                let mut chunk = Vec::new();
                let end = read_quoted(rest.as_bytes(), start + 1, &mut chunk).unwrap();
                prop_assert!(chunk.len() <= TXT_CHUNK_BYTES);
                rest = &rest[end..];
            }
        }

        #[test]
        fn parsing_never_panics(content in any::<String>()) {
            let _ = ManagedTxt::parse(&content);
            let _ = unquote_txt(&content);
        }
    }
}
