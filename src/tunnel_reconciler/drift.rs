//! Drift (docs/design.md §3.1 step 8): on a slow jittered interval, the tunnel in status must still exist on
//! Cloudflare. A deleted newTunnel is recreated (its old id kept for DNS re-pointing); an
//! existingTunnel named by its name follows the name (the tunnel that holds it now, e.g. after
//! `cloudflared tunnel delete` and `create`, runs next, its records re-pointed); one named by
//! id is reported, never recreated. Between checks no Cloudflare call is made, and the checks
//! of a credential share one walk of the account's tunnels (`term::tunnel_lists`, kept by `term::cloudflare`).
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::context::TunnelContext;
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::conditions::{ReadyReason, find_ready};
use crate::term::events;
use cftunnel_cloudflare::CloudflareClient;
use cftunnel_types::{TunnelSpec, TunnelStatus};

/// Longest a drift check waits for its reads (they yield to every change at the pacer).
pub(crate) const DRIFT_READ_WAIT: Duration = Duration::from_secs(15);

/// Most ids kept in `status.previousTunnelIds` (the CRD bounds the list to this).
pub(crate) const MAX_PREVIOUS_TUNNEL_IDS: usize = 10;

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

/// `previous` with `id` appended (newest last), without repeats, bounded to the newest ten.
pub(crate) fn push_previous(previous: Option<&Vec<String>>, id: &str) -> Vec<String> {
    let mut ids: Vec<String> = previous
        .into_iter()
        .flatten()
        .filter(|p| p.as_str() != id)
        .cloned()
        .collect();
    ids.push(id.to_string());
    let excess = ids.len().saturating_sub(MAX_PREVIOUS_TUNNEL_IDS);
    ids.drain(..excess);
    ids
}

/// Does the existingTunnel spec still name the tunnel recorded in status?
fn existing_targets_status(spec: &TunnelSpec, status: &TunnelStatus, id: &str) -> bool {
    let Some(existing) = &spec.existing_tunnel else {
        return false;
    };
    match non_empty(existing.id.as_ref()) {
        Some(wanted) => wanted == id,
        None => {
            non_empty(existing.name.as_ref()).is_some()
                && non_empty(existing.name.as_ref()) == non_empty(status.tunnel_name.as_ref())
        }
    }
}

/// Checks the tunnel when a check is due; on a recreate, `obj`'s status is updated in place so
/// the rest of the reconcile creates a new tunnel. `true` when a check ran (the configuration
/// of a remotely-managed tunnel is then checked too).
pub async fn check<K: TunnelKindAdapter>(
    obj: &mut K,
    ctx: &TunnelContext,
    cf: &CloudflareClient,
    credential: &str,
    spec: &TunnelSpec,
) -> Result<bool, ReconcileError> {
    let uid = obj.uid().unwrap_or_default();
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let (Some(id), Some(account_id)) = (
        non_empty(status.tunnel_id.as_ref()),
        non_empty(status.account_id.as_ref()),
    ) else {
        return Ok(false);
    };
    let ready = find_ready(status.conditions.as_ref());
    let is_ready = ready.is_some_and(|c| c.status == "True");
    let reported_deleted = ready.is_some_and(|c| c.reason == ReadyReason::TunnelDeleted.as_str());
    let targets = spec.new_tunnel.is_some() || existing_targets_status(spec, &status, id);
    let due = targets && ((is_ready && ctx.drift_due(&uid)) || reported_deleted);
    if !due {
        return Ok(false);
    }
    // A check finds nothing most of the time, and its calls go only when no change waits: while
    // changes of this credential wait at the pacer (a first sync) the check is put off rather
    // than holding this reconcile, and a route change or deletion of this object behind it,
    // until the backlog is gone. A tunnel reported deleted is looked at whatever waits.
    let waits_for_changes = cf.limiter().changes_waiting();
    if waits_for_changes && !reported_deleted {
        ctx.drift_put_off(&uid);
        return Ok(false);
    }
    let look_up = async {
        // One walk of the account's tunnels answers "present" for every check of a quarter of
        // the interval; a tunnel it does not list is looked up on its own (it may be newer).
        let max_age = (ctx.options.drift_interval / 4).max(Duration::from_secs(1));
        let listed = ctx
            .cloudflare
            .tunnel_lists
            .live(cf, credential, account_id, max_age)
            .await
            .is_ok_and(|live| live.contains_key(id));
        if listed {
            return Ok(false);
        }
        match cf.get_tunnel(account_id, id).await {
            Ok(tunnel) => Ok(tunnel.is_deleted()),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(ReconcileError::cloudflare(
                "checking the tunnel for drift",
                e,
            )),
        }
    };
    let gone = if reported_deleted {
        look_up.await?
    } else {
        match tokio::time::timeout(DRIFT_READ_WAIT, look_up).await {
            Ok(gone) => gone?,
            // Changes came first after all (a backlog formed meanwhile): another time.
            Err(_) => {
                ctx.drift_put_off(&uid);
                return Ok(false);
            }
        }
    };
    ctx.drift_checked(&uid);
    if !gone {
        return Ok(true);
    }
    let object = obj.display();
    let by_name = spec
        .existing_tunnel
        .as_ref()
        .is_some_and(|e| non_empty(e.id.as_ref()).is_none());
    if spec.new_tunnel.is_none() && !by_name {
        return Err(ReconcileError::blocked(
            ReadyReason::TunnelDeleted,
            format!(
                "tunnel {id} was deleted on Cloudflare; an existing tunnel is never recreated: point spec.existingTunnel at a live tunnel"
            ),
        ));
    }
    let note = if by_name {
        // The name is what the object asks for: whichever tunnel holds it now is the one to run.
        tracing::warn!(object = %object, tunnel_id = id, "existing tunnel deleted on Cloudflare; resolving its name again");
        format!(
            "tunnel {id} was deleted on Cloudflare; running the tunnel that holds its name now, if any"
        )
    } else {
        tracing::warn!(object = %object, tunnel_id = id, "tunnel deleted on Cloudflare; recreating it");
        format!("tunnel {id} was deleted on Cloudflare outside cftunnel; creating a new tunnel")
    };
    events::warning(ctx, &*obj, ReadyReason::TunnelDeleted.as_str(), note).await;
    let previous = push_previous(status.previous_tunnel_ids.as_ref(), id);
    obj.object_api(&ctx.client)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "tunnelId": null,
                "previousTunnelIds": previous,
            }})),
        )
        .await
        .map_err(|e| ReconcileError::kube("recording the deleted tunnel id", e))?;
    let local = obj
        .tunnel_status_mut()
        .get_or_insert_with(TunnelStatus::default);
    local.tunnel_id = None;
    local.previous_tunnel_ids = Some(previous);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_ids_are_newest_last_unique_and_bounded() {
        assert_eq!(push_previous(None, "a"), vec!["a".to_string()]);
        let ids: Vec<String> = (0..10).map(|i| format!("id{i}")).collect();
        let next = push_previous(Some(&ids), "new");
        assert_eq!(next.len(), MAX_PREVIOUS_TUNNEL_IDS);
        assert_eq!(next.first().map(String::as_str), Some("id1"));
        assert_eq!(next.last().map(String::as_str), Some("new"));
        let again = push_previous(Some(&vec!["x".into(), "y".into()]), "x");
        assert_eq!(again, vec!["y".to_string(), "x".to_string()]);
    }
}
