//! Record names as Cloudflare answers them, and the CNAME target of a tunnel.
use std::borrow::Cow;

/// `<id>.cfargotunnel.com`, lower-case.
pub fn tunnel_target(tunnel_id: &str) -> String {
    format!("{}.cfargotunnel.com", tunnel_id.trim().to_ascii_lowercase())
}

/// Lower-case, without a trailing dot (how Cloudflare answers record names and contents).
pub fn normalize_name(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// [`normalize_name`], borrowing `name` when it is normalised already (as Cloudflare's answers
/// and the hostnames of routes usually are): a zone's plan reads tens of thousands of names.
pub fn normalized(name: &str) -> Cow<'_, str> {
    let trimmed = name.trim().trim_end_matches('.');
    match trimmed.bytes().any(|c| c.is_ascii_uppercase()) {
        true => Cow::Owned(trimmed.to_ascii_lowercase()),
        false => Cow::Borrowed(trimmed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_lower_case() {
        assert_eq!(
            tunnel_target(" C1744F8B-faa1 "),
            "c1744f8b-faa1.cfargotunnel.com"
        );
        assert_eq!(normalize_name("App.Example.COM."), "app.example.com");
    }

    #[test]
    fn normalized_borrows_only_what_is_normalised_already() {
        for name in [
            "App.Example.COM.",
            " a.example.com ",
            "a.example.com.",
            "*.x.io",
            "",
        ] {
            assert_eq!(normalized(name), normalize_name(name), "{name:?}");
        }
        assert!(matches!(
            normalized("a.example.com."),
            Cow::Borrowed("a.example.com")
        ));
        assert!(matches!(normalized("A.example.com"), Cow::Owned(_)));
    }
}
