//! Which route serves a request: the route model's answer, stated without the rendered rule
//! order, so cloudflared's own choice on the rendered config can be checked against it.
//!
//! A route matches a request when its hostname does and, if it has a path, its path regex
//! matches somewhere in the request path (Go's `MatchString`: unanchored unless the pattern
//! anchors itself; an empty request path is matched as is). Hostnames match the way cloudflared
//! matches them:
//! - byte for byte, so case counts: the model's hostnames are lowercase, and a request for
//!   `App.example.com` is not served by the route `app.example.com` (cloudflared passes it on to
//!   a wildcard or the catch-all). Browsers and Cloudflare's edge send lowercase hosts.
//! - `*.example.com` matches every name that ends in `.example.com`, however deep
//!   (`a.b.example.com`), but not `example.com` itself.
//! - a port in the request (`app.example.com:8443`) is not part of the hostname.
//! - `*` ([`ANY_HOST`]) matches every host.
//!
//! Of the routes that match, the first in [`Route::precedence`] order serves: an exact hostname
//! before any wildcard, a wildcard with more labels before a broader one, both before `*`; then
//! a route with a path before one without, an exact path before a prefix before a regex, a
//! longer one before a shorter one; then the smaller hostname and path text. When no route
//! matches, the tunnel's catch-all (`fallbackTarget`) serves; a route for every host and path
//! is that catch-all (and is answered as itself).
use regex::Regex;

use crate::routes::{ANY_HOST, Route};

/// The answer of [`serving_route`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving<'r> {
    Route(&'r Route),
    CatchAll,
}

/// The route of `routes` that serves a request for `host` (no port) and `path`.
pub fn serving_route<'r>(routes: &'r [Route], host: &str, path: &str) -> Serving<'r> {
    routes
        .iter()
        .filter(|route| host_matches(&route.hostname, host) && path_matches(route, path))
        .min_by_key(|route| route.precedence())
        .map_or(Serving::CatchAll, Serving::Route)
}

/// The same for a whole request URL (`https://host[:port]/path?query`), split the way Go's
/// `url.Parse` splits it (the host keeps its case, the path is percent-decoded); `None` when
/// `url` has no `scheme://host`.
pub fn serving_route_for_url<'r>(routes: &'r [Route], url: &str) -> Option<Serving<'r>> {
    let (host, path) = split_url(url)?;
    Some(serving_route(routes, host, &path))
}

/// Host (without port) and decoded path of an absolute URL.
fn split_url(url: &str) -> Option<(&str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => host_port,
    };
    if host.is_empty() {
        return None;
    }
    Some((host, percent_decode(path)?))
}

/// `%XX` escapes decoded; `None` on a malformed escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn host_matches(rule: &str, host: &str) -> bool {
    if rule == ANY_HOST {
        return true;
    }
    match rule.strip_prefix('*') {
        Some(suffix) if suffix.starts_with('.') => host.ends_with(suffix),
        _ => rule == host,
    }
}

/// A route without a path matches every path. A pattern that does not compile matches nothing
/// (the model refuses such routes before they get here).
fn path_matches(route: &Route, path: &str) -> bool {
    match route.path.as_deref() {
        None => true,
        Some(pattern) => Regex::new(pattern).is_ok_and(|re| re.is_match(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::fixtures::route;

    fn service_for<'r>(routes: &'r [Route], url: &str) -> &'r str {
        match serving_route_for_url(routes, url) {
            Some(Serving::Route(route)) => &route.service,
            Some(Serving::CatchAll) => "catch-all",
            None => "not a URL",
        }
    }

    #[test]
    fn the_most_specific_matching_route_serves_whatever_the_list_order() {
        let mut routes = vec![
            route("*.example.com", None, "wild"),
            route("*.eu.example.com", None, "eu"),
            route("app.example.com", None, "web"),
            route("app.example.com", Some("^/api(/|$)"), "api"),
            route("app.example.com", Some("^/api/v2(/|$)"), "api-v2"),
        ];
        let cases = [
            ("https://app.example.com/api/v2/users", "api-v2"),
            ("https://app.example.com/api/v2", "api-v2"),
            ("https://app.example.com/api/v20", "api"),
            ("https://app.example.com/api", "api"),
            ("https://app.example.com/apiary", "web"),
            ("https://app.example.com:8443/", "web"),
            ("https://App.example.com/api", "wild"),
            ("https://x.eu.example.com/api", "eu"),
            ("https://a.b.eu.example.com/", "eu"),
            ("https://eu.example.com/", "wild"),
            ("https://example.com/", "catch-all"),
            ("https://example.org/", "catch-all"),
            ("https://app.example.com/%61pi/v2", "api-v2"),
            ("not a url", "not a URL"),
        ];
        for _ in 0..2 {
            for (url, expected) in cases {
                assert_eq!(service_for(&routes, url), expected, "{url}");
            }
            routes.reverse();
        }
    }

    #[test]
    fn path_patterns_are_unanchored_unless_they_anchor_themselves() {
        let routes = vec![
            route("app.example.com", Some("/static/"), "static"),
            route("app.example.com", Some("\\.png$"), "images"),
        ];
        for (url, served) in [
            ("https://app.example.com/a/static/x.css", "static"),
            ("https://app.example.com/logo.png", "images"),
            // Both match: the longer pattern serves.
            ("https://app.example.com/static/logo.png", "static"),
            ("https://app.example.com/", "catch-all"),
        ] {
            assert_eq!(service_for(&routes, url), served, "{url}");
        }
    }
}
