//! Stored Tunnels and ClusterTunnels in shapes the Go operator ran and admission refuses today:
//! they are run the Go operator's way, and the `Ready` message says what would be refused.
use cftunnel_policy::admission::tunnel::existing_id_problem;
use cftunnel_types::TunnelSpec;

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

/// The `existingTunnel` id and name to look the tunnel up by. An id that is not a UUID next to
/// a name is skipped and the name used, as the Go operator did (it tried the id, then fell back
/// to the name); admission refuses such an id today, so only stored objects have one.
pub(super) fn existing_target(spec: &TunnelSpec) -> (Option<&str>, Option<&str>) {
    let existing = spec.existing_tunnel.as_ref();
    let id = existing.and_then(|e| non_empty(e.id.as_ref()));
    let name = existing.and_then(|e| non_empty(e.name.as_ref()));
    match (id, name) {
        (Some(id), Some(_)) if existing_id_problem(id).is_some() => (None, name),
        other => other,
    }
}

/// Notes on a stored spec that admission refuses today and that is run the Go operator's way.
pub fn notes(spec: &TunnelSpec) -> Vec<String> {
    let existing = spec.existing_tunnel.as_ref();
    let id = existing.and_then(|e| non_empty(e.id.as_ref()));
    match (id, existing_target(spec)) {
        (Some(id), (None, Some(name))) => existing_id_problem(id)
            .map(|problem| {
                format!(
                    "spec.existingTunnel.id: {problem} (refused if applied today; the tunnel was found by spec.existingTunnel.name {name:?}, as the Go operator did)"
                )
            })
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(existing: serde_json::Value) -> TunnelSpec {
        serde_json::from_value(serde_json::json!({
            "existingTunnel": existing,
            "cloudflare": {"domain": "example.com", "secret": "api"},
        }))
        .unwrap_or_else(|e| panic!("spec: {e}"))
    }

    #[test]
    fn an_id_that_is_not_a_uuid_falls_back_to_the_name_with_a_note() {
        let s = spec(serde_json::json!({"id": "my-tunnel", "name": "edge"}));
        assert_eq!(existing_target(&s), (None, Some("edge")));
        assert_eq!(
            notes(&s),
            [
                "spec.existingTunnel.id: \"my-tunnel\" is not a tunnel id (a UUID such as 6ff42ae2-765d-4adf-8112-31c55c1551ef); copy it from `cloudflared tunnel list` or the dashboard, or give existingTunnel.name instead (refused if applied today; the tunnel was found by spec.existingTunnel.name \"edge\", as the Go operator did)"
            ]
        );
    }

    #[test]
    fn a_uuid_wins_and_a_lone_bad_id_is_kept_without_a_note() {
        let id = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
        let s = spec(serde_json::json!({"id": id, "name": "edge"}));
        assert_eq!(existing_target(&s), (Some(id), Some("edge")));
        assert!(notes(&s).is_empty());
        let s = spec(serde_json::json!({"id": "my-tunnel"}));
        assert_eq!(existing_target(&s), (Some("my-tunnel"), None));
        assert!(notes(&s).is_empty());
    }
}
