//! AccessPolicy statuses: the Access reconciler computes each policy's status (the applications
//! it made, per target why a hostname is not protected, `Accepted` and `Programmed`) and hands it
//! here through [`AccessStatuses`]; the writer writes the newest one of each policy.
//!
//! A status written late opens nothing early: the record of an application is what opens its
//! hostname, so until it lands the hostname stays closed. A pass of the Access reconciler that
//! reads the status before it lands finds its applications again by their names (they are
//! adopted, never made twice) and hands the same status again.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::bounded;
use crate::caches::ProcessCaches;
use crate::term::Context;
use cftunnel_policy::access::PolicyKey;
use cftunnel_types::access_policy::{AccessPolicy, AccessPolicyStatus};

/// The status-write metric's kind.
const KIND: &str = "AccessPolicy";

/// One status waiting to be written, for the policy of `uid` (a policy deleted and made again
/// under its name never gets its predecessor's record).
#[derive(Clone, Debug, PartialEq)]
struct Pending {
    uid: Option<String>,
    status: AccessPolicyStatus,
}

/// The AccessPolicy statuses waiting for the writer, the newest per policy. Made once per term
/// in `wiring.rs`: the Access reconciler hands statuses in, the status writer takes them out.
#[derive(Clone)]
pub struct AccessStatuses {
    pending: Arc<Mutex<BTreeMap<PolicyKey, Pending>>>,
    /// Bumped with every status handed in: wakes the writer.
    handed: watch::Sender<u64>,
}

impl Default for AccessStatuses {
    fn default() -> Self {
        AccessStatuses {
            pending: Arc::default(),
            handed: watch::Sender::new(0),
        }
    }
}

impl AccessStatuses {
    /// Hands in `status` for `policy` when it differs from the stored one; returns it then.
    pub(crate) fn hand_in(
        &self,
        policy: &AccessPolicy,
        status: AccessPolicyStatus,
    ) -> Option<AccessPolicyStatus> {
        let key = PolicyKey::of(policy);
        let mut pending = self.lock();
        if policy.status.as_ref() == Some(&status) {
            // The stored status is the one wanted: an older one still waiting must not
            // overwrite it.
            pending.remove(&key);
            return None;
        }
        let next = Pending {
            uid: policy.uid(),
            status: status.clone(),
        };
        if pending.get(&key) != Some(&next) {
            pending.insert(key, next);
            drop(pending);
            self.handed.send_modify(|n| *n = n.wrapping_add(1));
        }
        Some(status)
    }

    /// A receiver that sees every status handed in after it was made.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.handed.subscribe()
    }

    fn take(&self) -> BTreeMap<PolicyKey, Pending> {
        std::mem::take(&mut *self.lock())
    }

    /// Puts back a status whose write failed, unless a newer one was handed in meanwhile.
    fn put_back(&self, key: PolicyKey, pending: Pending) {
        self.lock().entry(key).or_insert(pending);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PolicyKey, Pending>> {
        // The map stays whole whatever panicked while holding it.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes every status waiting; returns how many writes failed (those are tried again).
pub(super) async fn write_access_policies(
    ctx: &Context,
    caches: &ProcessCaches,
    statuses: &AccessStatuses,
) -> usize {
    let waiting = statuses.take();
    if waiting.is_empty() {
        return 0;
    }
    let stored = caches.access_policies.all();
    let mut failed = 0;
    for (key, pending) in waiting {
        let Some(policy) = stored
            .iter()
            .find(|p| PolicyKey::of(p) == key && p.uid() == pending.uid)
        else {
            // Deleted (or made again under its name): nothing to record on.
            continue;
        };
        if policy.status.as_ref() == Some(&pending.status) {
            continue;
        }
        let api: Api<AccessPolicy> = Api::namespaced(ctx.client.clone(), &key.namespace);
        // A merge patch keeps what it leaves out: a list that became empty is removed by name.
        let mut body = json!({"status": pending.status});
        if pending.status.retiring.is_none() {
            body["status"]["retiring"] = serde_json::Value::Null;
        }
        let (params, patch) = (PatchParams::default(), Patch::Merge(body));
        match bounded(ctx, KIND, api.patch_status(&key.name, &params, &patch)).await {
            Ok(_) => {}
            Err(super::WriteError::Kube(kube::Error::Api(e))) if e.code == 404 => {}
            Err(error) => {
                tracing::warn!(policy = %key, %error, "AccessPolicy status not written");
                failed += 1;
                statuses.put_back(key, pending);
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::access_policy::ProtectedHostname;

    fn policy(uid: &str, status: Option<AccessPolicyStatus>) -> AccessPolicy {
        let mut policy: AccessPolicy = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "AccessPolicy",
            "metadata": {"name": "staff", "namespace": "shop", "uid": uid},
            "spec": {"targetRefs": [{"group": "networking.k8s.io", "kind": "Ingress", "name": "web"}]},
        }))
        .expect("a valid AccessPolicy");
        policy.status = status;
        policy
    }

    fn status(aud: &str) -> AccessPolicyStatus {
        AccessPolicyStatus {
            retiring: Some(vec![ProtectedHostname {
                hostname: "web.example.com".into(),
                aud: aud.into(),
                ..ProtectedHostname::default()
            }]),
            ..AccessPolicyStatus::default()
        }
    }

    #[test]
    fn the_newest_status_of_a_policy_waits_and_a_stored_one_cancels_it() {
        let statuses = AccessStatuses::default();
        let mut woken = statuses.subscribe();
        let stored = policy("u1", Some(status("a")));
        // Equal to the stored status: nothing to write.
        assert_eq!(statuses.hand_in(&stored, status("a")), None);
        assert!(!woken.has_changed().expect("the sender lives"));
        assert_eq!(statuses.hand_in(&stored, status("b")), Some(status("b")));
        assert_eq!(statuses.hand_in(&stored, status("c")), Some(status("c")));
        assert!(woken.has_changed().expect("the sender lives"));
        woken.borrow_and_update();
        // The same status again wakes nobody.
        statuses.hand_in(&stored, status("c"));
        assert!(!woken.has_changed().expect("the sender lives"));
        let waiting = statuses.take();
        assert_eq!(waiting.len(), 1);
        let (key, pending) = waiting.into_iter().next().expect("one waits");
        assert_eq!(pending.status, status("c"));
        assert_eq!(pending.uid.as_deref(), Some("u1"));
        // A failed write goes back, unless a newer status came meanwhile.
        statuses.hand_in(&stored, status("d"));
        statuses.put_back(key.clone(), pending);
        assert_eq!(statuses.take()[&key].status, status("d"));
        // Handed the stored status again, an older one waiting is dropped.
        statuses.hand_in(&stored, status("e"));
        assert_eq!(statuses.hand_in(&stored, status("a")), None);
        assert!(statuses.take().is_empty());
    }
}
