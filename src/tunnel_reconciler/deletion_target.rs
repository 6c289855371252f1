//! What a deletion cleans up on Cloudflare: the tunnel (even when `status.tunnelId` was never
//! written or was cleared), the ids it had before, and the zones its records live in (its own,
//! those of `status.previousZones`, and those of the hostnames `status.routes` lists).
//!
//! Without an id in status the tunnel is found through the managed Secret, which cftunnel
//! controls: its credentials.json names the tunnel, or, when only the pending `tunnelSecret`
//! was stored (the create's answer or the status write was lost), the live tunnel named
//! `spec.newTunnel.name` is ours only if its token carries the same secret bytes.
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::apply::controlled_by;
use super::setup;
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::context::Context;
use crate::term::credentials::{self, Stored};
use cftunnel_cloudflare::{CloudflareClient, TunnelToken};
use cftunnel_policy::dns::{AccountZone, place};
use cftunnel_policy::render::ObjectNames;
use cftunnel_types::{TunnelSpec, TunnelStatus};

/// The Cloudflare side of one deletion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub account_id: String,
    /// `None`: no tunnel of this object exists (only records of earlier ids may be left).
    pub tunnel_id: Option<String>,
    pub previous_tunnel_ids: Vec<String>,
    pub tunnel_name: String,
}

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

/// `None` when this object never got as far as storing a tunnel secret: nothing to clean up.
pub async fn find<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    cf: &CloudflareClient,
    spec: &TunnelSpec,
    status: &TunnelStatus,
) -> Result<Option<Target>, ReconcileError> {
    let previous = status.previous_tunnel_ids.clone().unwrap_or_default();
    let name = spec
        .new_tunnel
        .as_ref()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let tunnel_name = non_empty(status.tunnel_name.as_ref())
        .map(str::to_string)
        .unwrap_or_else(|| name.clone());
    if let Some(id) = non_empty(status.tunnel_id.as_ref()) {
        let account_id = setup::account_id(cf, spec, status).await?;
        return Ok(Some(Target {
            account_id,
            tunnel_id: Some(id.to_string()),
            previous_tunnel_ids: previous,
            tunnel_name,
        }));
    }
    let stored = managed_secret(obj, ctx).await?;
    if matches!(stored, Stored::Nothing) && previous.is_empty() {
        return Ok(None);
    }
    let account_id = setup::account_id(cf, spec, status).await?;
    let tunnel_id = match stored {
        Stored::Credentials(c) => Some(c.tunnel_id).filter(|id| !previous.contains(id)),
        Stored::Pending(secret) => ours_by_name(cf, &account_id, &name, &secret).await?,
        Stored::Nothing => None,
    };
    Ok(Some(Target {
        account_id,
        tunnel_id,
        previous_tunnel_ids: previous,
        tunnel_name,
    }))
}

/// The managed Secret's tunnel credentials, if cftunnel controls that Secret for this object.
pub(super) async fn managed_secret<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
) -> Result<Stored, ReconcileError> {
    let identity = obj.identity(&ctx.options);
    let names = ObjectNames::for_owner(&identity);
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &identity.namespace)
        .get_opt(&names.workload)
        .await
        .map_err(|e| ReconcileError::kube("reading the managed Secret", e))?
        .filter(|s| controlled_by(&s.metadata, &identity.uid));
    Ok(credentials::stored(secret.as_ref()))
}

/// The live tunnel named `name` whose token carries `secret`, if there is one.
async fn ours_by_name(
    cf: &CloudflareClient,
    account_id: &str,
    name: &str,
    secret: &[u8],
) -> Result<Option<String>, ReconcileError> {
    if name.is_empty() {
        return Ok(None);
    }
    let Some(tunnel) = cf
        .find_live_tunnel(account_id, name)
        .await
        .map_err(|e| ReconcileError::cloudflare("looking up the tunnel by name", e))?
    else {
        return Ok(None);
    };
    let token = match cf.tunnel_token(account_id, &tunnel.id).await {
        Ok(token) => token,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(ReconcileError::cloudflare("fetching the tunnel token", e)),
    };
    let ours = TunnelToken::decode(token.expose()).is_ok_and(|t| t.secret_matches(secret));
    Ok(ours.then_some(tunnel.id))
}

/// The tunnel's own zone as status records it. `None` when its zone was never resolved (a
/// typo in the domain, a token without Zone Read): no DNS record was ever written for it there,
/// since the DNS sync starts from `status.zoneId`, so its deletion has nothing to clean there
/// and must not wait for a zone that cannot be found.
pub fn zone(status: &TunnelStatus) -> Option<(String, String)> {
    let id = non_empty(status.zone_id.as_ref())?;
    let name = non_empty(status.zone_domain.as_ref())?;
    Some((id.to_string(), name.to_string()))
}

/// Zones other than `own_zone_id` that may hold the tunnel's records: every zone of
/// `status.previousZones` (a domain change whose old zone the DNS sync has not cleaned yet),
/// then the zones of the hostnames its `status.routes` last listed, placed as the DNS sync
/// places them (the account's zone list, kept per credential). The latter finds records in
/// other zones even when the DNS sync of this process never ran for the tunnel (a deletion
/// right after a restart); a zone list that cannot be had finds none (logged).
pub(crate) async fn other_zones(
    ctx: &Context,
    cf: &CloudflareClient,
    api_credentials: &cftunnel_cloudflare::Credentials,
    account_id: &str,
    status: &TunnelStatus,
    own_zone_id: &str,
) -> Vec<AccountZone> {
    let mut out: Vec<AccountZone> = status
        .previous_zones
        .iter()
        .flatten()
        .filter(|z| !z.zone_id.is_empty() && z.zone_id != own_zone_id)
        .map(|z| AccountZone::active(z.zone_id.clone(), z.zone_domain.clone()))
        .collect();
    let hostnames: BTreeSet<String> = status
        .routes
        .iter()
        .flatten()
        .map(|r| r.hostname.to_ascii_lowercase())
        .collect();
    if hostnames.is_empty() || account_id.is_empty() {
        return out;
    }
    let listed = ctx
        .cloudflare
        .zone_lists
        .get(api_credentials, account_id, false, || {
            crate::term::zones::list_account_zones(cf, account_id)
        })
        .await;
    let zones = match listed {
        Ok(zones) => zones,
        Err(error) => {
            tracing::warn!(%error, "listing the account's zones for the deletion failed; only the tunnel's own zone and those its DNS sync used are cleaned");
            return out;
        }
    };
    for host in &hostnames {
        if let Some(zone) = place(host, &zones)
            && zone.id != own_zone_id
            && !out.iter().any(|z| z.id == zone.id)
        {
            out.push(zone.clone());
        }
    }
    out
}
