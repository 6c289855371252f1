//! A tunnel's health as Cloudflare's edge reports it: `status.edge`, the `Connected`
//! condition and the Event of each transition, from what a tunnel list says and what the
//! tunnel's connectors are.
//!
//! Cloudflare's words: `healthy` (every connector holds its connections), `degraded` (some
//! connections are down, the tunnel still serves), `down` (no connection, after there were
//! some), `inactive` (never connected). `Connected` is `True` for the first two and `False`
//! for the others; a word this code does not know is `Unknown`.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use cftunnel_cloudflare::{ConnectionClient, TunnelStatus as Word};
use cftunnel_types::{EdgeConnectors, EdgeStatus};

/// The condition type.
pub const CONNECTED: &str = "Connected";
/// Event reasons of the transitions.
pub const EVENT_DOWN: &str = "TunnelDown";
pub const EVENT_DEGRADED: &str = "TunnelDegraded";
pub const EVENT_CONNECTED: &str = "TunnelConnected";

/// Most data centres and versions listed in the connector summary.
const MAX_COLOS: usize = 16;
const MAX_VERSIONS: usize = 8;

/// Cloudflare's word as `status.edge.status` says it.
pub fn word(status: Option<Word>) -> &'static str {
    match status {
        Some(Word::Healthy) => "healthy",
        Some(Word::Degraded) => "degraded",
        Some(Word::Down) => "down",
        Some(Word::Inactive) => "inactive",
        Some(Word::Unknown) | None => "unknown",
    }
}

/// What a tunnel list said of one tunnel, in the words `status.edge` keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub status: &'static str,
    pub conns_active_at: Option<String>,
    pub conns_inactive_at: Option<String>,
}

/// Does `observed` change the word `previous` recorded (or is there no record)? Only then are
/// the connectors listed again (one call, at background priority).
pub fn changes_word(previous: Option<&EdgeStatus>, observed: &Observed) -> bool {
    previous.is_none_or(|p| p.status != observed.status)
}

/// The connector summary known without a call: `down` and `inactive` mean no connection by
/// Cloudflare's definition, so their summary is empty; `None` for the words whose connectors
/// must be listed to be told.
pub fn connectors_without_call(observed: &Observed) -> Option<EdgeConnectors> {
    matches!(observed.status, "down" | "inactive").then(EdgeConnectors::default)
}

/// The new `status.edge`: the transition time moves only when the word changes; the connector
/// summary is the new one when it was listed, else the one recorded.
pub fn edge_status(
    previous: Option<&EdgeStatus>,
    observed: Observed,
    connectors: Option<EdgeConnectors>,
    now: &str,
) -> EdgeStatus {
    let same = previous.filter(|p| p.status == observed.status);
    EdgeStatus {
        status: observed.status.to_string(),
        last_transition_time: match same {
            Some(p) => p.last_transition_time.clone(),
            None => Some(now.to_string()),
        },
        conns_active_at: observed.conns_active_at,
        conns_inactive_at: observed.conns_inactive_at,
        connectors: connectors.or_else(|| same.and_then(|p| p.connectors.clone())),
    }
}

/// A bounded summary of the connectors `…/connections` listed: how many, and their data
/// centres and cloudflared versions, sorted and without repeats.
pub fn summary(clients: &[ConnectionClient]) -> EdgeConnectors {
    let mut colos: Vec<String> = clients
        .iter()
        .flat_map(|c| c.conns.iter())
        .filter_map(|conn| conn.colo_name.clone())
        .collect();
    colos.sort();
    colos.dedup();
    colos.truncate(MAX_COLOS);
    let mut versions: Vec<String> = clients.iter().filter_map(|c| c.version.clone()).collect();
    versions.sort();
    versions.dedup();
    versions.truncate(MAX_VERSIONS);
    EdgeConnectors {
        count: i32::try_from(clients.len()).unwrap_or(i32::MAX),
        colos,
        versions,
    }
}

/// The `Connected` condition `edge` makes; `lastTransitionTime` moves only when its status
/// flips.
pub fn connected_condition(
    previous: Option<&Condition>,
    edge: &EdgeStatus,
    generation: Option<i64>,
    now: Time,
) -> Condition {
    let (status, reason, message) = connected(edge);
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now,
    };
    Condition {
        type_: CONNECTED.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Status, reason and message of `Connected`.
fn connected(edge: &EdgeStatus) -> (&'static str, &'static str, String) {
    let through = match &edge.connectors {
        Some(c) if !c.colos.is_empty() => format!(
            " through {} connector(s) at {}",
            c.count,
            c.colos.join(", ")
        ),
        Some(c) => format!(" through {} connector(s)", c.count),
        None => String::new(),
    };
    match edge.status.as_str() {
        "healthy" => (
            "True",
            "Healthy",
            format!("Cloudflare's edge reaches the tunnel{through}"),
        ),
        "degraded" => (
            "True",
            "Degraded",
            format!(
                "Cloudflare's edge reaches the tunnel{through}, but some of its connections are down: check the cloudflared pods' logs and their egress to the edge (port 7844)"
            ),
        ),
        "down" => (
            "False",
            "Down",
            format!(
                "Cloudflare's edge has no connection to the tunnel{}: check that cloudflared runs (its pods' logs) and can reach the edge on port 7844",
                edge.conns_inactive_at
                    .as_deref()
                    .map(|at| format!(" since {at}"))
                    .unwrap_or_default()
            ),
        ),
        "inactive" => (
            "False",
            "Inactive",
            "No cloudflared has connected to the tunnel yet".to_string(),
        ),
        _ => (
            "Unknown",
            "Unknown",
            format!("Cloudflare reports the tunnel as {:?}", edge.status),
        ),
    }
}

/// An Event of a transition: Warning or not, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The Event of the change from the word recorded before (`None`: nothing was recorded, as
/// after an upgrade; no Event then, a first look is not a transition) to `edge`'s.
pub fn transition(before: Option<&str>, edge: &EdgeStatus) -> Option<Transition> {
    let before = before?;
    if before == edge.status {
        return None;
    }
    let (warning, reason) = match edge.status.as_str() {
        "down" => (true, EVENT_DOWN),
        "degraded" => (true, EVENT_DEGRADED),
        "healthy" => (false, EVENT_CONNECTED),
        _ => return None,
    };
    let (_, _, message) = connected(edge);
    Some(Transition {
        warning,
        reason,
        message: format!("{message} (was {before})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connected_word_needs_its_connectors_listed() {
        for word in ["down", "inactive"] {
            assert_eq!(
                connectors_without_call(&observed(word)),
                Some(EdgeConnectors::default()),
                "{word}"
            );
        }
        for word in ["healthy", "degraded", "unknown"] {
            assert_eq!(connectors_without_call(&observed(word)), None, "{word}");
        }
    }

    fn observed(status: &'static str) -> Observed {
        Observed {
            status,
            conns_active_at: Some("2026-12-01T00:00:00Z".into()),
            conns_inactive_at: None,
        }
    }

    fn client(version: &str, colos: &[&str]) -> ConnectionClient {
        serde_json::from_value(serde_json::json!({
            "id": "c",
            "version": version,
            "conns": colos.iter().map(|c| serde_json::json!({"colo_name": c})).collect::<Vec<_>>(),
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_transition_time_moves_only_with_the_word_and_the_summary_stays_until_listed_again() {
        let listed = summary(&[client("2026.11.0", &["FRA", "AMS"])]);
        let first = edge_status(None, observed("healthy"), Some(listed.clone()), "t1");
        assert_eq!(first.last_transition_time.as_deref(), Some("t1"));
        assert!(!changes_word(Some(&first), &observed("healthy")));
        let again = edge_status(Some(&first), observed("healthy"), None, "t2");
        assert_eq!(again.last_transition_time.as_deref(), Some("t1"));
        assert_eq!(again.connectors, Some(listed));
        assert!(changes_word(Some(&again), &observed("down")));
        let down = edge_status(Some(&again), observed("down"), None, "t3");
        assert_eq!(
            (down.last_transition_time.as_deref(), down.connectors),
            (Some("t3"), None)
        );
    }

    #[test]
    fn the_summary_is_bounded_sorted_and_without_repeats() {
        let many: Vec<String> = (0..40).map(|i| format!("C{i:02}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let clients = [
            client("2026.11.0", &refs),
            client("2026.10.0", &["C00"]),
            client("2026.11.0", &[]),
        ];
        let s = summary(&clients);
        assert_eq!(s.count, 3);
        assert_eq!(s.colos.len(), MAX_COLOS);
        assert_eq!(s.colos[0], "C00");
        assert_eq!(s.versions, ["2026.10.0", "2026.11.0"]);
    }

    #[test]
    fn connected_is_true_for_healthy_and_degraded_and_false_for_down_and_inactive() {
        let t = |s: i64| Time(jiff::Timestamp::from_second(s).unwrap_or_default());
        let mut edge = edge_status(None, observed("healthy"), None, "t");
        let healthy = connected_condition(None, &edge, Some(1), t(10));
        assert_eq!(
            (healthy.status.as_str(), healthy.reason.as_str()),
            ("True", "Healthy")
        );
        edge.status = "degraded".into();
        let degraded = connected_condition(Some(&healthy), &edge, Some(1), t(20));
        assert_eq!(degraded.reason, "Degraded");
        assert_eq!(degraded.last_transition_time, t(10));
        edge.status = "down".into();
        edge.conns_inactive_at = Some("2026-12-02T00:00:00Z".into());
        let down = connected_condition(Some(&degraded), &edge, Some(1), t(30));
        assert_eq!(
            (down.status.as_str(), down.reason.as_str()),
            ("False", "Down")
        );
        assert_eq!(down.last_transition_time, t(30));
        assert!(
            down.message.contains("since 2026-12-02T00:00:00Z"),
            "{}",
            down.message
        );
        assert!(down.message.contains("port 7844"), "{}", down.message);
        edge.status = "inactive".into();
        assert_eq!(
            connected_condition(None, &edge, None, t(0)).reason,
            "Inactive"
        );
        edge.status = "weird".into();
        assert_eq!(
            connected_condition(None, &edge, None, t(0)).status,
            "Unknown"
        );
    }

    #[test]
    fn a_transition_has_one_event_and_a_first_look_none() {
        let edge = |s: &'static str| edge_status(None, observed(s), None, "t");
        assert_eq!(transition(None, &edge("down")), None);
        assert_eq!(transition(Some("down"), &edge("down")), None);
        let down = transition(Some("healthy"), &edge("down")).unwrap_or_else(|| panic!("event"));
        assert!(down.warning);
        assert_eq!(down.reason, EVENT_DOWN);
        assert!(down.message.ends_with("(was healthy)"), "{}", down.message);
        let degraded = transition(Some("healthy"), &edge("degraded"));
        assert_eq!(
            degraded.map(|t| (t.warning, t.reason)),
            Some((true, EVENT_DEGRADED))
        );
        let back = transition(Some("down"), &edge("healthy"));
        assert_eq!(
            back.map(|t| (t.warning, t.reason)),
            Some((false, EVENT_CONNECTED))
        );
        let first = transition(Some("inactive"), &edge("healthy"));
        assert_eq!(first.map(|t| t.reason), Some(EVENT_CONNECTED));
        assert_eq!(transition(Some("healthy"), &edge("inactive")), None);
    }
}
