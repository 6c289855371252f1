//! What the route reconciler writes on Ingresses of cftunnel's classes:
//! `status.loadBalancer.ingress[].hostname`, the tunnel's `<tunnelId>.cfargotunnel.com`, while
//! at least one of its routes is served (removed otherwise), and one Event per Ingress
//! generation that carries a `tls` section (Cloudflare's edge terminates TLS). Its route
//! outcomes are Events too, written with the labelled Services' ([`super::status`]).
use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::networking::v1::{
    Ingress, IngressLoadBalancerIngress, IngressLoadBalancerStatus,
};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use cftunnel_policy::routes::{RouteTable, SourceKind, SourceRef, SourceStatus};

/// The public name of a Cloudflare tunnel, which every routed hostname is a CNAME to.
pub(crate) fn tunnel_hostname(tunnel_id: &str) -> String {
    format!("{tunnel_id}.cfargotunnel.com")
}

/// The `status.loadBalancer` an Ingress should carry: the tunnel's hostname while some route of
/// it is served and the tunnel has an id; empty otherwise.
pub(crate) fn load_balancer(
    source: &SourceStatus,
    records: &[TunnelRecord],
) -> IngressLoadBalancerStatus {
    let served = source.routes.iter().any(|r| r.reason.is_served());
    let id = source.tunnel.as_ref().and_then(|tunnel| {
        records
            .iter()
            .find(|r| &r.identity == tunnel && !r.deleting)
            .and_then(|r| r.status.tunnel_id.clone())
            .filter(|id| !id.is_empty())
    });
    IngressLoadBalancerStatus {
        ingress: id.filter(|_| served).map(|id| {
            vec![IngressLoadBalancerIngress {
                hostname: Some(tunnel_hostname(&id)),
                ..IngressLoadBalancerIngress::default()
            }]
        }),
    }
}

/// The ObjectReference Events about an Ingress name.
pub(crate) fn ingress_reference(source: &SourceRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("networking.k8s.io/v1".to_string()),
        kind: Some("Ingress".to_string()),
        namespace: Some(source.namespace.clone()),
        name: Some(source.name.clone()),
        uid: Some(source.uid.clone()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    }
}

/// Writes each Ingress's `status.loadBalancer` when it differs, and the TLS Event once per
/// generation (`tls_told` remembers which were told).
pub(super) async fn write_ingresses(
    ctx: &Context,
    table: &RouteTable,
    records: &[TunnelRecord],
    ingresses: &[Arc<Ingress>],
    tls_told: &mut HashSet<(String, i64)>,
) {
    let mut current = HashSet::new();
    for ingress in ingresses {
        let source_ref = SourceRef::of(SourceKind::Ingress, &ingress.metadata);
        let Some(source) = table.sources.get(&source_ref) else {
            continue;
        };
        let wanted = load_balancer(source, records);
        let have = ingress
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        let same = have.ingress.as_deref().unwrap_or_default()
            == wanted.ingress.as_deref().unwrap_or_default();
        if !same {
            let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &source_ref.namespace);
            let patch = json!({"status": {"loadBalancer": {"ingress": wanted.ingress}}});
            if let Err(error) = api
                .patch_status(
                    &source_ref.name,
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                tracing::warn!(ingress = %source_ref, %error, "Ingress status not written");
            }
        }
        let has_tls = ingress
            .spec
            .as_ref()
            .and_then(|s| s.tls.as_ref())
            .is_some_and(|tls| !tls.is_empty());
        let key = (
            ingress.uid().unwrap_or_default(),
            ingress.metadata.generation.unwrap_or(0),
        );
        if has_tls {
            current.insert(key.clone());
            if tls_told.insert(key) {
                tell_tls(ctx, &source_ref).await;
            }
        }
    }
    tls_told.retain(|k| current.contains(k));
}

async fn tell_tls(ctx: &Context, source: &SourceRef) {
    let event = Event {
        type_: EventType::Normal,
        reason: "TLSAtEdge".to_string(),
        note: Some(
            "spec.tls: Cloudflare's edge terminates TLS for these hosts with its own certificate; \
             the Secret is not used, and traffic reaches the Service through the tunnel"
                .to_string(),
        ),
        action: "Route".to_string(),
        secondary: None,
    };
    if let Err(error) = ctx
        .recorder
        .publish(&event, &ingress_reference(source))
        .await
    {
        tracing::warn!(%error, "Ingress event not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_policy::routes::{RouteEntry, RouteReason};
    use cftunnel_types::{TunnelIdentity, TunnelKind};

    fn record(id: Option<&str>) -> TunnelRecord {
        TunnelRecord {
            identity: TunnelIdentity {
                kind: TunnelKind::ClusterTunnel,
                namespace: String::new(),
                name: "edge".into(),
            },
            secret_namespace: "cftunnel-system".into(),
            cloudflare: serde_json::from_value(json!({"domain": "example.com", "secret": "cf"}))
                .unwrap_or_else(|e| panic!("{e}")),
            status: serde_json::from_value(json!({"tunnelId": id}))
                .unwrap_or_else(|e| panic!("{e}")),
            deleting: false,
        }
    }

    fn source(reason: RouteReason) -> SourceStatus {
        let source = SourceRef {
            kind: SourceKind::Ingress,
            namespace: "shop".into(),
            name: "web".into(),
            uid: String::new(),
        };
        SourceStatus {
            tunnel: Some(record(None).identity),
            routes: vec![RouteEntry {
                hostname: "app.example.com".into(),
                path: None,
                service: "http://web.shop.svc:80".into(),
                source,
                reason,
                message: String::new(),
            }],
            reason,
            message: String::new(),
        }
    }

    fn hostnames(status: &IngressLoadBalancerStatus) -> Vec<String> {
        status
            .ingress
            .iter()
            .flatten()
            .filter_map(|i| i.hostname.clone())
            .collect()
    }

    #[test]
    fn the_load_balancer_is_the_tunnel_while_a_route_is_served() {
        let id = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
        let records = [record(Some(id))];
        assert_eq!(
            hostnames(&load_balancer(&source(RouteReason::Routed), &records)),
            vec![format!("{id}.cfargotunnel.com")]
        );
        assert!(
            hostnames(&load_balancer(
                &source(RouteReason::HostnameConflict),
                &records
            ))
            .is_empty()
        );
        assert!(
            hostnames(&load_balancer(
                &source(RouteReason::Routed),
                &[record(None)]
            ))
            .is_empty(),
            "no tunnel id yet: no address"
        );
    }
}
