//! Which tunnels a new route table changes (the published table itself is
//! `crate::published::RouteIndex`).
use std::sync::Arc;

use crate::routes::RouteTable;
use cftunnel_types::TunnelIdentity;

/// Tunnels whose rendered routes or route statuses differ between two tables: tunnels new in
/// the table (all of them when there was none before; their reconcile waits for this), those
/// whose routes moved, and tunnels that lost every route.
pub fn changed_tunnels(old: Option<&RouteTable>, new: &RouteTable) -> Vec<TunnelIdentity> {
    let Some(old) = old else {
        return new.tunnels.keys().cloned().collect();
    };
    let mut changed: Vec<TunnelIdentity> = new
        .tunnels
        .iter()
        .filter(|(id, routes)| match old.tunnels.get(*id) {
            None => true,
            Some(before) => {
                !Arc::ptr_eq(before, routes)
                    && (before.routes != routes.routes || before.entries != routes.entries)
            }
        })
        .map(|(id, _)| id.clone())
        .collect();
    changed.extend(
        old.tunnels
            .iter()
            .filter(|(id, routes)| !new.tunnels.contains_key(*id) && !routes.routes.is_empty())
            .map(|(id, _)| id.clone()),
    );
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::TunnelRoutes;
    use crate::routes::fixtures::{ns_tunnel as id, with_route};
    use std::sync::Arc;

    /// Two tables: `a` the same in both, `b` moved, `c` new, `gone` (when asked) only before.
    fn old_and_new(with_gone: bool) -> (RouteTable, RouteTable) {
        let mut old = RouteTable::default();
        old.tunnels
            .insert(id("a"), Arc::new(with_route("a.example.com")));
        old.tunnels
            .insert(id("b"), Arc::new(with_route("b.example.com")));
        if with_gone {
            old.tunnels
                .insert(id("gone"), Arc::new(with_route("g.example.com")));
        }
        let mut new = RouteTable::default();
        new.tunnels
            .insert(id("a"), Arc::new(with_route("a.example.com")));
        new.tunnels
            .insert(id("b"), Arc::new(with_route("b2.example.com")));
        new.tunnels
            .insert(id("c"), Arc::new(TunnelRoutes::default()));
        (old, new)
    }

    #[test]
    fn a_new_table_shares_the_routes_of_unchanged_tunnels_with_the_one_before() {
        let (old, mut new) = old_and_new(false);
        new.share_unchanged(&old);
        assert!(Arc::ptr_eq(&new.tunnels[&id("a")], &old.tunnels[&id("a")]));
        assert!(!Arc::ptr_eq(&new.tunnels[&id("b")], &old.tunnels[&id("b")]));
        assert_eq!(new.tunnels[&id("b")].routes[0].hostname, "b2.example.com");
        // The shared copy is the same value: nothing is reported changed for it.
        let mut changed = changed_tunnels(Some(&old), &new);
        changed.sort();
        assert_eq!(changed, vec![id("b"), id("c")]);
    }

    #[test]
    fn tunnels_new_in_the_table_and_those_whose_routes_moved_are_reported() {
        let (old, new) = old_and_new(true);
        let mut changed = changed_tunnels(Some(&old), &new);
        changed.sort();
        assert_eq!(changed, vec![id("b"), id("c"), id("gone")]);
        assert_eq!(changed_tunnels(None, &new).len(), 3);
    }
}
