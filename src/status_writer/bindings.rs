//! What the status writer writes on TunnelBindings: status (`hostnames`, `services`, `Ready`),
//! the finalizer and the Go operator's labels (computed by `cftunnel_policy::plan::statuses`).
//! Writes happen only when something changed.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::facts::notes;
use super::{StatusPlan, WriteError, bounded};
use crate::dns_sync::DnsView;
use crate::dns_sync::TunnelRecord;
use crate::edge_health::EdgeView;
use crate::term::Context;
use crate::term::finalizer::{add_patch, remove_patch};
use cftunnel_policy::plan::statuses::{binding_status, binding_tunnel, missing_labels};
use cftunnel_policy::routes::{RouteTable, SourceKind, SourceRef};
use cftunnel_types::TunnelBinding;
use cftunnel_types::TunnelIdentity;
use cftunnel_types::names::FINALIZER;

/// The status-write metric's kind.
const KIND: &str = "TunnelBinding";

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
    edge: &EdgeView,
    binding: &TunnelBinding,
) -> Result<(), WriteError> {
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
            let patch = Patch::<()>::Json(patch);
            bounded(ctx, KIND, api.patch(&name, &PatchParams::default(), &patch)).await?;
        }
        return Ok(());
    }
    if let Some(patch) = add_patch(finalizers, FINALIZER) {
        let patch = Patch::<()>::Json(patch);
        bounded(ctx, KIND, api.patch(&name, &PatchParams::default(), &patch)).await?;
    }
    if let Some(labels) = missing_labels(binding) {
        let patch = Patch::Merge(json!({ "metadata": { "labels": labels } }));
        bounded(ctx, KIND, api.patch(&name, &PatchParams::default(), &patch)).await?;
    }
    let Some(source) = table.sources.get(&source_ref) else {
        return Ok(());
    };
    let notes = source
        .tunnel
        .as_ref()
        .map(|t| notes(dns, edge, t))
        .unwrap_or_default();
    let now = Time(jiff::Timestamp::now());
    let wanted = binding_status(binding, source, &notes, now);
    if binding.status.as_ref() == Some(&wanted) {
        return Ok(());
    }
    let patch = Patch::Merge(json!({ "status": wanted }));
    bounded(
        ctx,
        KIND,
        api.patch_status(&name, &PatchParams::default(), &patch),
    )
    .await?;
    Ok(())
}
