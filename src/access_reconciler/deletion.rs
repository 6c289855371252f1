//! A deleted AccessPolicy: the user's word to make its routes public again. The guard leaves
//! it out at once, so its tunnels render their rules without `access`; once none checks an
//! application's AUD any more, its applications and reusable policies are deleted and the
//! finalizer goes.
use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::account;
use super::context::AccessContext;
use super::status::{self, Recorded};
use super::{AccessError, Next, STEP_WAIT, World};
use crate::term::ReconcileError;
use crate::term::finalizer::remove_patch;
use cftunnel_policy::access::PolicyKey;
use cftunnel_types::access_policy::{AccessPolicy, AccessPolicyStatus};
use cftunnel_types::names::FINALIZER;

pub(crate) async fn finish(
    ctx: &AccessContext,
    policy: &Arc<AccessPolicy>,
    world: &World<'_>,
) -> Result<(Next, Option<AccessPolicyStatus>), AccessError> {
    let key = PolicyKey::of(policy);
    if !policy.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok((Next::Settled, None));
    }
    let recorded: Vec<Recorded> = status::recorded_with_targets(policy);
    if recorded
        .iter()
        .any(|r| ctx.access.carries(&r.hostname.aud, world.live))
    {
        // Rules still check these applications: they open first.
        return Ok((Next::After(STEP_WAIT), None));
    }
    let mut problems: Vec<String> = Vec::new();
    for r in &recorded {
        if let Err(message) = account::retire(ctx, world.records, &key, r).await {
            problems.push(message);
        }
    }
    let mut accounts: BTreeSet<String> = recorded
        .iter()
        .map(|r| r.hostname.account_id.clone())
        .collect();
    accounts.extend(
        world
            .records
            .iter()
            .filter_map(|r| r.status.account_id.clone()),
    );
    for account in accounts.iter().filter(|a| !a.is_empty()) {
        let credentials = match account::credentials_for(ctx, world.records, account).await {
            Ok(credentials) => credentials,
            // An account no tunnel reaches: its reusable policies are left, and said so when
            // this policy had applications there.
            Err(why) if why.starts_with(account::NO_TUNNEL_OF_ACCOUNT) => {
                if recorded.iter().any(|r| &r.hostname.account_id == account) {
                    problems.push(format!(
                        "{why}, so the reusable Access policies of {key} there are left"
                    ));
                }
                continue;
            }
            Err(why) => {
                problems.push(why);
                continue;
            }
        };
        if let Err(message) = account::delete_policies(ctx, credentials, account, &key).await {
            problems.push(message);
        }
    }
    let unreachable = problems
        .iter()
        .all(|p| p.starts_with(account::NO_TUNNEL_OF_ACCOUNT));
    if !problems.is_empty() && !unreachable {
        return Err(AccessError::Cleanup(problems.join("; ")));
    }
    if !problems.is_empty() {
        // Nothing here can reach those accounts any more: say what is left, and let go.
        tracing::warn!(policy = %key, left = %problems.join("; "), "AccessPolicy deleted with applications left on Cloudflare");
        let event = kube::runtime::events::Event {
            type_: kube::runtime::events::EventType::Warning,
            reason: "CleanupIncomplete".into(),
            note: Some(crate::term::events::bounded(format!(
                "deleted with Access applications left on Cloudflare; delete them in the dashboard: {}",
                problems.join("; ")
            ))),
            action: "DeleteApplications".into(),
            secondary: None,
        };
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("networking.cfargotunnel.com/v1alpha2".into()),
            kind: Some("AccessPolicy".into()),
            namespace: policy.namespace(),
            name: Some(policy.name_any()),
            uid: policy.uid(),
            ..Default::default()
        };
        if let Err(error) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "event not recorded");
        }
    }
    if let Some(patch) = remove_patch(policy.finalizers(), FINALIZER) {
        let api: Api<AccessPolicy> =
            Api::namespaced(ctx.client.clone(), &policy.namespace().unwrap_or_default());
        match api
            .patch(
                &policy.name_any(),
                &PatchParams::default(),
                &Patch::<()>::Json(patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return Err(ReconcileError::kube("removing the AccessPolicy finalizer", e).into());
            }
        }
    }
    tracing::info!(policy = %key, "AccessPolicy deleted: its routes are public, its applications gone");
    Ok((Next::Settled, None))
}
