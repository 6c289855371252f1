//! Typed path matches (Ingress `pathType`, Gateway API `path.type`) as the anchored RE2
//! regexes cloudflared matches request paths with.
//!
//! cloudflared tests a rule's `path` anywhere in the decoded request path, so a typed match is
//! anchored at both ends:
//! - `Exact /foo` is `^/foo$`: `/foo` only, not `/foo/`.
//! - `Prefix /foo` and `Prefix /foo/` are both `^/foo(/|$)`: `/foo`, `/foo/` and `/foo/bar`, but
//!   not `/foobar` (the path is compared element by element).
//! - `Prefix /` matches every path: the route gets no `path` at all.
//!
//! The declared text is matched literally: every RE2 metacharacter is escaped.
use super::route::PathKind;

/// RE2's metacharacters: each is written `\c` to match itself.
const METACHARACTERS: &str = r"\.+*?()|[]{}^$";

/// A typed match and its regex; `None` for a route that matches every path.
pub(crate) fn typed_path(kind: PathKind, value: &str) -> Option<String> {
    match kind {
        PathKind::Exact => Some(format!("^{}$", escape(value))),
        PathKind::Prefix => {
            let trimmed = value.trim_end_matches('/');
            (!trimmed.is_empty()).then(|| format!("^{}(/|$)", escape(trimmed)))
        }
        PathKind::Regex => (!value.is_empty()).then(|| value.to_string()),
    }
}

/// `text` as a regex that matches it literally.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        if METACHARACTERS.contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn matches(kind: PathKind, declared: &str, request: &str) -> bool {
        match typed_path(kind, declared) {
            None => true,
            Some(pattern) => Regex::new(&pattern).is_ok_and(|re| re.is_match(request)),
        }
    }

    #[test]
    fn prefix_matches_element_by_element_and_exact_matches_one_path() {
        use PathKind::{Exact, Prefix};
        for (kind, declared, request, expected) in [
            (Prefix, "/", "/anything", true),
            (Exact, "/foo", "/foo", true),
            (Exact, "/foo", "/bar", false),
            (Exact, "/foo", "/foo/", false),
            (Exact, "/foo/", "/foo", false),
            (Prefix, "/foo", "/foo", true),
            (Prefix, "/foo", "/foo/", true),
            (Prefix, "/foo/", "/foo", true),
            (Prefix, "/foo/", "/foo/", true),
            (Prefix, "/aaa/bb", "/aaa/bbb", false),
            (Prefix, "/aaa/bbb", "/aaa/bbb", true),
            (Prefix, "/aaa/bbb/", "/aaa/bbb", true),
            (Prefix, "/aaa/bbb", "/aaa/bbb/", true),
            (Prefix, "/aaa/bbb", "/aaa/bbb/ccc", true),
            (Prefix, "/aaa/bbb", "/aaa/bbbxyz", false),
            (Prefix, "/v1.0", "/v1x0", false),
            (Exact, "/a+b", "/a+b", true),
            (Exact, "/a+b", "/aab", false),
            (Prefix, "/foo", "/x/foo", false),
        ] {
            assert_eq!(
                matches(kind, declared, request),
                expected,
                "{kind:?} {declared} vs {request}"
            );
        }
        assert_eq!(typed_path(Prefix, "/"), None);
        assert_eq!(typed_path(Prefix, "/a.b/").as_deref(), Some(r"^/a\.b(/|$)"));
    }
}
