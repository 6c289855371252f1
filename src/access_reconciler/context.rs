//! What the Access reconciler gets: the term's [`Context`], what it reads from other
//! components (handed in by `wiring.rs`) and its own backoff memory.
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::status_writer::AccessStatuses;
use crate::term::Context;
use crate::term::access::AccessShared;
use crate::term::memory::Backoff;
use crate::term::route_index::RouteReader;

/// The Access reconciler's context: the term's [`Context`] (reachable through `Deref`, so
/// `ctx.client`, `ctx.cloudflare` and the helpers taking `&Context` read as before), the route
/// index and Access state it reads, and its failure counts.
pub(crate) struct AccessContext {
    pub ctx: Arc<Context>,
    /// Read: whether a first route table is published (nothing is reconciled before).
    pub routes: RouteReader,
    /// Read: the Access guard (published by the route reconciler) and what each tunnel applied
    /// (recorded by the tunnel reconciler); each change wakes this reconciler.
    pub access: Arc<AccessShared>,
    /// Written: each policy's status, handed to the status writer.
    pub statuses: AccessStatuses,
    /// Consecutive failures per policy (`AccessPolicy namespace/name`, and the same with
    /// ` calls` for a pass whose Cloudflare calls failed), for exponential backoff.
    failures: Backoff,
}

/// The term's context is what most of a reconcile reads.
impl Deref for AccessContext {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl AccessContext {
    pub(crate) fn new(
        ctx: Arc<Context>,
        routes: RouteReader,
        access: Arc<AccessShared>,
        statuses: AccessStatuses,
    ) -> AccessContext {
        AccessContext {
            failures: Backoff::new(&ctx.options),
            ctx,
            routes,
            access,
            statuses,
        }
    }

    /// Records one more failure of `key` and returns the delay before the next attempt.
    pub(crate) fn next_backoff(&self, key: &str) -> Duration {
        self.failures.next(key)
    }

    /// Forgets the failures of `key` after a success.
    pub(crate) fn reset_backoff(&self, key: &str) {
        self.failures.reset(key);
    }

    /// Keeps the failure counts of the keys `live` accepts.
    pub(crate) fn retain_backoff(&self, live: impl Fn(&str) -> bool) {
        self.failures.retain(live);
    }
}
