//! What the reconcilers share about Zero Trust Access (docs/design.md §3.7).
//!
//! - The route reconciler publishes the [`AccessGuard`] (every protected hostname and how it
//!   stands) with each route table, and re-runs the tunnels whose protections changed.
//! - The tunnel reconciler renders each tunnel with its protections and, once its rules are
//!   applied (config.yaml stored, or the remote configuration pushed), records what it
//!   applied here.
//! - The Access reconciler reads both: it makes an application only once every tunnel serving
//!   the hostname has applied it closed, and deletes one only once no tunnel's applied rules
//!   carry its AUD. Each record wakes it.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::watch;

use cftunnel_policy::access::AccessGuard;
use cftunnel_policy::render::protection::Protection;
use cftunnel_types::TunnelIdentity;

/// The shared Access state of one term.
pub struct AccessShared {
    guard: RwLock<Arc<AccessGuard>>,
    /// Per tunnel, the protections of its last applied rules (absent: not applied this term).
    applied: Mutex<BTreeMap<TunnelIdentity, BTreeMap<String, Protection>>>,
    wake: watch::Sender<u64>,
}

impl Default for AccessShared {
    fn default() -> Self {
        AccessShared {
            guard: RwLock::default(),
            applied: Mutex::default(),
            wake: watch::channel(0).0,
        }
    }
}

impl AccessShared {
    /// Installs a new guard; returns the tunnels whose protections changed.
    pub(crate) fn publish(&self, next: Arc<AccessGuard>) -> Vec<TunnelIdentity> {
        let previous = {
            let mut slot = self.guard.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *slot, next.clone())
        };
        let tunnels: BTreeSet<&TunnelIdentity> = previous
            .hostnames
            .values()
            .chain(next.hostnames.values())
            .flat_map(|g| &g.tunnels)
            .collect();
        let changed: Vec<TunnelIdentity> = tunnels
            .into_iter()
            .filter(|t| previous.of_tunnel(t) != next.of_tunnel(t))
            .cloned()
            .collect();
        if *previous != *next {
            self.bump();
        }
        changed
    }

    /// The current guard.
    pub fn guard(&self) -> Arc<AccessGuard> {
        self.guard.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the protections of the rules `tunnel` just applied.
    pub(crate) fn applied(
        &self,
        tunnel: &TunnelIdentity,
        protections: BTreeMap<String, Protection>,
    ) {
        let mut applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        if applied.get(tunnel) != Some(&protections) {
            applied.insert(tunnel.clone(), protections);
            drop(applied);
            self.bump();
        }
    }

    /// Has `tunnel` applied `hostname` closed or behind Access (never in the open) this term?
    pub fn applied_protected(&self, tunnel: &TunnelIdentity, hostname: &str) -> bool {
        let applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        applied
            .get(tunnel)
            .is_some_and(|p| p.contains_key(hostname))
    }

    /// Has `tunnel` applied its rules this term?
    pub fn has_applied(&self, tunnel: &TunnelIdentity) -> bool {
        let applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        applied.contains_key(tunnel)
    }

    /// Do the applied rules of one of the `live` tunnels check the AUD `aud`?
    pub fn carries(&self, aud: &str, live: &BTreeSet<TunnelIdentity>) -> bool {
        let applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        applied.iter().any(|(tunnel, protections)| {
            live.contains(tunnel)
                && protections
                    .values()
                    .any(|p| matches!(p, Protection::Open { aud: a, .. } if a == aud))
        })
    }

    /// Wakes on every new guard and every record of applied rules.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    fn bump(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_policy::access::{Guarded, PolicyKey, TargetKey};
    use cftunnel_policy::routes::{SourceKind, SourceRef};
    use cftunnel_types::TunnelKind;

    fn tunnel(name: &str) -> TunnelIdentity {
        TunnelIdentity {
            kind: TunnelKind::Tunnel,
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    fn guard_of(host: &str, on: &str, protection: Protection) -> AccessGuard {
        let mut guard = AccessGuard::default();
        guard.hostnames.insert(
            host.into(),
            Guarded {
                policy: PolicyKey {
                    namespace: "shop".into(),
                    name: "staff".into(),
                },
                target: TargetKey {
                    group: String::new(),
                    kind: "Service".into(),
                    name: "web".into(),
                },
                source: SourceRef {
                    kind: SourceKind::Service,
                    namespace: "shop".into(),
                    name: "web".into(),
                    uid: String::new(),
                }
                .into(),
                tunnels: BTreeSet::from([tunnel(on)]),
                protection,
            },
        );
        guard
    }

    #[test]
    fn tunnels_whose_protections_change_are_named_and_applied_rules_are_tracked() {
        let shared = AccessShared::default();
        let closed = Protection::Closed { why: "w".into() };
        let open = Protection::Open {
            team: "t".into(),
            aud: "aud-1".into(),
        };
        assert_eq!(
            shared.publish(Arc::new(guard_of("a.example.com", "edge", closed.clone()))),
            vec![tunnel("edge")]
        );
        assert!(
            shared
                .publish(Arc::new(guard_of("a.example.com", "edge", closed.clone())))
                .is_empty()
        );
        assert_eq!(
            shared.publish(Arc::new(guard_of("a.example.com", "other", closed.clone()))),
            vec![tunnel("edge"), tunnel("other")],
            "the tunnel it left and the one it joined"
        );
        assert!(!shared.applied_protected(&tunnel("other"), "a.example.com"));
        shared.applied(
            &tunnel("other"),
            BTreeMap::from([("a.example.com".into(), open)]),
        );
        assert!(shared.applied_protected(&tunnel("other"), "a.example.com"));
        let live = BTreeSet::from([tunnel("other")]);
        assert!(shared.carries("aud-1", &live));
        assert!(
            !shared.carries("aud-1", &BTreeSet::new()),
            "a tunnel gone carries nothing"
        );
        shared.applied(&tunnel("other"), BTreeMap::new());
        assert!(!shared.carries("aud-1", &live));
    }
}
