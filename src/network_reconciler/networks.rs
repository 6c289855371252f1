//! VirtualNetworks: an owned one (`spec.name`) is found by name with this installation's
//! marker (a create whose answer was lost is found, not made twice) or created, and deleted
//! with its object once no NetworkRoute uses it (its finalizer waits and says why); an
//! adopted one (`spec.existing`) is resolved to its id and never changed or deleted. cftunnel
//! never changes which network is the account's default. Once `status.id` is recorded, a
//! network costs no call until it is deleted.
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::term::Context;
use crate::term::credentials::read_api_secret;
use crate::term::finalizer::{add_patch, remove_patch};
use cftunnel_cloudflare::{CloudflareClient, NewVirtualNetwork, Priority, VirtualNetworkFilter};
use cftunnel_policy::private::{Owner, OwnerKind, Ownership, ownership, ownership_comment};
use cftunnel_types::CloudflareDetails;
use cftunnel_types::names::FINALIZER;
use cftunnel_types::network::{
    CONDITION_PROGRAMMED, NetworkRoute, VirtualNetwork, VirtualNetworkStatus,
};

pub(crate) const REASON_IN_USE: &str = "InUse";
pub(crate) const REASON_NAME_TAKEN: &str = "NameTaken";
pub(crate) const REASON_NOT_FOUND: &str = "NotFound";

/// Reconciles every VirtualNetwork once; true when one waits (in use, or a call or write
/// failed) and should be looked at again soon.
pub(crate) async fn reconcile(
    ctx: &Context,
    networks: &[Arc<VirtualNetwork>],
    routes: &[Arc<NetworkRoute>],
) -> bool {
    let mut waiting = false;
    for network in networks {
        let name = network.name_any();
        let owned = network.spec.name.is_some();
        if network.metadata.deletion_timestamp.is_some() {
            if !owned || !network.finalizers().iter().any(|f| f == FINALIZER) {
                continue;
            }
            waiting = true;
            let users: Vec<String> = routes
                .iter()
                .filter(|r| {
                    r.metadata.deletion_timestamp.is_none()
                        && r.spec
                            .virtual_network_ref
                            .as_ref()
                            .is_some_and(|v| v.name == name)
                })
                .map(|r| format!("{}/{}", r.namespace().unwrap_or_default(), r.name_any()))
                .collect();
            if !users.is_empty() {
                let message = format!(
                    "NetworkRoutes still use it: {}; delete them or point them elsewhere, then it is deleted",
                    users.join(", ")
                );
                write(ctx, network, false, REASON_IN_USE, message).await;
                continue;
            }
            match delete(ctx, network).await {
                Ok(()) => {
                    if let Some(patch) = remove_patch(network.finalizers(), FINALIZER) {
                        send(ctx, network, patch).await;
                    }
                }
                Err(message) => {
                    write(ctx, network, false, "CloudflareError", message).await;
                }
            }
            continue;
        }
        let mut network = network.as_ref().clone();
        if owned && let Some(patch) = add_patch(network.finalizers(), FINALIZER) {
            match send(ctx, &network, patch).await {
                Some(updated) => network = updated,
                None => {
                    waiting = true;
                    continue;
                }
            }
        }
        if network
            .status
            .as_ref()
            .and_then(|s| s.id.as_ref())
            .is_some()
        {
            continue;
        }
        let written = match resolve(ctx, &network).await {
            Ok(id) => write_id(ctx, &network, &id).await,
            Err((reason, message)) => {
                write(ctx, &network, false, reason, message).await;
                false
            }
        };
        waiting |= !written;
    }
    waiting
}

fn owner(network: &VirtualNetwork) -> Owner {
    Owner::new(OwnerKind::VirtualNetwork, "", &network.name_any())
}

/// A client for the network's account, at `priority`.
async fn client(
    ctx: &Context,
    network: &VirtualNetwork,
    priority: Priority,
) -> Result<CloudflareClient, String> {
    let account = &network.spec.cloudflare;
    let details: CloudflareDetails = serde_json::from_value(json!({
        "domain": "",
        "secret": account.secret,
        "accountId": account.account_id,
        "CLOUDFLARE_API_TOKEN": account.api_token_key.clone().unwrap_or_else(|| "CLOUDFLARE_API_TOKEN".into()),
    }))
    .map_err(|e| e.to_string())?;
    let namespace = &ctx.options.cluster_resource_namespace;
    let secret = read_api_secret(&ctx.client, namespace, &details)
        .await
        .map_err(|e| e.to_string())?;
    ctx.cloudflare
        .client_at(secret.credentials, priority)
        .map_err(|e| e.to_string())
}

/// The network's id: found (owned: by name with our marker; adopted: by id or name) or made.
async fn resolve(
    ctx: &Context,
    network: &VirtualNetwork,
) -> Result<String, (&'static str, String)> {
    let error = |m: String| ("CloudflareError", m);
    let cf = client(ctx, network, Priority::Normal)
        .await
        .map_err(error)?;
    let account = &network.spec.cloudflare.account_id;
    if let Some(existing) = &network.spec.existing {
        let filter = match (&existing.id, &existing.name) {
            (Some(id), _) => VirtualNetworkFilter {
                id: Some(id.clone()),
                ..VirtualNetworkFilter::default()
            },
            (None, Some(name)) => VirtualNetworkFilter::named(name.clone()),
            (None, None) => {
                return Err((
                    REASON_NOT_FOUND,
                    "spec.existing names neither an id nor a name; set one".into(),
                ));
            }
        };
        let found = cf
            .list_virtual_networks(account, &filter)
            .await
            .map_err(|e| error(e.to_string()))?;
        return match found.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err((
                REASON_NOT_FOUND,
                format!(
                    "no virtual network matches spec.existing ({existing:?}) in account {account}"
                ),
            )),
            _ => Err((
                REASON_NOT_FOUND,
                format!(
                    "{} virtual networks match spec.existing ({existing:?}); give its id",
                    found.len()
                ),
            )),
        };
    }
    let name = network.spec.name.clone().unwrap_or_default();
    let owner = owner(network);
    let found = cf
        .list_virtual_networks(account, &VirtualNetworkFilter::named(name.clone()))
        .await
        .map_err(|e| error(e.to_string()))?;
    if let Some(ours) = found
        .iter()
        .find(|n| ownership(&n.comment, &ctx.cluster) == Ownership::Ours(owner.digest()))
    {
        return Ok(ours.id.clone());
    }
    if let Some(theirs) = found.first() {
        return Err((
            REASON_NAME_TAKEN,
            format!(
                "a virtual network named {name:?} exists ({}) and was not made by this cftunnel; adopt it with spec.existing or choose another spec.name",
                theirs.id
            ),
        ));
    }
    let comment = ownership_comment(&ctx.cluster, &owner, network.spec.comment.as_deref());
    let made = cf
        .create_virtual_network(account, &NewVirtualNetwork::new(name).with_comment(comment))
        .await
        .map_err(|e| error(e.to_string()))?;
    Ok(made.id)
}

/// Deletes an owned network at Cloudflare: only with this installation's marker; gone is done.
async fn delete(ctx: &Context, network: &VirtualNetwork) -> Result<(), String> {
    let Some(id) = network.status.as_ref().and_then(|s| s.id.clone()) else {
        return Ok(());
    };
    let cf = client(ctx, network, Priority::Urgent).await?;
    let account = &network.spec.cloudflare.account_id;
    let found = cf
        .list_virtual_networks(
            account,
            &VirtualNetworkFilter {
                id: Some(id.clone()),
                ..VirtualNetworkFilter::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let Some(live) = found.first() else {
        return Ok(());
    };
    if ownership(&live.comment, &ctx.cluster) != Ownership::Ours(owner(network).digest()) {
        tracing::info!(network = %network.name_any(), %id, "the virtual network is not marked as this cftunnel's; left at Cloudflare");
        return Ok(());
    }
    match cf.delete_virtual_network(account, &id).await {
        Ok(()) => Ok(()),
        Err(e) if e.status() == Some(404) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

fn programmed(network: &VirtualNetwork, ok: bool, reason: &str, message: String) -> Condition {
    let status = if ok { "True" } else { "False" };
    let before = network
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_PROGRAMMED));
    Condition {
        type_: CONDITION_PROGRAMMED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: network.metadata.generation,
        last_transition_time: match before {
            Some(b) if b.status == status => b.last_transition_time.clone(),
            _ => Time(jiff::Timestamp::now()),
        },
    }
}

async fn write_id(ctx: &Context, network: &VirtualNetwork, id: &str) -> bool {
    let status = VirtualNetworkStatus {
        id: Some(id.to_string()),
        conditions: Some(vec![programmed(
            network,
            true,
            "Programmed",
            format!("virtual network {id} at Cloudflare"),
        )]),
    };
    patch_status(ctx, network, status).await
}

async fn write(
    ctx: &Context,
    network: &VirtualNetwork,
    ok: bool,
    reason: &str,
    message: String,
) -> bool {
    let status = VirtualNetworkStatus {
        id: network.status.as_ref().and_then(|s| s.id.clone()),
        conditions: Some(vec![programmed(network, ok, reason, message)]),
    };
    if network.status.as_ref() == Some(&status) {
        return true;
    }
    patch_status(ctx, network, status).await
}

/// A merge patch of the status, with the object's resourceVersion; false when it failed (the
/// next pass, soon, writes it again).
async fn patch_status(
    ctx: &Context,
    network: &VirtualNetwork,
    status: VirtualNetworkStatus,
) -> bool {
    let api: Api<VirtualNetwork> = Api::all(ctx.client.clone());
    let patch = json!({
        "metadata": {"resourceVersion": network.resource_version()},
        "status": status,
    });
    match api
        .patch_status(
            &network.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => true,
        Err(error) => {
            tracing::debug!(network = %network.name_any(), %error, "VirtualNetwork status not written; the next pass writes it");
            false
        }
    }
}

/// A finalizer patch: the object as it left it, `None` when it failed.
async fn send(
    ctx: &Context,
    network: &VirtualNetwork,
    patch: json_patch::Patch,
) -> Option<VirtualNetwork> {
    let api: Api<VirtualNetwork> = Api::all(ctx.client.clone());
    match api
        .patch(
            &network.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(updated) => Some(updated),
        Err(error) => {
            tracing::debug!(network = %network.name_any(), %error, "VirtualNetwork finalizer not changed; the next pass tries again");
            None
        }
    }
}
