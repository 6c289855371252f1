//! Ingress rule order and the checks cloudflared applies to rules (reference C.3), so a render
//! never produces a config that crash-loops cloudflared.
use super::RenderError;
use crate::routes::{ANY_HOST, Route};
use crate::rules::service_url::service_problem;

/// Why a hostname cannot be a (non-catch-all) ingress rule, if it cannot.
pub(crate) fn hostname_problem(hostname: &str) -> Option<&'static str> {
    if hostname.is_empty() {
        return Some("is empty; use * for every host");
    }
    if hostname == ANY_HOST {
        return None;
    }
    if hostname.contains(':') {
        return Some("must not carry a port");
    }
    let rest = hostname.strip_prefix("*.").unwrap_or(hostname);
    if rest.contains('*') {
        return Some("may hold `*` only as its whole first label, e.g. *.example.com");
    }
    if rest.is_empty() || rest.split('.').any(str::is_empty) {
        return Some("has an empty label");
    }
    None
}

/// The routes as cloudflared must see them: checked, de-duplicated by refusal, sorted by
/// [`Route::precedence`]. A route for every host and path sorts last: the caller makes it the
/// catch-all.
pub(crate) fn ordered_routes(routes: &[Route]) -> Result<Vec<&Route>, RenderError> {
    for route in routes {
        if let Some(reason) = hostname_problem(&route.hostname) {
            return Err(RenderError::InvalidRoute {
                hostname: route.hostname.clone(),
                reason: format!("hostname {reason}"),
            });
        }
        if route.path.as_deref() == Some("") {
            return Err(RenderError::InvalidRoute {
                hostname: route.hostname.clone(),
                reason: "path is empty; leave it unset to match every path".into(),
            });
        }
        if let Some(reason) = service_problem(&route.service) {
            return Err(RenderError::InvalidRoute {
                hostname: route.hostname.clone(),
                reason: format!("service {reason}"),
            });
        }
    }
    let mut sorted: Vec<&Route> = routes.iter().collect();
    sorted.sort_by(|a, b| a.precedence().cmp(&b.precedence()));
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = sorted
        .iter()
        .find(|r| !seen.insert((r.hostname.as_str(), r.path.as_deref())))
    {
        return Err(RenderError::DuplicateRoute {
            hostname: twice.hostname.clone(),
            path: twice.path.clone().unwrap_or_default(),
        });
    }
    Ok(sorted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::OriginRequest;

    fn route(hostname: &str, path: Option<&str>) -> Route {
        Route {
            hostname: hostname.into(),
            path: path.map(Into::into),
            path_kind: Default::default(),
            service: "http://web.shop.svc:80".into(),
            origin_request: OriginRequest::default(),
        }
    }

    #[test]
    fn orders_by_specificity_whatever_the_input_order() {
        let routes = vec![
            route("*.example.com", None),
            route("b.example.com", None),
            route("*.eu.example.com", None),
            route("a.example.com", Some("^/api(/|$)")),
            route("a.example.com", None),
            route("a.example.com", Some("^/a(/|$)")),
        ];
        let expected = vec![
            ("a.example.com", "^/api(/|$)"),
            ("a.example.com", "^/a(/|$)"),
            ("a.example.com", ""),
            ("b.example.com", ""),
            ("*.eu.example.com", ""),
            ("*.example.com", ""),
        ];
        let mut reversed = routes.clone();
        reversed.reverse();
        for input in [routes, reversed] {
            let got: Vec<(&str, &str)> = ordered_routes(&input)
                .unwrap_or_default()
                .iter()
                .map(|r| (r.hostname.as_str(), r.path.as_deref().unwrap_or("")))
                .collect();
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn refuses_what_cloudflared_refuses() {
        for (host, reason) in [
            ("", "hostname is empty; use * for every host"),
            (
                "a.*.example.com",
                "hostname may hold `*` only as its whole first label, e.g. *.example.com",
            ),
            ("a.example.com:443", "hostname must not carry a port"),
        ] {
            match ordered_routes(&[route(host, None)]) {
                Err(RenderError::InvalidRoute {
                    hostname,
                    reason: r,
                }) => {
                    assert_eq!((hostname.as_str(), r.as_str()), (host, reason));
                }
                other => panic!("{host}: {other:?}"),
            }
        }
        let mut bad = route("a.example.com", None);
        bad.service = "http://web/api".into();
        assert!(matches!(
            ordered_routes(&[bad]),
            Err(RenderError::InvalidRoute { reason, .. }) if reason.contains("has a path")
        ));
        assert!(matches!(
            ordered_routes(&[route("a.example.com", None), route("a.example.com", None)]),
            Err(RenderError::DuplicateRoute { hostname, .. }) if hostname == "a.example.com"
        ));
    }
}
