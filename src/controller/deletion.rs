//! Deletion of a newTunnel object (SPEC §3.1 step 7): the cloudflared pods go first, then the
//! connections and the tunnel on Cloudflare. Nothing is (re)applied once deletion started.
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::adapters::TunnelKindAdapter;
use super::apply::controlled_by;
use super::conditions::ReadyReason;
use super::context::Context;
use super::core::ReconcileError;
use super::{credentials, events, go_cluster_workload};
use crate::api::TunnelStatus;
use crate::cloudflare::client::CloudflareClient;
use crate::dns::{DnsOptions, TunnelDns, ZoneDns, sync_zone};
use crate::render::ObjectNames;
use crate::render::labels::selector_labels;

/// How often the pods are checked while they terminate.
const POD_WAIT: Duration = Duration::from_secs(2);

/// `Some(action)` while waiting for pods; `None` once Cloudflare holds nothing of this object.
pub async fn cleanup<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
) -> Result<Option<Action>, ReconcileError> {
    let spec = obj.tunnel_spec();
    if spec.new_tunnel.is_none() {
        return Ok(None);
    }
    let namespace = obj.managed_namespace(ctx);
    let identity = obj.identity(ctx);
    if go_cluster_workload::remove_for_deletion(ctx, &identity).await? {
        return Ok(Some(Action::requeue(POD_WAIT)));
    }
    let names = ObjectNames::for_owner(&identity);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    if let Some(deployment) = deployments
        .get_opt(&names.workload)
        .await
        .map_err(|e| ReconcileError::kube("reading the Deployment", e))?
    {
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
    }
    if let Some(selector) = selector_labels(K::KIND, &identity.name) {
        let selector = selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| ReconcileError::kube("listing cloudflared pods", e))?;
        if !pods.items.is_empty() {
            return Ok(Some(Action::requeue(POD_WAIT)));
        }
    }
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let (Some(account), Some(tunnel)) = (
        status.account_id.clone().filter(|s| !s.is_empty()),
        status.tunnel_id.clone().filter(|s| !s.is_empty()),
    ) else {
        return Ok(None);
    };
    let api_secret =
        credentials::read_api_secret(&ctx.client, &namespace, &spec.cloudflare).await?;
    let cf = ctx
        .cloudflare(api_secret.credentials)
        .map_err(|e| ReconcileError::cloudflare("building the Cloudflare client", e))?;
    remove_dns_records(obj, &cf, &status, &tunnel).await?;
    match cf
        .clean_up_tunnel_connections(&account, &tunnel, None)
        .await
    {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => {
            return Err(ReconcileError::cloudflare(
                "cleaning up tunnel connections",
                e,
            ));
        }
    }
    match cf.delete_tunnel(&account, &tunnel, true).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
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

/// Removes every DNS record this tunnel owns (current or previous ids) before the tunnel goes:
/// a sync of its zone with no hostname wanted. The route reconciler leaves a deleting tunnel
/// out, so nothing re-creates them meanwhile.
async fn remove_dns_records<K: TunnelKindAdapter>(
    obj: &K,
    cf: &CloudflareClient,
    status: &TunnelStatus,
    tunnel_id: &str,
) -> Result<(), ReconcileError> {
    let (Some(zone_id), Some(zone_name)) = (
        status.zone_id.as_deref().filter(|s| !s.is_empty()),
        status.zone_domain.as_deref().filter(|s| !s.is_empty()),
    ) else {
        return Ok(());
    };
    let zone = ZoneDns {
        zone_name: zone_name.to_string(),
        tunnels: vec![TunnelDns {
            identity: obj.route_identity(),
            tunnel_id: tunnel_id.to_string(),
            previous_tunnel_ids: status.previous_tunnel_ids.clone().unwrap_or_default(),
            tunnel_name: status.tunnel_name.clone().unwrap_or_default(),
            hostnames: Default::default(),
            txt_records: true,
        }],
    };
    let report = sync_zone(cf, zone_id, &zone, &DnsOptions::default())
        .await
        .map_err(|e| ReconcileError::cloudflare("removing the tunnel's DNS records", e.source))?;
    let left = report.tunnels.first();
    if let Some(t) = left.filter(|t| t.records_left > 0 || !t.errors.is_empty()) {
        return Err(ReconcileError::blocked(
            ReadyReason::CloudflareError,
            format!(
                "{} DNS record(s) of this tunnel could not be removed yet: {}",
                t.records_left,
                t.problems().join("; ")
            ),
        ));
    }
    Ok(())
}
