//! The route table shared by the route reconciler (its only writer) and the tunnel reconciler
//! (which renders each tunnel's ingress rules from it), with the Access guard computed from it:
//! a tunnel renders its routes and their protections from one table (docs/design.md §3.7).
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::access::AccessGuard;
use crate::render::protection::Protection;
use crate::routes::{RouteTable, TunnelRoutes};
use cftunnel_types::TunnelIdentity;

/// A table and the guard computed from it, published together.
#[derive(Clone)]
struct Published {
    table: Arc<RouteTable>,
    guard: Arc<AccessGuard>,
}

/// One tunnel's routes and the protections of its hostnames, from one table.
#[derive(Clone, Debug, PartialEq)]
pub struct TunnelSnapshot {
    pub routes: Arc<TunnelRoutes>,
    /// Lowercase hostname → how the guard of the same table protects it on this tunnel.
    pub protections: BTreeMap<String, Protection>,
    /// Why some of its hostnames are closed because the AccessPolicies cannot be known, and
    /// which (`None`: none is).
    pub unknown: Option<(String, Vec<String>)>,
}

/// The latest route table; empty until the route reconciler's caches have synced.
#[derive(Default)]
pub struct RouteIndex {
    table: RwLock<Option<Published>>,
}

impl RouteIndex {
    /// Installs a newly computed table and the guard computed from it; returns the table it
    /// replaces.
    pub fn publish(
        &self,
        table: Arc<RouteTable>,
        guard: Arc<AccessGuard>,
    ) -> Option<Arc<RouteTable>> {
        let mut slot = self.table.write().unwrap_or_else(|p| p.into_inner());
        slot.replace(Published { table, guard }).map(|p| p.table)
    }

    /// The routes of one tunnel; `None` until a table computed after the route reconciler saw
    /// this tunnel exists. The tunnel reconciler waits for it: rendering before the routes are
    /// known would drop every ingress rule and roll every cloudflared at start-up, and a tunnel
    /// created together with its bindings would roll out twice (first without its routes).
    pub fn tunnel(&self, identity: &TunnelIdentity) -> Option<Arc<TunnelRoutes>> {
        let slot = self.table.read().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()?.table.tunnels.get(identity).cloned()
    }

    /// The routes of one tunnel with their protections, read together: protections read after
    /// the routes could come from a newer table, in which a hostname this tunnel still serves
    /// has moved to another tunnel and is no longer protected here.
    pub fn snapshot(&self, identity: &TunnelIdentity) -> Option<TunnelSnapshot> {
        let slot = self.table.read().unwrap_or_else(|p| p.into_inner());
        let published = slot.as_ref()?;
        let guard = &published.guard;
        Some(TunnelSnapshot {
            routes: published.table.tunnels.get(identity).cloned()?,
            protections: guard.of_tunnel(identity),
            unknown: guard
                .unknown
                .get(identity)
                .map(|hosts| (guard.unknown_why.clone(), hosts.iter().cloned().collect())),
        })
    }

    /// The current table, if any.
    pub fn current(&self) -> Option<Arc<RouteTable>> {
        let slot = self.table.read().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(|p| p.table.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::fixtures::{ns_tunnel as id, with_route};

    #[test]
    fn the_index_answers_none_for_a_tunnel_until_a_table_that_knows_it_is_published() {
        let index = RouteIndex::default();
        assert!(index.tunnel(&id("a")).is_none());
        let mut table = RouteTable::default();
        table
            .tunnels
            .insert(id("a"), Arc::new(with_route("a.example.com")));
        assert!(index.publish(Arc::new(table), Arc::default()).is_none());
        assert_eq!(index.tunnel(&id("a")).map(|t| t.routes.len()), Some(1));
        assert_eq!(index.tunnel(&id("z")), None);
        let mut table = RouteTable::default();
        table
            .tunnels
            .insert(id("z"), Arc::new(TunnelRoutes::default()));
        index.publish(Arc::new(table), Arc::default());
        assert_eq!(
            index.tunnel(&id("z")),
            Some(Arc::new(TunnelRoutes::default()))
        );
    }

    #[test]
    fn a_snapshot_reads_routes_and_protections_of_one_publication() {
        use crate::access::{Guarded, PolicyKey, TargetKey};
        use crate::routes::{SourceKind, SourceRef};
        let index = RouteIndex::default();
        let mut table = RouteTable::default();
        table
            .tunnels
            .insert(id("a"), Arc::new(with_route("a.example.com")));
        let closed = Protection::Closed { why: "w".into() };
        let mut guard = AccessGuard::default();
        guard.hostnames.insert(
            "a.example.com".into(),
            Guarded {
                policy: PolicyKey {
                    namespace: "ns".into(),
                    name: "p".into(),
                },
                target: TargetKey {
                    group: String::new(),
                    kind: "Service".into(),
                    name: "web".into(),
                },
                source: Arc::new(SourceRef {
                    kind: SourceKind::Service,
                    namespace: "ns".into(),
                    name: "web".into(),
                    uid: String::new(),
                }),
                tunnels: [id("a")].into(),
                protection: closed.clone(),
            },
        );
        index.publish(Arc::new(table.clone()), Arc::new(guard));
        let snapshot = index.snapshot(&id("a")).expect("a is known");
        assert_eq!(snapshot.routes.routes[0].hostname, "a.example.com");
        assert_eq!(
            snapshot.protections,
            BTreeMap::from([("a.example.com".to_string(), closed)])
        );
        // A newer table without a guard entry for it: both change together.
        index.publish(Arc::new(table), Arc::default());
        assert!(
            index
                .snapshot(&id("a"))
                .expect("a is known")
                .protections
                .is_empty()
        );
        assert!(index.snapshot(&id("z")).is_none());
    }
}
