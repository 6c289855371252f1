//! Who owns a running task: the process, or one leadership term.
//!
//! A [`Scope`] is a cancellation token plus a task tracker. It is the only way cftunnel spawns
//! long-lived work: the watch caches, the DNS task, the Secret guard's retries, the checksum
//! watcher, the reconcilers. The process has one root scope; each leadership term is a child of
//! it ([`Scope::child`]), so cancelling the process cancels every term, and ending a term
//! ([`Scope::shutdown`]) stops everything the term started, however deep it was spawned — a
//! deposed leader keeps no watch, no DNS task and no retry loop, and a re-election starts the
//! same set again rather than a second one.
//!
//! A term also carries a write permit ([`WriteGate`]): the elector moves its expiry forward on
//! every renewal (`renewed_at + renew_deadline`), and every Cloudflare write checks it right
//! before it is sent. A process that was paused (SIGSTOP, a stalled node) past its lease wakes
//! with the permit already expired, so it makes no write even before the elector's own timer
//! has run and cancelled the term.
//!
//! Each root counts the tasks and watch streams alive under it ([`Scope::live_tasks`],
//! [`Scope::live_watches`]): the re-election test asserts they come back to the same numbers.
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cftunnel_cloudflare::WriteGate;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

/// Live tasks and watch streams under one root scope.
#[derive(Debug, Default)]
struct Counters {
    tasks: AtomicUsize,
    watches: AtomicUsize,
}

/// A cancellation token and the tasks spawned under it. Cheap to clone; clones are the same
/// scope.
#[derive(Clone, Debug)]
pub struct Scope {
    name: &'static str,
    token: CancellationToken,
    tasks: TaskTracker,
    counters: Arc<Counters>,
    gate: WriteGate,
}

impl Scope {
    /// A root scope (the process, or a standalone run of the reconcilers in a test).
    pub fn root(name: &'static str) -> Scope {
        let token = CancellationToken::new();
        Scope {
            name,
            gate: WriteGate::cancelled_with(token.clone(), None),
            token,
            tasks: TaskTracker::new(),
            counters: Arc::default(),
        }
    }

    /// A child scope: cancelled with this one, or on its own; its tasks are its own; writes
    /// are permitted only while both this scope's and the child's permits hold.
    pub fn child(&self, name: &'static str) -> Scope {
        let token = self.token.child_token();
        Scope {
            name,
            gate: WriteGate::cancelled_with(token.clone(), Some(&self.gate)),
            token,
            tasks: TaskTracker::new(),
            counters: self.counters.clone(),
        }
    }

    /// Runs `future` on its own task until it ends or this scope is cancelled (then it is
    /// dropped at its next await point). `what` names it in logs.
    pub fn spawn<F>(&self, what: &'static str, future: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let token = self.token.clone();
        let live = Live::enter(&self.counters, Kind::Task);
        let scope = self.name;
        self.tasks.spawn(async move {
            let _live = live;
            tokio::select! {
                biased;
                () = token.cancelled() => tracing::debug!(scope, task = what, "task stopped"),
                () = future => {}
            }
        })
    }

    /// Counts one running watch stream while the returned guard lives.
    pub(crate) fn watch_guard(&self) -> impl Send + Sync + 'static {
        Live::enter(&self.counters, Kind::Watch)
    }

    /// Resolves once this scope is cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Cancels this scope (and its children) without waiting.
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Cancels this scope when the guard is dropped: a future that owns the guard stops its
    /// scope's tasks when it is aborted.
    pub(crate) fn cancel_on_drop(&self) -> DropGuard {
        self.token.clone().drop_guard()
    }

    /// The write permit of this scope.
    pub fn write_gate(&self) -> WriteGate {
        self.gate.clone()
    }

    /// Cancels the scope and waits up to `grace` for its tasks to end; `false` if some did not.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        self.token.cancel();
        self.tasks.close();
        let done = tokio::time::timeout(grace, self.tasks.wait()).await.is_ok();
        if !done {
            tracing::warn!(
                scope = self.name,
                left = self.tasks.len(),
                "tasks did not stop in time"
            );
        }
        done
    }

    /// Tasks running under this scope's root, every term included.
    pub fn live_tasks(&self) -> usize {
        self.counters.tasks.load(Ordering::SeqCst)
    }

    /// Watch streams running under this scope's root.
    pub fn live_watches(&self) -> usize {
        self.counters.watches.load(Ordering::SeqCst)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Task,
    Watch,
}

/// Counts one live task or watch; uncounts on drop.
struct Live {
    counters: Arc<Counters>,
    kind: Kind,
}

impl Live {
    fn enter(counters: &Arc<Counters>, kind: Kind) -> Live {
        Self::counter(counters, kind).fetch_add(1, Ordering::SeqCst);
        Live {
            counters: counters.clone(),
            kind,
        }
    }

    fn counter(counters: &Counters, kind: Kind) -> &AtomicUsize {
        match kind {
            Kind::Task => &counters.tasks,
            Kind::Watch => &counters.watches,
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        Self::counter(&self.counters, self.kind).fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    #[tokio::test]
    async fn shutting_a_term_down_stops_what_its_tasks_spawned_and_only_that() {
        let process = Scope::root("process");
        let term = process.child("term");
        let inner = term.clone();
        term.spawn("outer", async move {
            inner.spawn("inner", std::future::pending());
            std::future::pending::<()>().await;
        });
        process.spawn("process-wide", std::future::pending());
        tokio::task::yield_now().await;
        assert_eq!(process.live_tasks(), 3);
        assert!(term.shutdown(Duration::from_secs(5)).await);
        assert_eq!(process.live_tasks(), 1);
        assert!(!process.is_cancelled());
        assert!(process.shutdown(Duration::from_secs(5)).await);
        assert_eq!(process.live_tasks(), 0);
    }

    #[tokio::test]
    async fn cancelling_the_process_cancels_its_terms() {
        let process = Scope::root("process");
        let term = process.child("term");
        process.cancel();
        assert!(term.is_cancelled());
        assert!(!term.write_gate().may_write());
    }

    #[test]
    fn the_write_permit_ends_at_its_expiry_or_on_cancellation() {
        let process = Scope::root("process");
        let term = process.child("term");
        let gate = term.write_gate();
        assert!(gate.may_write());
        gate.renew_until(Instant::now() + Duration::from_secs(60));
        assert!(gate.may_write());
        gate.renew_until(Instant::now() - Duration::from_millis(1));
        assert!(!gate.may_write());
        gate.renew_until(Instant::now() + Duration::from_secs(60));
        term.cancel();
        assert!(!gate.may_write());
        assert!(process.write_gate().may_write());
    }

    #[tokio::test]
    async fn a_dropped_guard_cancels_its_scope() {
        let scope = Scope::root("reconcilers");
        {
            let _guard = scope.cancel_on_drop();
        }
        assert!(scope.is_cancelled());
    }

    #[tokio::test]
    async fn watch_guards_are_counted_while_alive() {
        let scope = Scope::root("process");
        let guard = scope.watch_guard();
        assert_eq!(scope.live_watches(), 1);
        drop(guard);
        assert_eq!(scope.live_watches(), 0);
    }
}
