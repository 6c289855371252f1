//! The two ends of a term's [`RouteIndex`]: the route reconciler, its one writer, holds the
//! [`RoutePublisher`]; the tunnel reconciler (which renders each tunnel from it) and the Access
//! reconciler (which waits for a first table) hold [`RouteReader`]s. Both are made once per term
//! by [`route_index`] (in `wiring.rs`).
use std::sync::Arc;

use cftunnel_policy::access::AccessGuard;
use cftunnel_policy::published::{RouteIndex, TunnelSnapshot};
use cftunnel_policy::routes::{RouteTable, TunnelRoutes};
use cftunnel_types::TunnelIdentity;

/// A new, empty index: its one writer and a reader (clone it for more).
pub fn route_index() -> (RoutePublisher, RouteReader) {
    let index = Arc::new(RouteIndex::default());
    (RoutePublisher(index.clone()), RouteReader(index))
}

/// The writing end: publishes each table with the Access guard computed from it.
pub struct RoutePublisher(Arc<RouteIndex>);

impl RoutePublisher {
    /// Installs a newly computed table and its guard; returns the table it replaces.
    pub fn publish(
        &self,
        table: Arc<RouteTable>,
        guard: Arc<AccessGuard>,
    ) -> Option<Arc<RouteTable>> {
        self.0.publish(table, guard)
    }

    /// The table last published, if any.
    pub fn current(&self) -> Option<Arc<RouteTable>> {
        self.0.current()
    }
}

/// A reading end: the table last published, one tunnel's routes, or one tunnel's snapshot of
/// routes and protections ([`RouteIndex`]).
#[derive(Clone)]
pub struct RouteReader(Arc<RouteIndex>);

impl RouteReader {
    /// See [`RouteIndex::tunnel`]: `None` until a table that knows `identity` is published.
    pub fn tunnel(&self, identity: &TunnelIdentity) -> Option<Arc<TunnelRoutes>> {
        self.0.tunnel(identity)
    }

    /// See [`RouteIndex::snapshot`].
    pub fn snapshot(&self, identity: &TunnelIdentity) -> Option<TunnelSnapshot> {
        self.0.snapshot(identity)
    }

    /// The table last published, if any.
    pub fn current(&self) -> Option<Arc<RouteTable>> {
        self.0.current()
    }
}
