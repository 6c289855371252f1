//! A tunnel's `status.edge`, `status.connectors` and `Connected` condition, from the edge health
//! task's newest [`EdgeView`], with one Event per change of Cloudflare's word (a Warning when
//! it goes `down` or `degraded`, Normal when `healthy` again), and a Warning Event on the
//! tunnel for each routed hostname found without an edge certificate.
//!
//! The conditions list is written whole (a merge patch replaces a list), so the write carries
//! the object's `resourceVersion`: it fails rather than write back a `Ready` older than the
//! tunnel reconciler's, and the next pass writes it from the newer copy. The tunnel reconciler
//! writes its conditions from its own copy without that precondition; a `Connected` it wrote
//! over is put back by the next pass (every `--edge-interval`).
use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::bounded;
use crate::caches::ProcessCaches;
use crate::edge_health::{EdgeReport, EdgeView};
use crate::term::adapters::TunnelKindAdapter;
use crate::term::{Context, events};
use cftunnel_policy::edge::{CONNECTED, connected_condition, transition};
use cftunnel_policy::edge_certificates::REASON_EDGE_CERTIFICATE_MISSING;

/// Writes every live tunnel's edge status that differs from `view`'s, and tells each hostname
/// newly found without an edge certificate in a Warning Event on its tunnel (`told` holds the
/// (uid, hostname) pairs told; a pair leaves it once covered); returns how many writes failed.
pub(super) async fn write_tunnel_edges(
    ctx: &Context,
    caches: &ProcessCaches,
    view: &EdgeView,
    told: &mut HashSet<(String, String)>,
) -> usize {
    let mut failed = 0;
    let mut found = HashSet::new();
    for tunnel in caches.tunnels.store().state() {
        failed += write_edge(ctx, &tunnel, view, "Tunnel").await;
        tell_certificates(ctx, tunnel.as_ref(), view, told, &mut found).await;
    }
    for tunnel in caches.cluster_tunnels.store().state() {
        failed += write_edge(ctx, &tunnel, view, "ClusterTunnel").await;
        tell_certificates(ctx, tunnel.as_ref(), view, told, &mut found).await;
    }
    told.retain(|pair| found.contains(pair));
    failed
}

/// A Warning Event for each of `tunnel`'s hostnames newly found without an edge certificate.
async fn tell_certificates<K: TunnelKindAdapter>(
    ctx: &Context,
    tunnel: &K,
    view: &EdgeView,
    told: &mut HashSet<(String, String)>,
    found: &mut HashSet<(String, String)>,
) {
    let (Some(uid), Some(findings)) = (
        tunnel.uid(),
        view.certificates.get(&tunnel.route_identity()),
    ) else {
        return;
    };
    for f in findings {
        let pair = (uid.clone(), f.hostname.clone());
        found.insert(pair.clone());
        if told.insert(pair) {
            events::warning(
                ctx,
                tunnel,
                REASON_EDGE_CERTIFICATE_MISSING,
                f.message.clone(),
            )
            .await;
        }
    }
}

/// What the status should hold: `None` when it holds it already.
fn wanted<K: TunnelKindAdapter>(tunnel: &K, report: &EdgeReport) -> Option<serde_json::Value> {
    let status = tunnel.tunnel_status().cloned().unwrap_or_default();
    let conditions = status.conditions.clone().unwrap_or_default();
    let previous = conditions.iter().find(|c| c.type_ == CONNECTED);
    let generation = tunnel.meta().generation;
    let condition = report.edge.as_ref().map(|edge| {
        let fresh = connected_condition(previous, edge, generation, Time(jiff::Timestamp::now()));
        match previous {
            // Unchanged but for the time: kept as written.
            Some(p) if same_but_time(p, &fresh) => p.clone(),
            _ => fresh,
        }
    });
    let edge_same = report.edge.is_none() || status.edge == report.edge;
    let connectors_same = status.connectors == report.connectors;
    let condition_same = condition.is_none() || condition.as_ref() == previous;
    if edge_same && connectors_same && condition_same {
        return None;
    }
    let mut fields = serde_json::Map::new();
    if let Some(edge) = &report.edge {
        fields.insert("edge".into(), json!(edge));
    }
    fields.insert("connectors".into(), json!(report.connectors));
    if let Some(condition) = condition {
        let mut next: Vec<Condition> = conditions
            .into_iter()
            .filter(|c| c.type_ != CONNECTED)
            .collect();
        next.push(condition);
        fields.insert("conditions".into(), json!(next));
    }
    Some(json!({
        "metadata": {"resourceVersion": tunnel.resource_version()},
        "status": fields,
    }))
}

fn same_but_time(a: &Condition, b: &Condition) -> bool {
    (&a.status, &a.reason, &a.message, a.observed_generation)
        == (&b.status, &b.reason, &b.message, b.observed_generation)
}

/// Writes `tunnel`'s edge status when it differs from the view's; 1 when the write failed.
async fn write_edge<K: TunnelKindAdapter>(
    ctx: &Context,
    tunnel: &Arc<K>,
    view: &EdgeView,
    kind: &'static str,
) -> usize {
    if tunnel.meta().deletion_timestamp.is_some() {
        return 0;
    }
    let Some(report) = tunnel.uid().and_then(|uid| view.tunnels.get(&uid)) else {
        return 0;
    };
    let Some(patch) = wanted(tunnel.as_ref(), report) else {
        return 0;
    };
    let (api, name) = (tunnel.object_api(&ctx.client), tunnel.name_any());
    let params = PatchParams::default();
    let written = bounded(
        ctx,
        kind,
        api.patch_status(&name, &params, &Patch::Merge(&patch)),
    )
    .await;
    match written {
        Ok(_) => {}
        // Deleted meanwhile, or changed since the copy was read: the next pass has the newer.
        Err(super::WriteError::Kube(kube::Error::Api(e))) if e.code == 404 => return 0,
        Err(error) => {
            tracing::debug!(tunnel = %tunnel.display(), %error, "tunnel edge status not written");
            return 1;
        }
    }
    let before = tunnel
        .tunnel_status()
        .and_then(|s| s.edge.as_ref())
        .map(|e| e.status.as_str());
    if let Some(edge) = &report.edge
        && let Some(told) = transition(before, edge)
    {
        if told.warning {
            events::warning(ctx, tunnel.as_ref(), told.reason, told.message).await;
        } else {
            events::normal(ctx, tunnel.as_ref(), told.reason, told.message).await;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::{ConnectorsStatus, EdgeStatus, Tunnel, TunnelStatus};

    fn tunnel(status: TunnelStatus) -> Tunnel {
        let mut t: Tunnel = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
            "metadata": {"name": "edge", "namespace": "shop", "uid": "u1", "resourceVersion": "7", "generation": 2},
            "spec": {"newTunnel": {"name": "edge"}, "cloudflare": {"domain": "example.com", "secret": "cf"}},
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        t.status = Some(status);
        t
    }

    fn edge(word: &str) -> EdgeStatus {
        EdgeStatus {
            status: word.into(),
            last_transition_time: Some("2026-12-07T00:00:00Z".into()),
            ..EdgeStatus::default()
        }
    }

    #[test]
    fn a_change_is_written_with_the_resource_version_and_the_other_conditions_kept() {
        let ready = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Ready".into(),
            message: "ok".into(),
            observed_generation: Some(2),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        };
        let t = tunnel(TunnelStatus {
            conditions: Some(vec![ready.clone()]),
            ..TunnelStatus::default()
        });
        let report = EdgeReport {
            edge: Some(edge("down")),
            connectors: Some(ConnectorsStatus {
                ready: 0,
                desired: 2,
            }),
        };
        let patch = wanted(&t, &report).unwrap_or_else(|| panic!("a write"));
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["edge"]["status"], "down");
        assert_eq!(
            patch["status"]["connectors"],
            json!({"ready": 0, "desired": 2})
        );
        let conditions = patch["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0]["type"], "Ready");
        assert_eq!(
            (
                &conditions[1]["type"],
                &conditions[1]["status"],
                &conditions[1]["reason"]
            ),
            (&json!("Connected"), &json!("False"), &json!("Down"))
        );
        // Written: the same report asks for nothing more.
        let mut written = t.clone();
        let status = written.status.get_or_insert_default();
        status.edge = report.edge.clone();
        status.connectors = report.connectors.clone();
        status.conditions = serde_json::from_value(patch["status"]["conditions"].clone()).ok();
        assert_eq!(wanted(&written, &report), None);
    }

    #[test]
    fn a_tunnel_the_edge_was_not_asked_about_gets_only_its_connectors() {
        let t = tunnel(TunnelStatus::default());
        let report = EdgeReport {
            edge: None,
            connectors: Some(ConnectorsStatus {
                ready: 1,
                desired: 1,
            }),
        };
        let patch = wanted(&t, &report).unwrap_or_else(|| panic!("a write"));
        assert_eq!(patch["status"].get("conditions"), None);
        assert_eq!(patch["status"].get("edge"), None);
        assert_eq!(patch["status"]["connectors"]["ready"], 1);
    }
}
