//! Deletion of a tunnel object: for a newTunnel, the cloudflared pods go first (bounded, see
//! `deletion_pods`), then its DNS records, its connections and the tunnel on Cloudflare (found
//! even without `status.tunnelId`, see `deletion_target`); for an existingTunnel only the DNS
//! records cftunnel wrote for it and, when it is remotely managed, cftunnel's rules in its
//! configuration (the others stay). Nothing is (re)applied once deletion started. A failure the
//! user cannot fix on Cloudflare's side is let go with `cfargotunnel.com/abandon-cleanup`.
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::apply::controlled_by;
use super::context::TunnelContext;
use super::deletion_pods::{PodWait, pod_wait, wait_until, waiting_message};
use super::deletion_target::{self, Target};
use super::{go_cluster_workload, status};
use crate::dns_sync::sync_zone;
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::conditions::ReadyReason;
use crate::term::credentials::Stored;
use crate::term::{credentials, events};
use cftunnel_cloudflare::{CloudflareClient, Priority};
use cftunnel_policy::dns::{AccountZone, TunnelDns, ZoneDns};
use cftunnel_policy::render::ObjectNames;
use cftunnel_policy::render::labels::selector_labels;
use cftunnel_types::names::ANNOTATION_ABANDON_CLEANUP;

/// How often the pods are checked while they terminate.
const POD_WAIT: Duration = Duration::from_secs(2);

/// `Some(action)` while waiting for pods; `None` once Cloudflare holds nothing of this object.
pub async fn cleanup<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
) -> Result<Option<Action>, ReconcileError> {
    let spec = obj.tunnel_spec();
    if spec.new_tunnel.is_none() {
        remove_existing_tunnel_records(obj, ctx).await?;
        return Ok(None);
    }
    let namespace = obj.managed_namespace(&ctx.options);
    let identity = obj.identity(&ctx.options);
    let deleted_at = obj.meta().deletion_timestamp.as_ref();
    let bound = ctx.options.deletion_pod_wait;
    let until = wait_until(deleted_at, bound, jiff::Timestamp::now());
    if go_cluster_workload::remove_for_deletion(ctx, &identity).await?
        && jiff::Timestamp::now() < until
    {
        // The Go operator's Deployment goes in the foreground, its pods first: bounded too.
        return Ok(Some(Action::requeue(POD_WAIT)));
    }
    scale_to_zero(obj, ctx).await?;
    if let Some(selector) = selector_labels(K::KIND, &identity.name) {
        let selector = selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| ReconcileError::kube("listing cloudflared pods", e))?;
        match pod_wait(&pods.items, deleted_at, bound, jiff::Timestamp::now()) {
            PodWait::Done => {}
            PodWait::Waiting { pods, until } => {
                let tunnel = spec
                    .new_tunnel
                    .as_ref()
                    .map(|t| t.name.as_str())
                    .unwrap_or_default();
                let message = waiting_message(tunnel, &pods, until);
                status::report_progress(obj, ctx, ReadyReason::Deleting, &message).await?;
                return Ok(Some(Action::requeue(POD_WAIT)));
            }
        }
    }
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let has_trace = status.tunnel_id.as_ref().is_some_and(|s| !s.is_empty())
        || status
            .previous_tunnel_ids
            .as_ref()
            .is_some_and(|p| !p.is_empty());
    let api_secret =
        match credentials::read_api_secret(&ctx.client, &namespace, &spec.cloudflare).await {
            Ok(secret) => secret,
            // Without credentials nothing can be looked up; an object that never had a tunnel in
            // status and never stored a secret has nothing on Cloudflare.
            Err(error) => {
                let stored = deletion_target::managed_secret(obj, ctx).await?;
                if !has_trace && matches!(stored, Stored::Nothing) {
                    return Ok(None);
                }
                return Err(error);
            }
        };
    let cf = ctx
        .cloudflare
        .client_at(api_secret.credentials.clone(), Priority::Urgent)
        .map_err(|e| ReconcileError::cloudflare("building the Cloudflare client", e))?;
    let Some(target) = deletion_target::find(obj, ctx, &cf, &spec, &status).await? else {
        return Ok(None);
    };
    if let Some(id) = &target.tunnel_id {
        ctx.dns.guard.retire(id, &obj.uid().unwrap_or_default());
    }
    let dns = async {
        let creds = &api_secret.credentials;
        let account = target.account_id.as_str();
        let own = deletion_target::zone(&status);
        let own_id = own.as_ref().map_or("", |(id, _)| id.as_str());
        let others = deletion_target::other_zones(ctx, &cf, creds, account, &status, own_id).await;
        remove_dns_records(obj, ctx, &cf, &target, own, others, true).await
    };
    if let Err(error) = dns.await {
        if !abandons_cleanup(obj) {
            return Err(error);
        }
        // The user let go of the records; the tunnel itself may still be deletable.
        let note = format!(
            "{ANNOTATION_ABANDON_CLEANUP}=true: DNS records of this tunnel left on Cloudflare ({error})"
        );
        events::warning(ctx, obj, "CleanupAbandoned", note).await;
    }
    let Some(tunnel) = target.tunnel_id.as_deref() else {
        return Ok(None);
    };
    let account = target.account_id.as_str();
    match cf.clean_up_tunnel_connections(account, tunnel, None).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => {
            return Err(ReconcileError::cloudflare(
                "cleaning up tunnel connections",
                e,
            ));
        }
    }
    match cf.delete_tunnel(account, tunnel, true).await {
        Ok(_) => ctx.cloudflare.created.forget(tunnel),
        Err(e) if e.is_not_found() => ctx.cloudflare.created.forget(tunnel),
        Err(e) => return Err(ReconcileError::cloudflare("deleting the tunnel", e)),
    }
    events::normal(
        ctx,
        obj,
        "TunnelDeleted",
        format!("deleted tunnel {tunnel} on Cloudflare"),
    )
    .await;
    Ok(None)
}

/// Scales the object's own cloudflared Deployment (if any) to zero replicas.
pub(crate) async fn scale_to_zero<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
) -> Result<(), ReconcileError> {
    let identity = obj.identity(&ctx.options);
    let names = ObjectNames::for_owner(&identity);
    let namespace = obj.managed_namespace(&ctx.options);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(deployment) = deployments
        .get_opt(&names.workload)
        .await
        .map_err(|e| ReconcileError::kube("reading the Deployment", e))?
    else {
        return Ok(());
    };
    let ours = controlled_by(&deployment.metadata, &identity.uid);
    let replicas = deployment.spec.replicas;
    if ours && replicas != Some(0) && deployment.metadata.deletion_timestamp.is_none() {
        deployments
            .patch(
                &names.workload,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .map_err(|e| ReconcileError::kube("scaling the Deployment to zero", e))?;
    }
    Ok(())
}

/// An existingTunnel object: only the DNS records cftunnel wrote for it go; the tunnel stays on
/// Cloudflare and so do its connections (cloudflared elsewhere may run it too).
async fn remove_existing_tunnel_records<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
) -> Result<(), ReconcileError> {
    // The status that says what is ours, read fresh: the watch's copy can predate the status
    // write that recorded the last push (a deletion right after it), and would then take
    // nothing out.
    let name = obj.meta().name.clone().unwrap_or_default();
    let fresh = obj
        .object_api(&ctx.client)
        .get_opt(&name)
        .await
        .map_err(|e| ReconcileError::kube("reading the tunnel before its records go", e))?;
    let obj = fresh.as_ref().unwrap_or(obj);
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let Some(tunnel_id) = status.tunnel_id.clone().filter(|s| !s.is_empty()) else {
        // Never resolved: nothing was written for it.
        return Ok(());
    };
    // The zone is recorded with Ready, after a remotely-managed tunnel's push: a reconcile cut
    // between the two pushed rules but wrote no record.
    let zone = status
        .zone_id
        .clone()
        .filter(|s| !s.is_empty())
        .zip(status.zone_domain.clone().filter(|s| !s.is_empty()));
    let pushed = status
        .config_hostnames
        .as_ref()
        .is_some_and(|h| !h.is_empty());
    if zone.is_none() && !pushed {
        return Ok(());
    }
    let namespace = obj.managed_namespace(&ctx.options);
    let spec = obj.tunnel_spec();
    let api_secret =
        credentials::read_api_secret(&ctx.client, &namespace, &spec.cloudflare).await?;
    let cf = ctx
        .cloudflare
        .client_at(api_secret.credentials.clone(), Priority::Urgent)
        .map_err(|e| ReconcileError::cloudflare("building the Cloudflare client", e))?;
    let account_id = status.account_id.clone().unwrap_or_default();
    // A route sync that read its input before this deletion must not write them again after it.
    ctx.dns
        .guard
        .retire(&tunnel_id, &obj.uid().unwrap_or_default());
    if let Some((zone_id, zone_name)) = zone {
        let target = Target {
            account_id: account_id.clone(),
            tunnel_id: Some(tunnel_id.clone()),
            previous_tunnel_ids: status.previous_tunnel_ids.clone().unwrap_or_default(),
            tunnel_name: status.tunnel_name.clone().unwrap_or_default(),
        };
        let others = deletion_target::other_zones(
            ctx,
            &cf,
            &api_secret.credentials,
            &account_id,
            &status,
            &zone_id,
        )
        .await;
        let own = Some((zone_id, zone_name));
        remove_dns_records(obj, ctx, &cf, &target, own, others, false).await?;
    }
    // A remotely-managed tunnel stays on Cloudflare: only cftunnel's rules leave it.
    super::remote::withdraw(obj, &cf, &account_id, &tunnel_id).await
}

/// Has the user let this deletion finish without (all of) the clean-up on Cloudflare?
pub(crate) fn abandons_cleanup<K: TunnelKindAdapter>(obj: &K) -> bool {
    obj.annotations()
        .get(ANNOTATION_ABANDON_CLEANUP)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Removes every DNS record this cluster wrote for the tunnel (current or previous ids) before
/// the object goes: a sync with no hostname wanted of its zone, of every other zone the DNS sync
/// placed its hostnames in, and of `others` (previous zones, the zones of its `status.routes`).
/// `sweep` (a tunnel cftunnel deletes): every CNAME pointing at it goes too, whoever wrote it.
/// The route reconciler leaves a retired tunnel out, so nothing re-creates them meanwhile.
async fn remove_dns_records<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
    cf: &CloudflareClient,
    target: &Target,
    own: Option<(String, String)>,
    others: Vec<AccountZone>,
    sweep: bool,
) -> Result<(), ReconcileError> {
    let mut ids = target.previous_tunnel_ids.clone();
    let tunnel_id = match &target.tunnel_id {
        Some(id) => id.clone(),
        None if ids.is_empty() => return Ok(()),
        None => ids.remove(0),
    };
    let mut zones: Vec<AccountZone> = own
        .into_iter()
        .map(|(id, name)| AccountZone::active(id, name))
        .collect();
    let remembered = std::iter::once(&tunnel_id)
        .chain(&ids)
        .flat_map(|id| ctx.dns.zones.of(id));
    for zone in remembered.chain(others) {
        if !zones.iter().any(|z| z.id == zone.id) {
            zones.push(zone);
        }
    }
    for zone in &zones {
        let input = ZoneDns {
            zone_name: zone.name.clone(),
            tunnels: vec![TunnelDns {
                identity: obj.route_identity(),
                tunnel_id: tunnel_id.clone(),
                previous_tunnel_ids: ids.clone(),
                tunnel_name: target.tunnel_name.clone(),
                hostnames: Default::default(),
                txt_records: true,
                sweep,
            }],
            ..ZoneDns::default()
        };
        let _zone_lock = ctx.dns.guard.lock(&zone.id).await;
        let report = sync_zone(cf, &zone.id, &input, &ctx.dns_options())
            .await
            .map_err(|e| {
                ReconcileError::cloudflare("removing the tunnel's DNS records", e.source)
            })?;
        report.count_writes(&ctx.metrics);
        let left = report.tunnels.first();
        if let Some(t) = left.filter(|t| t.records_left > 0 || !t.errors.is_empty()) {
            return Err(ReconcileError::blocked(
                ReadyReason::CloudflareError,
                format!(
                    "{} DNS record(s) of this tunnel in zone {} could not be removed yet: {}",
                    t.records_left,
                    zone.name,
                    t.problems().join("; ")
                ),
            ));
        }
        for id in std::iter::once(&tunnel_id).chain(&ids) {
            ctx.dns.zones.remove(id, &zone.id);
        }
    }
    Ok(())
}
