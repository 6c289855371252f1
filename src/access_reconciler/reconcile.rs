//! One reconcile of a live AccessPolicy: finalizer, the applications of the hostnames it
//! protects (account by account), the deletion of those it no longer protects, its status.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::account::{self, Organizations};
use super::context::AccessContext;
use super::status::{self, Outcome, Recorded};
use super::{AccessError, Next, STEP_WAIT, World, deletion, record_of};
use crate::dns_sync::TunnelRecord;
use crate::term::ReconcileError;
use crate::term::finalizer::add_patch;
use cftunnel_cloudflare::{Priority, Work};
use cftunnel_policy::access::{Guarded, PolicyKey, TargetKey};
use cftunnel_policy::routes::ANY_HOST;
use cftunnel_types::TunnelIdentity;
use cftunnel_types::access_policy::{AccessPolicy, AccessPolicyStatus};
use cftunnel_types::names::FINALIZER;

/// Why a catch-all part of a target (an Ingress `defaultBackend`, a rule with no host) is not
/// protected.
const CATCH_ALL_MESSAGE: &str = "a rule for every host (an Ingress defaultBackend or a rule without a host) cannot be put behind an Access application, which covers one hostname: it stays closed; give the rule a hostname to protect it";

/// Reconciles `policy`; returns what comes next and the status it wrote, if any.
pub(crate) async fn reconcile(
    ctx: &AccessContext,
    policy: &Arc<AccessPolicy>,
    world: &World<'_>,
    orgs: &mut Organizations,
) -> Result<(Next, Option<AccessPolicyStatus>), AccessError> {
    if policy.metadata.deletion_timestamp.is_some() {
        return deletion::finish(ctx, policy, world).await;
    }
    let key = PolicyKey::of(policy);
    let api: Api<AccessPolicy> =
        Api::namespaced(ctx.client.clone(), &policy.namespace().unwrap_or_default());
    if let Some(patch) = add_patch(policy.finalizers(), FINALIZER) {
        // Before any application exists: its deletion must find and remove them.
        api.patch(
            &policy.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| ReconcileError::kube("adding the AccessPolicy finalizer", e))?;
    }
    // A protected hostname stays out of DNS until its application exists: programming it is
    // what a user waits for, in the interactive lane, one piece of work per pass.
    let work = Work::starting();
    // The guard may come from a table computed before the policy's last edit: only targets
    // it names now are protected (a target just removed is retired, never made again).
    let named: BTreeSet<TargetKey> = policy.spec.target_refs.iter().map(TargetKey::of).collect();
    let guarded = || {
        world
            .guard
            .of_policy(&key)
            .filter(|(_, g)| named.contains(&g.target))
    };
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut by_account: BTreeMap<String, Vec<(&String, &Guarded)>> = BTreeMap::new();
    for (hostname, guarded) in guarded() {
        if hostname == ANY_HOST {
            // No application covers every host: refused here, with no Cloudflare call (the
            // guard keeps its rules closed).
            outcomes.insert(
                hostname.clone(),
                Outcome::Refused {
                    reason: status::REASON_CATCH_ALL,
                    message: CATCH_ALL_MESSAGE.to_string(),
                },
            );
            continue;
        }
        match account_of(world.records, hostname, guarded) {
            Ok(account) => by_account
                .entry(account)
                .or_default()
                .push((hostname, guarded)),
            Err(outcome) => {
                outcomes.insert(hostname.clone(), outcome);
            }
        }
    }
    for (account, hosts) in &by_account {
        let credentials = match account::credentials_for(ctx, world.records, account).await {
            Ok(credentials) => credentials,
            Err(why) => {
                for (hostname, _) in hosts {
                    outcomes.insert(
                        (*hostname).clone(),
                        Outcome::Waiting(format!("{hostname}: {why}")),
                    );
                }
                continue;
            }
        };
        let cf = ctx
            .cloudflare
            .client_at(credentials, Priority::Interactive)
            .map_err(|e| ReconcileError::cloudflare("building the Cloudflare client", e))?
            .for_work(work);
        let done = account::program(ctx, &cf, orgs, &key, &policy.spec, account, hosts).await;
        outcomes.extend(done);
    }
    // Applications of hostnames this policy no longer protects: deleted once no tunnel
    // checks their AUD (their routes render public first, or are gone).
    let protected: BTreeSet<&String> = guarded().map(|(h, _)| h).collect();
    let mut retiring: Vec<Recorded> = Vec::new();
    let mut waiting = false;
    let mut failed = false;
    for recorded in status::recorded_with_targets(policy) {
        let name = recorded.hostname.hostname.to_ascii_lowercase();
        let outcome = outcomes.get(&name);
        if matches!(outcome, Some(Outcome::Protected(p)) if p.application_id == recorded.hostname.application_id)
        {
            // Recorded by this pass's outcome (a retiring one protected again included).
            continue;
        }
        let kept = !recorded.retiring
            && protected.contains(&name)
            && matches!(
                outcome,
                None | Some(Outcome::Waiting(_) | Outcome::Failed(_))
            );
        if kept {
            // Not confirmed this time, but made before: keep the record (and the rules open
            // behind it) rather than close a working route over one failed read.
            outcomes.insert(name, Outcome::Protected(recorded.hostname.clone()));
            continue;
        }
        // No longer protected, refused (its rules close: the status opens nothing with it),
        // or replaced by another application: deleted once no tunnel checks its AUD, and
        // listed in `status.retiring` until then.
        if ctx.access.carries(&recorded.hostname.aud, world.live) {
            waiting = true;
            retiring.push(recorded);
            continue;
        }
        if let Err(message) = account::retire(ctx, world.records, &key, &recorded).await {
            tracing::warn!(policy = %key, hostname = %recorded.hostname.hostname, %message, "Access application not deleted yet");
            failed = true;
            retiring.push(recorded);
        }
    }
    // A conflict is told on the target too, once per new message.
    let told: BTreeSet<String> = policy
        .status
        .as_ref()
        .and_then(|s| s.targets.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| t.message.clone())
        .collect();
    for (hostname, guarded) in guarded() {
        if let Some(Outcome::Refused { reason, message }) = outcomes.get(hostname)
            && *reason == status::REASON_APPLICATION_CONFLICT
            && !told.contains(message)
        {
            super::events::warn_target(ctx, &key, &guarded.target, reason, message.clone()).await;
        }
    }
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
    let next_status = status::build(policy, world.guard, &outcomes, &retiring, now);
    // Handed to the status writer: the records it holds open their hostnames once written.
    let written = ctx.statuses.hand_in(policy, next_status);
    waiting |= outcomes.values().any(|o| matches!(o, Outcome::Waiting(_)));
    failed |= outcomes.values().any(|o| matches!(o, Outcome::Failed(_)));
    let next = if failed {
        Next::After(ctx.next_backoff(&format!("AccessPolicy {key} calls")))
    } else {
        ctx.reset_backoff(&format!("AccessPolicy {key} calls"));
        if waiting {
            Next::After(STEP_WAIT)
        } else {
            Next::Settled
        }
    };
    Ok((next, written))
}

/// The Cloudflare account of the application of `hostname`: the one every tunnel serving it
/// records in its status. A tunnel without one yet makes the hostname wait; tunnels of two
/// accounts refuse it (an application lives in one account and covers its hostname there only).
fn account_of(
    records: &[TunnelRecord],
    hostname: &str,
    guarded: &Guarded,
) -> Result<String, Outcome> {
    let mut accounts: BTreeMap<String, &TunnelIdentity> = BTreeMap::new();
    for tunnel in &guarded.tunnels {
        let account = record_of(records, tunnel)
            .and_then(|r| r.status.account_id.as_deref())
            .filter(|a| !a.is_empty())
            .map(str::to_string);
        match account {
            Some(account) => {
                accounts.entry(account).or_insert(tunnel);
            }
            None => {
                return Err(Outcome::Waiting(format!(
                    "{hostname}: {tunnel} has no Cloudflare account in its status yet"
                )));
            }
        }
    }
    let mut accounts = accounts.into_iter();
    match (accounts.next(), accounts.next()) {
        (Some((account, _)), None) => Ok(account),
        (Some((first, a)), Some((second, b))) => Err(Outcome::Refused {
            reason: status::REASON_ACCOUNTS_DIFFER,
            message: format!(
                "{hostname} is served by {a} (Cloudflare account {first}) and {b} (account {second}): an Access application protects a hostname in one account only; serve it through tunnels of one account"
            ),
        }),
        (None, _) => Err(Outcome::Waiting(format!(
            "{hostname}: no tunnel serves it yet"
        ))),
    }
}
