//! The lane of each tunnel reconcile (docs/design.md §3.8): what a user asked for while cftunnel
//! runs goes first, in everything bounded or queued, from the watch event to the last status
//! write.
//!
//! An *ask* is one generation of an object that is not converged yet (never `Ready`, or `Ready`
//! for an older generation). Each ask is dated once, when a reconcile first meets it, and every
//! reconcile of it (the first, the one its own status write triggers, a retry) carries that date
//! as its [`Work`]: so the work of a tunnel created behind a thousand keeps its place, where
//! dating each reconcile would let every re-run of the backlog arrive newer than it.
//!
//! The lane: an ask that was already waiting when the term began (a first sync after a start or
//! a failover) is [`Priority::Normal`], the backlog; one made while the term runs is
//! [`Priority::Interactive`].
//!
//! A *route ask* is a change of a converged tunnel's routes (a binding, an Ingress, a route
//! created, edited or deleted) in any route table after the term's first: dated when the table
//! that had it was published, [`Priority::Interactive`] until a reconcile of the tunnel that
//! began after it succeeds. The first table of a term asks nothing: it is what the term found.
//! Any other reconcile of a converged object (a resync, a rotated Secret, its own children) is
//! no ask: [`Priority::Normal`], dated when it starts.
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use cftunnel_cloudflare::{Priority, Work};

/// A reconcile's place: its lane and the date of the request it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub priority: Priority,
    pub work: Work,
}

impl Lane {
    /// Work nobody asked for just now (a resync, a route follow-up), dated now.
    pub fn routine() -> Lane {
        Lane {
            priority: Priority::Normal,
            work: Work::starting(),
        }
    }
}

/// One open ask: the generation it is for and its lane.
#[derive(Debug, Clone, Copy)]
struct Ask {
    generation: i64,
    lane: Lane,
}

#[derive(Debug, Default)]
struct Inner {
    /// Asks waiting when the term began, `(uid, generation)`; each leaves once it is met.
    backlog: HashSet<(String, i64)>,
    /// Open asks by uid.
    open: HashMap<String, Ask>,
    /// Open route asks by tunnel (`Kind namespace/name`), dated by their first change.
    routes: HashMap<String, Work>,
}

/// The open asks of a term's tunnel objects, by uid. An entry goes when its object converges
/// or leaves the store (`TunnelContext::forget_all_but`). The route reconciler
/// writes route changes here (`routes_changed`); the tunnel reconciler reads and meets them.
#[derive(Debug, Default)]
pub struct Asks {
    inner: Mutex<Inner>,
}

impl Asks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The asks waiting when the term began (every unconverged object of the stores, listed
    /// before the first reconcile): these are the backlog.
    pub fn begin_term(&self, waiting: impl IntoIterator<Item = (String, i64)>) {
        self.lock().backlog = waiting.into_iter().collect();
    }

    /// The lane of a reconcile of `uid` at `generation`, an object not converged yet: the
    /// ask's, dated when it was first met.
    pub fn ask(&self, uid: &str, generation: i64) -> Lane {
        let mut inner = self.lock();
        if let Some(ask) = inner.open.get(uid)
            && ask.generation == generation
        {
            return ask.lane;
        }
        let key = (uid.to_string(), generation);
        let priority = match inner.backlog.remove(&key) {
            true => Priority::Normal,
            false => Priority::Interactive,
        };
        // An older generation's entry in the backlog is superseded by this one.
        inner.backlog.retain(|(u, _)| u != uid);
        let lane = Lane {
            priority,
            work: Work::starting(),
        };
        inner.open.insert(key.0, Ask { generation, lane });
        lane
    }

    /// `uid` converged: its next reconcile is routine.
    pub fn met(&self, uid: &str) {
        let mut inner = self.lock();
        inner.open.remove(uid);
        inner.backlog.retain(|(u, _)| u != uid);
    }

    /// The routes of `tunnel` (`Kind namespace/name`) changed in a table after the term's
    /// first. A change while one is open keeps the open one's date.
    pub fn routes_changed(&self, tunnel: String) {
        self.lock()
            .routes
            .entry(tunnel)
            .or_insert_with(Work::starting);
    }

    /// The lane of a reconcile of the converged `tunnel`: its open route ask's, else routine.
    pub fn routine_or_routes(&self, tunnel: &str) -> Lane {
        match self.lock().routes.get(tunnel) {
            Some(work) => Lane {
                priority: Priority::Interactive,
                work: *work,
            },
            None => Lane::routine(),
        }
    }

    /// A reconcile of `tunnel` in `lane` succeeded: a route ask it served is met (one that
    /// changed after it began is newer and stays).
    pub fn routes_met(&self, tunnel: &str, lane: Lane) {
        let mut inner = self.lock();
        if inner.routes.get(tunnel) == Some(&lane.work) {
            inner.routes.remove(tunnel);
        }
    }

    /// Keeps the asks of the uids `live` accepts, and the route asks of the tunnels `tunnels`
    /// accepts (by `Kind namespace/name`).
    pub fn retain(&self, live: impl Fn(&str) -> bool, tunnels: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        inner.open.retain(|uid, _| live(uid));
        inner.backlog.retain(|(uid, _)| live(uid));
        inner.routes.retain(|tunnel, _| tunnels(tunnel));
    }

    /// Open asks, backlog entries and route asks held.
    pub fn len(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        (inner.open.len(), inner.backlog.len(), inner.routes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_keeps_its_date_through_every_reconcile_until_it_is_met() {
        let asks = Asks::default();
        asks.begin_term([("old".to_string(), 1)]);
        let backlog = asks.ask("old", 1);
        assert_eq!(backlog.priority, Priority::Normal);
        let new = asks.ask("new", 1);
        assert_eq!(new.priority, Priority::Interactive);
        assert!(new.work > backlog.work);
        // Re-runs of both keep their lanes and dates: no re-run of the backlog arrives newer.
        assert_eq!(asks.ask("old", 1), backlog);
        assert_eq!(asks.ask("new", 1), new);
        // A new generation of the backlog's object is a user's new request.
        let edited = asks.ask("old", 2);
        assert_eq!(edited.priority, Priority::Interactive);
        assert!(edited.work > new.work);
        // Met: the next request of it is dated anew.
        asks.met("new");
        let again = asks.ask("new", 2);
        assert!(again.work > edited.work);
        assert_eq!(asks.len(), (2, 0, 0));
    }

    #[test]
    fn departed_objects_leave_nothing() {
        let asks = Asks::default();
        asks.begin_term([("a".to_string(), 1), ("b".to_string(), 3)]);
        asks.ask("a", 1);
        asks.ask("c", 1);
        asks.routes_changed("Tunnel ns/x".into());
        asks.routes_changed("Tunnel ns/y".into());
        asks.retain(|uid| uid == "c", |t| t == "Tunnel ns/y");
        assert_eq!(asks.len(), (1, 0, 1));
        // The backlog entry of an object gone before its first reconcile goes too.
        asks.begin_term([("b".to_string(), 3)]);
        asks.retain(|_| false, |_| false);
        assert_eq!(asks.len(), (0, 0, 0));
    }

    #[test]
    fn a_route_change_is_interactive_until_a_reconcile_that_began_after_it_succeeds() {
        let asks = Asks::default();
        let tunnel = "Tunnel ns/edge";
        assert_eq!(asks.routine_or_routes(tunnel).priority, Priority::Normal);
        asks.routes_changed(tunnel.into());
        let lane = asks.routine_or_routes(tunnel);
        assert_eq!(lane.priority, Priority::Interactive);
        // More changes while it waits keep its date.
        asks.routes_changed(tunnel.into());
        assert_eq!(asks.routine_or_routes(tunnel), lane);
        // A reconcile that began before a newer change does not meet it.
        asks.routes_met(tunnel, Lane::routine());
        assert_eq!(asks.routine_or_routes(tunnel), lane);
        asks.routes_met(tunnel, lane);
        assert_eq!(asks.routine_or_routes(tunnel).priority, Priority::Normal);
    }
}
