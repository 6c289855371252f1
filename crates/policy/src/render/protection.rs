//! Zero Trust Access on a tunnel's rules, fail-closed. A hostname an AccessPolicy protects is
//! either closed (its application does not exist yet, cannot be read or made, or is someone
//! else's): every rule of it answers 503 and reaches no Service; or open behind Access: its
//! rules keep their Service and carry `originRequest.access` (`required`, the team, the
//! application's AUD), so cloudflared itself refuses a request without a valid Access token,
//! whatever path it came by. A hostname no policy protects is left as it is. Pure: the
//! reconciler decides each hostname's [`Protection`] and renders with it, in Local and in
//! Cloudflare mode alike.
use std::collections::BTreeMap;

use crate::routes::{AccessCheck, OriginRequest, Route};

/// What a protected rule answers while its application is not there: 503, like a service
/// that is not available yet (never the Service in the open).
pub const CLOSED_SERVICE: &str = "http_status:503";

/// How Access stands for one protected hostname.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Not served: its rules answer [`CLOSED_SERVICE`]; `why` is what the status says.
    Closed { why: String },
    /// Served behind the application with this AUD, of the team.
    Open { team: String, aud: String },
}

/// `routes` with each protected hostname closed or checked by cloudflared, by `protected`
/// (keys lowercase, as routes' hostnames are).
pub fn protect(routes: &[Route], protected: &BTreeMap<String, Protection>) -> Vec<Route> {
    routes
        .iter()
        .map(
            |route| match protected.get(&route.hostname.to_ascii_lowercase()) {
                None => route.clone(),
                Some(Protection::Closed { .. }) => Route {
                    service: CLOSED_SERVICE.to_string(),
                    origin_request: OriginRequest::default(),
                    ..route.clone()
                },
                Some(Protection::Open { team, aud }) => {
                    let mut open = route.clone();
                    open.origin_request.access = Some(AccessCheck {
                        required: true,
                        team_name: team.clone(),
                        aud_tag: vec![aud.clone()],
                    });
                    open
                }
            },
        )
        .collect()
}

#[cfg(test)]
#[path = "protection_tests.rs"]
mod tests;
