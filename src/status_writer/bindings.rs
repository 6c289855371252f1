//! What the status writer writes on TunnelBindings: status (`hostnames`, `services`, `Ready`),
//! the finalizer and the Go operator's labels. Writes happen only when something changed.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::StatusPlan;
use crate::dns_sync::TunnelRecord;
use crate::dns_sync::{DnsProblem, DnsView};
use crate::term::Context;
use crate::term::conditions::{find_ready, with_ready};
use crate::term::finalizer::{add_patch, remove_patch};
use cftunnel_policy::render::labels::binding_labels;
use cftunnel_policy::routes::{RouteTable, SourceKind, SourceRef, SourceStatus};
use cftunnel_types::binding::ServiceInfo;
use cftunnel_types::names::FINALIZER;
use cftunnel_types::{TunnelBinding, TunnelBindingStatus};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// The tunnel a binding names (kind in any case; a Tunnel in the binding's namespace).
pub(crate) fn binding_tunnel(binding: &TunnelBinding) -> Option<TunnelIdentity> {
    let kind = TunnelKind::parse(&binding.spec.tunnel_ref.kind)?;
    Some(TunnelIdentity {
        kind,
        namespace: match kind {
            TunnelKind::ClusterTunnel => String::new(),
            _ => binding.namespace().unwrap_or_default(),
        },
        name: binding.spec.tunnel_ref.name.clone(),
    })
}

/// The `Ready` reason and message: the route model's, unless DNS has problems with a served
/// hostname.
pub(super) fn ready_of(
    source: &SourceStatus,
    problems: &[DnsProblem],
) -> (String, String, &'static str) {
    let hostnames = source.hostnames();
    let dns: Vec<&DnsProblem> = problems
        .iter()
        .filter(|p| {
            p.hostname
                .as_deref()
                .is_none_or(|h| hostnames.iter().any(|mine| mine.eq_ignore_ascii_case(h)))
        })
        .collect();
    if source.ready_status() == "True" && !dns.is_empty() {
        let reason = dns[0].reason.to_string();
        let message = dns
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        return (reason, message, "False");
    }
    let message = if source.message.is_empty() {
        format!("routed: {}", hostnames.join(", "))
    } else {
        source.message.clone()
    };
    (
        source.reason.as_str().to_string(),
        message,
        source.ready_status(),
    )
}

/// The status a binding should carry; `lastTransitionTime` moves only when `status` flips.
pub(crate) fn binding_status(
    binding: &TunnelBinding,
    source: &SourceStatus,
    problems: &[DnsProblem],
    now: Time,
) -> TunnelBindingStatus {
    let (reason, message, status) = ready_of(source, problems);
    let current = binding.status.as_ref();
    let previous = find_ready(current.and_then(|s| s.conditions.as_ref()));
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now,
    };
    let ready = Condition {
        type_: "Ready".to_string(),
        status: status.to_string(),
        reason,
        message,
        observed_generation: binding.metadata.generation,
        last_transition_time,
    };
    let served = source.routes.iter().filter(|r| r.reason.is_served());
    TunnelBindingStatus {
        hostnames: Some(source.hostnames().join(",")),
        services: Some(
            served
                .map(|r| ServiceInfo {
                    hostname: r.hostname.clone(),
                    target: r.service.clone(),
                })
                .collect(),
        ),
        observed_generation: binding.metadata.generation,
        conditions: Some(with_ready(
            current.and_then(|s| s.conditions.as_ref()),
            ready,
        )),
    }
}

/// The Go operator's binding labels (`render::labels::binding_labels`) that a stored binding
/// lacks or carries with another value, as a merge patch of `metadata.labels` (a `null` removes a
/// name label that can no longer name the tunnel); `None` when it carries them. New bindings get
/// them from the mutating webhook; this labels those stored before it.
pub(crate) fn missing_labels(
    binding: &TunnelBinding,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let current = binding.labels();
    let mut patch = serde_json::Map::new();
    for (key, wanted) in binding_labels(&binding.spec.tunnel_ref.name) {
        if current.get(key) != wanted.as_ref() {
            patch.insert(key.to_string(), json!(wanted));
        }
    }
    (!patch.is_empty()).then_some(patch)
}

/// Has DNS let go of a deleting binding? One with `disableDNSUpdates` never had records; one
/// whose routed hostnames are known waits only for those; otherwise for a clean sync of its
/// tunnel's whole group.
fn dns_released(
    binding: &TunnelBinding,
    tunnel: &TunnelIdentity,
    dns: &DnsView,
    table: &RouteTable,
    records: &[TunnelRecord],
) -> bool {
    if binding.spec.tunnel_ref.disable_dns_updates {
        return true;
    }
    match binding.status.as_ref().and_then(|s| s.hostnames.as_deref()) {
        Some(hostnames) => {
            let mine: Vec<String> = hostnames
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .collect();
            mine.is_empty() || dns.released(tunnel, &mine, table, records)
        }
        None => dns.settled(tunnel, table, records),
    }
}

/// Writes what a binding should carry: its finalizer and labels while it lives, its status from
/// `plan`'s route table and `dns`'s problems; a deleting binding loses its finalizer once DNS let
/// go of its hostnames (or its tunnel is gone). Nothing is written that is already there.
pub(super) async fn write_binding(
    ctx: &Context,
    plan: &StatusPlan,
    dns: &DnsView,
    binding: &TunnelBinding,
) -> Result<(), kube::Error> {
    let (table, records) = (&*plan.table, &*plan.records);
    let namespace = binding.namespace().unwrap_or_default();
    let api: Api<TunnelBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = binding.name_any();
    let finalizers = binding.finalizers();
    let source_ref = SourceRef {
        kind: SourceKind::TunnelBinding,
        namespace: namespace.clone(),
        name: name.clone(),
        uid: binding.uid().unwrap_or_default(),
    };
    if binding.metadata.deletion_timestamp.is_some() {
        // A table that still routes the binding was computed before its deletion: DNS in step
        // with that table still wants its records. The next plan comes without it.
        if table.sources.contains_key(&source_ref) {
            return Ok(());
        }
        let tunnel = binding_tunnel(binding);
        let tunnel_live = tunnel
            .as_ref()
            .is_some_and(|t| records.iter().any(|r| &r.identity == t && !r.deleting));
        let released = !tunnel_live
            || tunnel
                .as_ref()
                .is_some_and(|t| dns_released(binding, t, dns, table, records));
        if released && let Some(patch) = remove_patch(finalizers, FINALIZER) {
            api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await?;
        }
        return Ok(());
    }
    if let Some(patch) = add_patch(finalizers, FINALIZER) {
        api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await?;
    }
    if let Some(labels) = missing_labels(binding) {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": labels } })),
        )
        .await?;
    }
    let Some(source) = table.sources.get(&source_ref) else {
        return Ok(());
    };
    let problems = source
        .tunnel
        .as_ref()
        .map(|t| dns.problems(t))
        .unwrap_or_default();
    let now = Time(jiff::Timestamp::now());
    let wanted = binding_status(binding, source, problems, now);
    if binding.status.as_ref() == Some(&wanted) {
        return Ok(());
    }
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": wanted })),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_policy::routes::{RouteEntry, RouteReason};

    fn time(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    fn binding() -> TunnelBinding {
        serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1",
            "kind": "TunnelBinding",
            "metadata": {"name": "web", "namespace": "shop", "generation": 3},
            "subjects": [{"name": "web"}],
            "tunnelRef": {"kind": "tunnel", "name": "edge"},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn routed(host: &str) -> SourceStatus {
        let source = SourceRef {
            kind: SourceKind::TunnelBinding,
            namespace: "shop".into(),
            name: "web".into(),
            uid: String::new(),
        };
        SourceStatus {
            tunnel: binding_tunnel(&binding()),
            routes: vec![std::sync::Arc::new(RouteEntry {
                hostname: host.into(),
                path: None,
                service: "http://web.shop.svc:80".into(),
                source: source.into(),
                reason: RouteReason::Routed,
                message: String::new(),
            })],
            reason: RouteReason::Routed,
            message: String::new(),
        }
    }

    #[test]
    fn a_routed_binding_reports_its_hostnames_and_services() {
        let status = binding_status(&binding(), &routed("web.example.com"), &[], time(10));
        assert_eq!(status.hostnames.as_deref(), Some("web.example.com"));
        let services = status.services.unwrap_or_default();
        assert_eq!(services[0].target, "http://web.shop.svc:80");
        let ready = find_ready(status.conditions.as_ref())
            .cloned()
            .unwrap_or_else(|| panic!("no Ready"));
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "Routed")
        );
        assert_eq!(ready.observed_generation, Some(3));
        assert_eq!(status.observed_generation, Some(3));
    }

    #[test]
    fn dns_problems_of_its_own_hostnames_turn_ready_false_others_do_not() {
        let conflict = DnsProblem {
            hostname: Some("WEB.example.com".into()),
            reason: "DNSConflict",
            message: "DNS record CNAME web.example.com is not managed by Tunnel shop/edge".into(),
        };
        let elsewhere = DnsProblem {
            hostname: Some("other.example.com".into()),
            reason: "DNSConflict",
            message: "x".into(),
        };
        let source = routed("web.example.com");
        let status = binding_status(
            &binding(),
            &source,
            std::slice::from_ref(&elsewhere),
            time(10),
        );
        let ready = find_ready(status.conditions.as_ref())
            .cloned()
            .unwrap_or_else(|| panic!("no Ready"));
        assert_eq!(ready.status, "True");
        let status = binding_status(
            &binding(),
            &source,
            &[elsewhere, conflict.clone()],
            time(10),
        );
        let ready = find_ready(status.conditions.as_ref())
            .cloned()
            .unwrap_or_else(|| panic!("no Ready"));
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "DNSConflict")
        );
        assert_eq!(ready.message, conflict.message);
    }

    #[test]
    fn the_transition_time_moves_only_when_ready_flips() {
        let mut b = binding();
        let first = binding_status(&b, &routed("web.example.com"), &[], time(10));
        b.status = Some(first.clone());
        let same = binding_status(&b, &routed("web.example.com"), &[], time(99));
        assert_eq!(same, first, "an unchanged outcome is an unchanged status");
        let problem = DnsProblem {
            hostname: None,
            reason: "DNSError",
            message: "DNS records not synced".into(),
        };
        let flipped = binding_status(&b, &routed("web.example.com"), &[problem], time(99));
        let ready = find_ready(flipped.conditions.as_ref())
            .cloned()
            .unwrap_or_else(|| panic!("no Ready"));
        assert_eq!(ready.last_transition_time, time(99));
    }

    #[test]
    fn a_stored_binding_is_labelled_once_and_a_stale_name_label_removed() {
        let mut b = binding();
        assert_eq!(
            missing_labels(&b).map(serde_json::Value::Object),
            Some(
                json!({"cfargotunnel.com/name": "edge", "cfargotunnel.com/kind": "TunnelBinding"})
            )
        );
        b.metadata.labels = Some(
            [
                ("cfargotunnel.com/name", "edge"),
                ("cfargotunnel.com/kind", "TunnelBinding"),
                ("team", "shop"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        assert_eq!(missing_labels(&b), None);
        b.spec.tunnel_ref.name = "e".repeat(64);
        assert_eq!(
            missing_labels(&b).map(serde_json::Value::Object),
            Some(json!({"cfargotunnel.com/name": null}))
        );
    }

    #[test]
    fn a_binding_names_its_tunnel_by_identity() {
        let id = binding_tunnel(&binding()).unwrap_or_else(|| panic!("no tunnel"));
        assert_eq!(
            (id.kind, id.namespace.as_str(), id.name.as_str()),
            (TunnelKind::Tunnel, "shop", "edge")
        );
    }
}
