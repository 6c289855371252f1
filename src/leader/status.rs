//! Where this process stands in the election, observable by tests and mirrored to `/metrics`.
use std::sync::Arc;

use tokio::sync::watch;

use crate::webhook::WebhookMetrics;

/// This process's role in the election.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaderState {
    /// Waiting to acquire the lease.
    #[default]
    Candidate,
    /// Not even trying: the Go operator's lease has a live holder.
    BlockedByGoOperator,
    /// Holding the lease; the reconcilers run.
    Leading,
    /// Shut down (the lease released if it was held).
    Stopped,
}

/// A shared, observable [`LeaderState`]; clones see the same state.
#[derive(Clone, Debug)]
pub struct LeaderStatus {
    state: Arc<watch::Sender<LeaderState>>,
}

impl Default for LeaderStatus {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaderStatus {
    /// A candidate.
    pub fn new() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(LeaderState::Candidate)),
        }
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        *self.state.borrow()
    }

    /// Whether the reconcilers run here now.
    pub fn is_leading(&self) -> bool {
        self.state() == LeaderState::Leading
    }

    /// A receiver notified on every change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.state.subscribe()
    }

    /// Records a new state (notifies only on change).
    pub(crate) fn set(&self, state: LeaderState) {
        self.state.send_if_modified(|current| {
            let changed = *current != state;
            *current = state;
            changed
        });
    }
}

/// Keeps the `cftunnel_leader` gauge equal to whether this process leads, until `status` is
/// dropped everywhere else.
pub async fn report_to_metrics(status: LeaderStatus, metrics: Arc<WebhookMetrics>) {
    let mut changes = status.subscribe();
    drop(status);
    loop {
        let leading = *changes.borrow_and_update() == LeaderState::Leading;
        metrics.set_leading(leading);
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn gauge_follows_the_state() {
        let status = LeaderStatus::new();
        let metrics = Arc::new(WebhookMetrics::new());
        let reporter = tokio::spawn(report_to_metrics(status.clone(), metrics.clone()));
        let mut seen = status.subscribe();
        status.set(LeaderState::Leading);
        let _ = seen.changed().await;
        for _ in 0..1000 {
            if metrics.leading() == Some(true) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(metrics.leading(), Some(true));
        status.set(LeaderState::Stopped);
        drop(status);
        let _ = reporter.await;
        assert_eq!(metrics.leading(), Some(false));
    }
}
