//! Syntax checks shared by the rules: DNS names, hostnames, ids, Kubernetes object names.

/// RFC 1123 label: lowercase alphanumerics and `-`, 1–63 characters, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A Kubernetes object name such as a Secret's (DNS-1123 subdomain, ≤ 253 characters).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A Service name (DNS-1035 label: starts with a letter).
pub(crate) fn is_service_name(s: &str) -> bool {
    is_dns_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// A DNS name as a zone or a hostname: labels of letters, digits and `-` (any case), at least
/// two labels, no wildcard, no trailing dot, ≤ 253 characters.
pub(crate) fn is_domain_name(s: &str) -> bool {
    s.len() <= 253 && s.contains('.') && s.split('.').all(is_host_label)
}

fn is_host_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// Why a route hostname (fqdn) is invalid, if it is: `*` only as the whole first label, no port.
pub(crate) fn hostname_problem(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("must not be empty");
    }
    if s.contains(':') {
        return Some("must not contain a port");
    }
    if s.ends_with('.') {
        return Some("must not end with a dot");
    }
    let rest = s.strip_prefix("*.").unwrap_or(s);
    if rest.contains('*') {
        return Some("may contain `*` only as the whole first label");
    }
    if !is_domain_name(rest) {
        return Some("is not a valid DNS name");
    }
    None
}

/// An email address as Access matches it: one `@`, a local part of 1 to 64 characters of
/// letters, digits and RFC 5322's specials (dots only between others), and a domain name; at
/// most 254 characters. Quoted local parts and address literals are not accepted.
pub(crate) fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    s.len() <= 254
        && !local.is_empty()
        && local.len() <= 64
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~-.".contains(&b))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && is_domain_name(domain)
}

/// A Cloudflare tunnel id: a UUID in its canonical hyphenated form.
pub(crate) fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

/// A Cloudflare account or zone id: 32 hexadecimal characters.
pub(crate) fn is_hex32(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_names() {
        assert!(is_domain_name("example.com"));
        assert!(is_domain_name("Sub-1.Example.co.uk"));
        assert!(!is_domain_name("localhost"));
        assert!(!is_domain_name("example.com."));
        assert!(!is_domain_name("*.example.com"));
        assert!(!is_domain_name("-a.example.com"));
        assert!(!is_domain_name("a..example.com"));
    }

    #[test]
    fn hostnames() {
        assert_eq!(hostname_problem("app.example.com"), None);
        assert_eq!(hostname_problem("*.example.com"), None);
        assert_eq!(
            hostname_problem("a.*.example.com"),
            Some("may contain `*` only as the whole first label")
        );
        assert_eq!(
            hostname_problem("*a.example.com"),
            Some("may contain `*` only as the whole first label")
        );
        assert_eq!(
            hostname_problem("app.example.com:443"),
            Some("must not contain a port")
        );
    }

    #[test]
    fn emails() {
        for good in [
            "alice@example.com",
            "a.b+tag@sub.example.co.uk",
            "o'neil@example.com",
        ] {
            assert!(is_email(good), "{good}");
        }
        for bad in [
            "",
            "alice",
            "@example.com",
            "alice@",
            "alice@localhost",
            "a@b@example.com",
            ".alice@example.com",
            "al..ice@example.com",
            "al ice@example.com",
            "alice@exa_mple.com",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
        assert!(!is_email(&format!("{}@example.com", "a".repeat(65))));
    }

    #[test]
    fn ids_and_names() {
        assert!(is_uuid("c8b2d4a6-1f3e-4d5c-9a8b-7e6f5d4c3b2a"));
        assert!(!is_uuid("c8b2d4a61f3e4d5c9a8b7e6f5d4c3b2a"));
        assert!(is_hex32("0123456789abcdef0123456789ABCDEF"));
        assert!(!is_hex32("0123456789abcdef"));
        assert!(is_dns_subdomain("cloudflare-secrets"));
        assert!(!is_dns_subdomain("Cloudflare_Secrets"));
        assert!(is_service_name("web"));
        assert!(!is_service_name("1web"));
    }
}
