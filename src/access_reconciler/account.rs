//! The Access calls of one policy in one Cloudflare account: the team from its organization,
//! the policy's reusable policies, and one self-hosted application per hostname. What is not
//! cftunnel's (by the exact names of `cftunnel_policy::access::names`) is never changed or
//! deleted.
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::context::AccessContext;
use super::status::{
    Outcome, REASON_APPLICATION_CONFLICT, REASON_NO_ORGANIZATION, REASON_POLICY_NOT_FOUND, Recorded,
};
use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use crate::term::credentials::read_api_secret;
use cftunnel_cloudflare::{AccessApp, CloudflareClient, CloudflareError, Credentials, Priority};
use cftunnel_policy::access::desired::{
    SERVICE_TOKENS_SUFFIX, app_matches, application, policy_matches, reusable_policies,
};
use cftunnel_policy::access::{AppOwner, Guarded, PolicyKey, app_name, app_owner, policy_name};
use cftunnel_types::access_policy::{AccessPolicySpec, ProtectedHostname};

/// How long an account's team is remembered; an account without one is asked again sooner.
const TEAM_TTL: Duration = Duration::from_secs(600);
const NO_TEAM_TTL: Duration = Duration::from_secs(30);

/// The Zero Trust team of each account, as last read.
#[derive(Default)]
pub(crate) struct Organizations(HashMap<String, (Option<String>, Instant)>);

impl Organizations {
    async fn team(
        &mut self,
        cf: &CloudflareClient,
        account: &str,
    ) -> Result<Option<String>, CloudflareError> {
        if let Some((team, at)) = self.0.get(account) {
            let ttl = if team.is_some() {
                TEAM_TTL
            } else {
                NO_TEAM_TTL
            };
            if at.elapsed() < ttl {
                return Ok(team.clone());
            }
        }
        let team = cf
            .access_organization(account)
            .await?
            .and_then(|org| org.team().map(str::to_string));
        self.0
            .insert(account.to_string(), (team.clone(), Instant::now()));
        Ok(team)
    }
}

/// The start of the reason [`credentials_for`] gives when no tunnel of the account is left:
/// nothing cftunnel runs can reach the account any more (every other failure is retried).
pub(crate) const NO_TUNNEL_OF_ACCOUNT: &str = "no tunnel of Cloudflare account";

/// The API credentials of a tunnel of `account` (a live one first). `Err` says why not: no
/// tunnel of the account (starting with [`NO_TUNNEL_OF_ACCOUNT`]), or the API Secret of each
/// could not be read (a transient failure, or a Secret deleted under a tunnel): never taken as
/// "the account is out of reach".
pub(crate) async fn credentials_for(
    ctx: &Context,
    records: &[TunnelRecord],
    account: &str,
) -> Result<Credentials, String> {
    let mut candidates: Vec<&TunnelRecord> = records
        .iter()
        .filter(|r| r.status.account_id.as_deref() == Some(account))
        .collect();
    candidates.sort_by_key(|r| r.deleting);
    let mut errors: Vec<String> = Vec::new();
    for record in candidates {
        match read_api_secret(&ctx.client, &record.secret_namespace, &record.cloudflare).await {
            Ok(secret) => return Ok(secret.credentials),
            Err(error) => errors.push(format!("{}: {error}", record.identity)),
        }
    }
    if errors.is_empty() {
        return Err(format!(
            "{NO_TUNNEL_OF_ACCOUNT} {account} is left to take API credentials from"
        ));
    }
    Err(format!(
        "the API Secret of no tunnel of Cloudflare account {account} can be read ({})",
        errors.join("; ")
    ))
}

/// Everything `hosts` (hostnames of one account) need, and what became of each.
pub(crate) async fn program(
    ctx: &AccessContext,
    cf: &CloudflareClient,
    orgs: &mut Organizations,
    key: &PolicyKey,
    spec: &AccessPolicySpec,
    account: &str,
    hosts: &[(&String, &Guarded)],
) -> BTreeMap<String, Outcome> {
    let every = |outcome: Outcome| -> BTreeMap<String, Outcome> {
        hosts
            .iter()
            .map(|(h, _)| ((*h).clone(), outcome.clone()))
            .collect()
    };
    let failed = |what: &str, e: CloudflareError| {
        Outcome::Failed(format!("{what} in account {account}: {e}"))
    };
    let team = match orgs.team(cf, account).await {
        Ok(Some(team)) => team,
        Ok(None) => {
            return every(Outcome::Refused {
                reason: REASON_NO_ORGANIZATION,
                message: format!(
                    "Cloudflare account {account} has no Zero Trust organization, so no Access application can be made; set up Zero Trust (a team name) in the Cloudflare dashboard"
                ),
            });
        }
        Err(e) => return every(failed("reading the Zero Trust organization", e)),
    };
    let listed = match cf.list_access_policies(account).await {
        Ok(listed) => listed,
        Err(e) => return every(failed("listing the Access policies", e)),
    };
    let mut ids: Vec<String> = Vec::new();
    for wanted in reusable_policies(&policy_name(&ctx.cluster, key), spec) {
        let answer = match listed.iter().find(|p| p.name == wanted.name) {
            Some(live) if policy_matches(live, &wanted) => Ok(live.clone()),
            Some(live) => cf.update_access_policy(account, &live.id, &wanted).await,
            None => cf.create_access_policy(account, &wanted).await,
        };
        match answer {
            Ok(policy) => ids.push(policy.id),
            Err(e) => return every(failed("writing the Access policy", e)),
        }
    }
    for name in &spec.policies {
        if cftunnel_policy::rules::access_policy::is_cftunnel_policy_name(name) {
            // Admission refuses it; one stored around the webhook is refused here too.
            return every(Outcome::Refused {
                reason: REASON_POLICY_NOT_FOUND,
                message: format!(
                    "spec.policies names {name:?}, a reusable policy cftunnel keeps for an AccessPolicy; name one made in the dashboard"
                ),
            });
        }
        match listed.iter().find(|p| &p.name == name) {
            Some(policy) => ids.push(policy.id.clone()),
            None => {
                return every(Outcome::Refused {
                    reason: REASON_POLICY_NOT_FOUND,
                    message: format!(
                        "spec.policies names {name:?}, which Cloudflare account {account} has no reusable Access policy of; create it there or remove the name"
                    ),
                });
            }
        }
    }
    let apps = match cf.list_access_apps(account, None).await {
        Ok(apps) => apps,
        Err(e) => return every(failed("listing the Access applications", e)),
    };
    let mut out = BTreeMap::new();
    for (hostname, guarded) in hosts {
        let hostname = hostname.as_str();
        let open_on = guarded
            .tunnels
            .iter()
            .find(|t| !ctx.access.applied_protected(t, hostname));
        let outcome = if let Some(tunnel) = open_on {
            Outcome::Waiting(format!(
                "{hostname}: waiting for {tunnel} to close its rules before the application is made"
            ))
        } else {
            one_app(ctx, cf, key, spec, account, hostname, &ids, &apps, &team).await
        };
        out.insert(hostname.to_string(), outcome);
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn one_app(
    ctx: &Context,
    cf: &CloudflareClient,
    key: &PolicyKey,
    spec: &AccessPolicySpec,
    account: &str,
    hostname: &str,
    ids: &[String],
    apps: &[AccessApp],
    team: &str,
) -> Outcome {
    let covering: Vec<&AccessApp> = apps.iter().filter(|a| a.covers(hostname)).collect();
    let owner = |a: &AccessApp| app_owner(&a.name, &ctx.cluster, key, hostname);
    if let Some(other) = covering.iter().find(|a| owner(a) != AppOwner::Ours) {
        let whose = match owner(other) {
            AppOwner::OtherPolicy(policy) => format!("AccessPolicy {policy} of this cluster"),
            _ => "someone else (not this cftunnel)".to_string(),
        };
        return Outcome::Refused {
            reason: REASON_APPLICATION_CONFLICT,
            message: format!(
                "{hostname}: the Access application {:?} ({}) of {whose} already covers it and is left alone, so the route stays closed; delete that application or stop protecting {hostname} here",
                other.name, other.id
            ),
        };
    }
    let name = app_name(&ctx.cluster, key, hostname);
    let wanted = application(&name, hostname, ids, spec);
    let answer = match covering.first() {
        Some(live) if app_matches(live, &wanted) => Ok((*live).clone()),
        Some(live) => cf.update_access_app(account, &live.id, &wanted).await,
        None => cf.create_access_app(account, &wanted).await,
    };
    match answer {
        Ok(app) if !app.aud.is_empty() => Outcome::Protected(ProtectedHostname {
            hostname: hostname.to_string(),
            application_id: app.id,
            aud: app.aud,
            team: team.to_string(),
            account_id: account.to_string(),
        }),
        Ok(app) => Outcome::Failed(format!(
            "{hostname}: Cloudflare answered the application {} without an audience tag",
            app.id
        )),
        Err(e) => Outcome::Failed(format!(
            "{hostname}: writing its Access application in account {account}: {e}"
        )),
    }
}

/// Deletes the application `recorded` names, if it is still cftunnel's; `Ok` once gone.
pub(crate) async fn retire(
    ctx: &Context,
    records: &[TunnelRecord],
    key: &PolicyKey,
    recorded: &Recorded,
) -> Result<(), String> {
    let h = &recorded.hostname;
    let credentials = credentials_for(ctx, records, &h.account_id)
        .await
        .map_err(|why| {
            format!(
                "{why}, so its Access application {} for {} cannot be deleted yet",
                h.application_id, h.hostname
            )
        })?;
    let cf = ctx
        .cloudflare
        .client_at(credentials, Priority::Urgent)
        .map_err(|e| e.to_string())?;
    let app = match cf.get_access_app(&h.account_id, &h.application_id).await {
        Ok(app) => app,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(format!("reading application {}: {e}", h.application_id)),
    };
    if app_owner(&app.name, &ctx.cluster, key, &h.hostname) != AppOwner::Ours {
        // Renamed or replaced by someone: no longer cftunnel's to delete.
        return Ok(());
    }
    match cf.delete_access_app(&h.account_id, &h.application_id).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(format!("deleting application {}: {e}", h.application_id)),
    }
}

/// Deletes the reusable policies of `key` in `account`.
pub(crate) async fn delete_policies(
    ctx: &Context,
    credentials: Credentials,
    account: &str,
    key: &PolicyKey,
) -> Result<(), String> {
    let cf = ctx
        .cloudflare
        .client_at(credentials, Priority::Urgent)
        .map_err(|e| e.to_string())?;
    let base = policy_name(&ctx.cluster, key);
    let names = [base.clone(), format!("{base}{SERVICE_TOKENS_SUFFIX}")];
    let listed = cf
        .list_access_policies(account)
        .await
        .map_err(|e| format!("listing the Access policies of account {account}: {e}"))?;
    for policy in listed.iter().filter(|p| names.contains(&p.name)) {
        match cf.delete_access_policy(account, &policy.id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(format!("deleting Access policy {}: {e}", policy.id)),
        }
    }
    Ok(())
}
