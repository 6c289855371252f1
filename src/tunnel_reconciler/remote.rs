//! Remotely-managed tunnels (`configSource: Cloudflare`): the rendered ingress is pushed to the
//! tunnel's configuration on Cloudflare, which cloudflared applies live, without a restart.
//!
//! One PUT per effective change: the digest of what was last pushed (with the tunnel id it went
//! to) is kept in `status.configHash` and its version in `status.configVersion`, so an
//! unchanged render pushes nothing and asks Cloudflare nothing. At the drift interval the
//! configuration is read back; one whose parts cftunnel writes (`ingress`, `originRequest`)
//! changed elsewhere is put back, with an Event naming what differed. Fields cftunnel does not
//! write are kept on every PUT and never compared.
//!
//! The push comes before anything is applied to the cluster: a tunnel switched from Local to
//! Cloudflare keeps its Local workload serving until Cloudflare holds its rules, so a refused
//! push (a token without Tunnel Edit, a 5xx) never leaves pods running with no ingress.
use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::context::TunnelContext;
use super::drift::DRIFT_READ_WAIT;
use super::render_input::is_remote;
use super::resolved::Resolved;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::context::Context;
use crate::term::options::copy_max_age;
use crate::term::{ReconcileError, events};
use cftunnel_cloudflare::{CloudflareClient, Priority};
use cftunnel_policy::render::remote_merge::{
    merged_for_put, owned_view, owned_warp, pushed_digest, rule_hostnames, withdrawn,
};
use cftunnel_types::TunnelSpec;
use cftunnel_types::TunnelStatus;

/// Are `obj`'s rules pushed to Cloudflare: a remotely-managed tunnel, or one that was. No call
/// turns a remotely-managed tunnel back into a local one, and the edge hands cloudflared the
/// pushed configuration, which overrides its config.yaml; so after a switch back to Local the
/// pushed copy is kept equal to config.yaml (`status.configVersion` says one was pushed).
pub(crate) fn pushes<K: TunnelKindAdapter>(obj: &K, spec: &TunnelSpec) -> bool {
    let pushed_before = obj
        .tunnel_status()
        .is_some_and(|s| s.config_version.is_some());
    is_remote(spec) || pushed_before
}

/// Pushes the tunnel's rules unless Cloudflare holds them already: as far as
/// `status.configHash` tells (the digest of what was pushed, tied to the tunnel id), or, when
/// `verify` (a drift check ran), as far as Cloudflare answers. `newest` renders the rules from
/// the newest route table each time it is called.
///
/// A push writes back a merge (`remote_merge`) onto the document Cloudflare holds: only the
/// rules of hostnames cftunnel owns — those it routes now and those it pushed before
/// (`status.configHostnames`) — are replaced; other clusters' and the dashboard's rules stay.
/// The document is read first, except for a tunnel this term created whose configuration it
/// saw within the drift interval (`term::created`, `options::copy_max_age`): a new tunnel's
/// empty one, or what its last push or drift check left there.
///
/// The PUT's rules are rendered when the pacer lets it go, not when it started waiting: routes
/// that arrived during a wait behind a backlog go in this push instead of one push each. A
/// tunnel deleted meanwhile makes no push (its token goes back to the pacer). The hostnames a
/// push adds are recorded in status before it is sent, so a crash between the two can never
/// leave a rule of cftunnel's that it would take for someone else's.
pub(crate) async fn ensure_pushed<K: TunnelKindAdapter>(
    obj: &mut K,
    ctx: &TunnelContext,
    cf: &CloudflareClient,
    resolved: &Resolved,
    verify: bool,
    newest: &mut (dyn FnMut() -> Result<Value, ReconcileError> + Send),
) -> Result<(), ReconcileError> {
    let account = &resolved.account_id;
    let tunnel = &resolved.tunnel_id;
    let mut config = newest()?;
    let mut digest = pushed_digest(tunnel, &config);
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let pushed =
        status.config_hash.as_deref() == Some(digest.as_str()) && status.config_version.is_some();
    if pushed && !verify {
        return Ok(());
    }
    let before: BTreeSet<String> = status.config_hostnames.iter().flatten().cloned().collect();
    let seen = if pushed {
        None
    } else {
        ctx.cloudflare
            .created
            .configuration(tunnel, copy_max_age(ctx.options.drift_interval))
    };
    // Never pushed to by anyone: a tunnel this term created and has not pushed to yet.
    let never_pushed = seen.as_ref().is_some_and(Value::is_null);
    let (theirs, held_version) = if let Some(seen) = seen {
        (seen, None)
    } else if pushed {
        // Only a drift check reads back a configuration pushed already: a background call,
        // put off when changes keep it waiting (see `drift::check`).
        let reading = cf.with_priority(Priority::Background);
        let read = reading.tunnel_configuration(account, tunnel);
        match tokio::time::timeout(DRIFT_READ_WAIT, read).await {
            Ok(held) => {
                let held = held.map_err(ReconcileError::push)?;
                let theirs = held.config.unwrap_or(Value::Null);
                ctx.cloudflare.created.seen(tunnel, &theirs);
                (theirs, Some(held.version))
            }
            Err(_) => {
                ctx.drift_put_off(&obj.uid().unwrap_or_default());
                return Ok(());
            }
        }
    } else {
        let held = cf
            .tunnel_configuration(account, tunnel)
            .await
            .map_err(ReconcileError::push)?;
        (held.config.unwrap_or(Value::Null), Some(held.version))
    };
    let owned: BTreeSet<String> = rule_hostnames(&config).union(&before).cloned().collect();
    let held_ours = (owned_view(&theirs, &owned), owned_warp(&theirs, &config));
    let holds_ours = held_version.is_some()
        && held_ours == (owned_view(&config, &owned), owned_warp(&config, &config));
    let version = match held_version {
        Some(version) if holds_ours => version,
        _ => {
            if pushed {
                let note = format!(
                    "the configuration of tunnel {tunnel} on Cloudflare (version {}) was changed outside cftunnel ({}); putting cftunnel's rules back (other rules are kept)",
                    held_version.unwrap_or_default(),
                    difference(&owned_view(&config, &owned), &owned_view(&theirs, &owned))
                );
                tracing::warn!(object = %obj.display(), tunnel = %tunnel, "tunnel configuration changed outside cftunnel; restoring it");
                events::warning(ctx, &*obj, "ConfigurationRestored", note).await;
            }
            if never_pushed {
                routes_or_no_backlog(cf, newest).await?;
            }
            // The turn first, the rules after: what arrived during the wait goes in this push.
            let (turn, _) = cf.take_turn().await;
            if ctx.claims.get().is_some_and(|c| c.deletion_started(&*obj)) {
                tracing::debug!(object = %obj.display(), "deleted while its push waited: nothing pushed");
                return Ok(());
            }
            config = newest()?;
            digest = pushed_digest(tunnel, &config);
            let ours = rule_hostnames(&config);
            let owned: BTreeSet<String> = ours.union(&before).cloned().collect();
            if !ours.is_subset(&before) {
                record(obj, ctx, json!({ "configHostnames": owned })).await?;
            }
            let merged = merged_for_put(&theirs, &config, &owned);
            let answer = turn
                .put_tunnel_configuration(account, tunnel, &merged)
                .await
                .map_err(ReconcileError::push)?;
            ctx.cloudflare.created.seen(tunnel, &merged);
            tracing::info!(object = %obj.display(), tunnel = %tunnel, version = answer.version, "tunnel configuration pushed");
            answer.version
        }
    };
    let ours = rule_hostnames(&config);
    let recorded = pushed
        && status.config_version == Some(version)
        && status
            .config_hostnames
            .as_ref()
            .map(|h| h.iter().cloned().collect())
            == Some(ours.clone());
    if recorded {
        return Ok(());
    }
    record(
        obj,
        ctx,
        json!({
            "configVersion": version,
            "configHash": digest,
            "configHostnames": ours,
        }),
    )
    .await?;
    let local = obj
        .tunnel_status_mut()
        .get_or_insert_with(TunnelStatus::default);
    local.config_version = Some(version);
    local.config_hash = Some(digest);
    local.config_hostnames = Some(ours.into_iter().collect());
    Ok(())
}

/// How often a new tunnel's first push, waiting for its routes, looks at the route table.
const ROUTES_LOOK: Duration = Duration::from_secs(1);

/// Waits, before the first push of a tunnel this term created, until the tunnel has a route or
/// no change waits at the pacer. A first sync creates tunnels before their routes (a directory
/// applied in order; a thousand Gateways' HTTPRoutes created one by one) and a backlog serves
/// new work early: pushed as soon as its turn came, a tunnel's empty configuration was a push,
/// and its routes a second one. With nothing waiting, a tunnel with no route is pushed at once.
async fn routes_or_no_backlog(
    cf: &CloudflareClient,
    newest: &mut (dyn FnMut() -> Result<Value, ReconcileError> + Send),
) -> Result<(), ReconcileError> {
    while rule_hostnames(&newest()?).is_empty() && cf.limiter().changes_waiting() {
        tokio::time::sleep(ROUTES_LOOK).await;
    }
    Ok(())
}

/// Merge-patches `fields` into the object's status.
async fn record<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    fields: Value,
) -> Result<(), ReconcileError> {
    obj.object_api(&ctx.client)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": fields })),
        )
        .await
        .map_err(|e| ReconcileError::kube("recording the pushed configuration", e))?;
    Ok(())
}

/// Takes cftunnel's rules out of a remotely-managed tunnel's configuration that it does not
/// delete (an existingTunnel), keeping everyone else's and the catch-all there is; no call
/// when nothing of cftunnel's is there.
pub(crate) async fn withdraw<K: TunnelKindAdapter>(
    obj: &K,
    cf: &CloudflareClient,
    account: &str,
    tunnel: &str,
) -> Result<(), ReconcileError> {
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    // `configHostnames` is recorded before a push and `configVersion` after it: a reconcile
    // cut short between the two (by this very deletion, or a restart) pushed rules whose
    // version was never recorded. The hostnames alone say what may be cftunnel's there.
    let owned: BTreeSet<String> = status.config_hostnames.iter().flatten().cloned().collect();
    if owned.is_empty() {
        return Ok(());
    }
    let held = match cf.tunnel_configuration(account, tunnel).await {
        Ok(held) => held,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(ReconcileError::push(e)),
    };
    let theirs = held.config.unwrap_or(Value::Null);
    if rule_hostnames(&theirs).is_disjoint(&owned) {
        return Ok(());
    }
    let remaining = withdrawn(&theirs, &owned);
    cf.put_tunnel_configuration(account, tunnel, &remaining)
        .await
        .map_err(ReconcileError::push)?;
    tracing::info!(object = %obj.display(), tunnel = %tunnel, "cftunnel's rules taken out of the tunnel's configuration");
    Ok(())
}

/// The hostnames of an ingress document, `*` for the catch-all.
fn hostnames(config: &Value) -> BTreeSet<String> {
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rule| {
            let host = rule["hostname"].as_str().unwrap_or("*");
            match rule["path"].as_str() {
                Some(path) => format!("{host}{path}"),
                None => host.to_string(),
            }
        })
        .collect()
}

/// What differs between ours and theirs, in words: rules added and removed, else "rules changed".
fn difference(ours: &Value, theirs: &Value) -> String {
    let (ours, theirs) = (hostnames(ours), hostnames(theirs));
    let added: Vec<&String> = theirs.difference(&ours).collect();
    let removed: Vec<&String> = ours.difference(&theirs).collect();
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!("rules added for {added:?}"));
    }
    if !removed.is_empty() {
        parts.push(format!("rules removed for {removed:?}"));
    }
    if parts.is_empty() {
        "the rules' settings changed".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_names_rules_added_and_removed() {
        let ours = json!({"ingress": [{"hostname": "a.example.com", "service": "http://a"}, {"service": "http_status:404"}]});
        let theirs = json!({"ingress": [{"hostname": "x.example.com", "service": "http://x"}, {"service": "http_status:404"}]});
        assert_eq!(
            difference(&ours, &theirs),
            "rules added for [\"x.example.com\"], rules removed for [\"a.example.com\"]"
        );
        let tweaked = json!({"ingress": [{"hostname": "a.example.com", "service": "http://b"}, {"service": "http_status:404"}]});
        assert_eq!(difference(&ours, &tweaked), "the rules' settings changed");
    }
}
