//! What the status writer writes on Ingresses of cftunnel's classes:
//! `status.loadBalancer.ingress[].hostname`, the tunnel's `<tunnelId>.cfargotunnel.com`, while
//! at least one of its routes is served (removed otherwise), and one Event per Ingress
//! generation that carries a `tls` section (Cloudflare's edge terminates TLS). Its route
//! outcomes are Events too, told with the labelled Services' ([`super::events`]). An
//! Ingress moved to another controller's class loses the entries cftunnel wrote (only those).
use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::Latest;
use super::facts::{all_tunnel_ids, tunnel_ids};
use crate::term::Context;
use cftunnel_policy::plan::statuses::{load_balancer, without_ours};
use cftunnel_policy::routes::{SourceKind, SourceRef};

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
/// notices once per generation (`told` remembers which were told).
/// Writes each Ingress's `status.loadBalancer` where it differs from what `plan` says, and tells
/// the notices of each generation once; returns how many writes failed (the next pass tries
/// them again). Each Ingress is let go once written.
pub(super) async fn write_ingresses(
    ctx: &Context,
    latest: &Latest,
    ingresses: Vec<Arc<Ingress>>,
    told: &mut HashSet<(String, i64, Notice)>,
) -> usize {
    let mut current = HashSet::new();
    let mut failed = 0;
    for ingress in ingresses {
        let Some(plan) = latest.plan() else {
            return failed;
        };
        let (table, records) = (&*plan.table, &*plan.records);
        let source_ref = SourceRef::of(SourceKind::Ingress, &ingress.metadata);
        let have = ingress
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        let wanted = match table.sources.get(&source_ref) {
            Some(source) => load_balancer(source, &tunnel_ids(records)),
            // Not (or no longer) of cftunnel's classes: only the entries cftunnel wrote go.
            None => without_ours(&have, &all_tunnel_ids(records)),
        };
        let same = have.ingress.as_deref().unwrap_or_default()
            == wanted.ingress.as_deref().unwrap_or_default();
        if !same {
            let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &source_ref.namespace);
            let patch = json!({"status": {"loadBalancer": {"ingress": wanted.ingress}}});
            let params = PatchParams::default();
            let patch = Patch::Merge(patch);
            let write = api.patch_status(&source_ref.name, &params, &patch);
            if let Err(error) = super::bounded(ctx, "Ingress", write).await {
                failed += 1;
                tracing::warn!(ingress = %source_ref, %error, "Ingress status not written");
            }
        }
        if !table.sources.contains_key(&source_ref) {
            continue;
        }
        let spec = ingress.spec.as_ref();
        let has_tls = spec
            .and_then(|s| s.tls.as_ref())
            .is_some_and(|tls| !tls.is_empty());
        let wildcards: Vec<&str> = spec
            .and_then(|s| s.rules.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|r| r.host.as_deref())
            .filter(|h| h.starts_with("*."))
            .collect();
        let (uid, generation) = (
            ingress.uid().unwrap_or_default(),
            ingress.metadata.generation.unwrap_or(0),
        );
        for (notice, due) in [
            (Notice::TlsAtEdge, has_tls),
            (Notice::WildcardDepth, !wildcards.is_empty()),
        ] {
            if !due {
                continue;
            }
            let key = (uid.clone(), generation, notice);
            current.insert(key.clone());
            if !told.contains(&key) {
                match tell(ctx, &source_ref, notice, &wildcards).await {
                    Ok(()) => {
                        told.insert(key);
                    }
                    Err(error) => {
                        failed += 1;
                        tracing::warn!(%error, ingress = %source_ref, "Ingress event not recorded");
                    }
                }
            }
        }
    }
    told.retain(|k| current.contains(k));
    failed
}

/// What an Ingress of cftunnel's is told once per generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Notice {
    /// It has a `tls` section.
    TlsAtEdge,
    /// It has a wildcard host.
    WildcardDepth,
}

async fn tell(
    ctx: &Context,
    source: &SourceRef,
    notice: Notice,
    wildcards: &[&str],
) -> Result<(), super::WriteError> {
    let (reason, note) = match notice {
        Notice::TlsAtEdge => (
            "TLSAtEdge",
            "spec.tls: Cloudflare's edge terminates TLS for these hosts with its own certificate; \
             the Secret is not used, and traffic reaches the Service through the tunnel"
                .to_string(),
        ),
        // The Ingress specification matches `*.foo.com` one label deep (`bar.foo.com`, not
        // `baz.bar.foo.com`); cloudflared and a DNS wildcard take every depth.
        Notice::WildcardDepth => (
            "WildcardMatchesEveryDepth",
            format!(
                "spec.rules[].host {}: the Ingress specification matches a wildcard host one label deep, but cloudflared's rule and the DNS wildcard record match names of every depth below it (baz.bar.foo.com as well as bar.foo.com); give deeper names rules of their own to route them elsewhere",
                wildcards.join(", ")
            ),
        ),
    };
    let event = Event {
        type_: EventType::Normal,
        reason: reason.to_string(),
        note: Some(crate::term::events::bounded(note)),
        action: "Route".to_string(),
        secondary: None,
    };
    super::bounded(
        ctx,
        "Event",
        ctx.recorder.publish(&event, &ingress_reference(source)),
    )
    .await
}
