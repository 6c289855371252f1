//! A deleted tunnel waits for the AccessPolicies being deleted beside it (docs/design.md §3.7).
//!
//! An AccessPolicy deletes its Access applications with the API credentials of a tunnel of
//! their account. When a namespace holding the account's last tunnel, its API Secret, routes
//! and a policy is deleted, everything goes at once: a tunnel that finished first would take
//! its record (where the policy finds the credentials) and release its API Secret's guard, and
//! the applications would be left at Cloudflare. So the tunnel's finalizer stays until every
//! AccessPolicy of its namespace that records an application in the tunnel's account and is
//! being deleted (or whose namespace is: the namespace controller deletes kinds in its own
//! order, a Tunnel often before an AccessPolicy) has finished. The policy never waits for a
//! tunnel being deleted, so the two cannot wait for each other.
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::term::{Context, ReconcileError, TunnelKindAdapter};
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::names::FINALIZER;

/// The AccessPolicies `obj`'s deletion waits for, as `namespace/name` (empty: none).
pub(crate) async fn policies_cleaning_up<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
) -> Result<Vec<String>, ReconcileError> {
    let Some(account) = obj
        .tunnel_status()
        .and_then(|s| s.account_id.clone())
        .filter(|a| !a.is_empty())
    else {
        return Ok(Vec::new());
    };
    let namespace = obj.managed_namespace(&ctx.options);
    // Namespaces are listed, not read: cftunnel's RBAC reads one namespace by name only
    // (kube-system, for the cluster's identity).
    let terminating = Api::<k8s_openapi::api::core::v1::Namespace>::all(ctx.client.clone())
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={namespace}")))
        .await
        .map_err(|e| ReconcileError::kube("reading the tunnel's namespace", e))?
        .items
        .first()
        .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some());
    let api: Api<AccessPolicy> = Api::namespaced(ctx.client.clone(), &namespace);
    let policies = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // No such kind: no policy can hold an application.
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
        // Policies it may not read cannot be waited for; the deletion goes on (the Ready of
        // its tunnels says AccessPolicies are unknown already).
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(object = %obj.display(), error = %e.message, "AccessPolicies cannot be listed: the deletion does not wait for their applications");
            return Ok(Vec::new());
        }
        Err(e) => return Err(ReconcileError::kube("listing AccessPolicies", e)),
    };
    Ok(policies
        .iter()
        .filter(|p| waits_for(p, &account, terminating))
        .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
        .collect())
}

/// Is `policy` being deleted (or its namespace, `terminating`) and still holding cftunnel's
/// finalizer, with an application in `account` or no record of any (its reusable policies,
/// which it deletes last, are in the account of its applications, and a status without
/// applications no longer says which)?
fn waits_for(policy: &AccessPolicy, account: &str, terminating: bool) -> bool {
    let recorded: Vec<&str> = policy
        .status
        .iter()
        .flat_map(|s| {
            s.targets
                .iter()
                .flatten()
                .flat_map(|t| &t.hostnames)
                .chain(s.retiring.iter().flatten())
        })
        .map(|h| h.account_id.as_str())
        .collect();
    (terminating || policy.metadata.deletion_timestamp.is_some())
        && policy.finalizers().iter().any(|f| f == FINALIZER)
        && (recorded.is_empty() || recorded.iter().any(|a| a.eq_ignore_ascii_case(account)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn policy(deleting: bool, finalizer: bool, account: &str, retiring: bool) -> AccessPolicy {
        let app = serde_json::json!({"hostname": "a.example.com", "applicationId": "app",
            "aud": "aud", "team": "acme", "accountId": account});
        let status = if retiring {
            serde_json::json!({"retiring": [app]})
        } else {
            serde_json::json!({"targets": [{"group": "", "kind": "Service", "name": "web", "hostnames": [app]}]})
        };
        let mut p: AccessPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "AccessPolicy",
            "metadata": {"name": "staff", "namespace": "shop"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                     "allow": {"emails": ["a@example.com"]}},
            "status": status,
        }))
        .expect("policy");
        if deleting {
            p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        }
        if finalizer {
            p.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
        }
        p
    }

    #[test]
    fn a_policy_being_deleted_or_in_a_namespace_being_deleted_with_an_application_is_waited_for() {
        let waits = |deleting, finalizer, account, retiring, terminating| {
            waits_for(
                &policy(deleting, finalizer, account, retiring),
                "acct",
                terminating,
            )
        };
        assert!(waits(true, true, "ACCT", false, false));
        assert!(waits(true, true, "acct", true, false), "retiring");
        assert!(!waits(false, true, "acct", false, false), "live");
        assert!(
            waits(false, true, "acct", false, true),
            "live in a namespace being deleted: it goes soon"
        );
        assert!(!waits(true, false, "acct", false, true), "done");
        assert!(!waits(true, true, "other", false, true), "another account");
        let mut cleared = policy(true, true, "acct", false);
        cleared.status = None;
        assert!(
            waits_for(&cleared, "acct", false),
            "applications gone, its reusable policies still to delete"
        );
    }
}
