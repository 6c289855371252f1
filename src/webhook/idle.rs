//! Idle connections: a connection counts as busy while a request on it is being answered, and
//! as idle otherwise — whatever bytes it sends (HTTP/2 pings, partial frames, nothing at all).
//! One idle for the timeout is closed, so a client cannot hold file descriptors and TLS
//! buffers by opening connections and sending nothing.
use std::sync::PoisonError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Requests in flight on one connection and when the last one ended.
#[derive(Debug)]
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    last_change: Mutex<Instant>,
}

/// Marks one request in flight until dropped.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.touch();
    }
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last_change: Mutex::new(Instant::now()),
        }
    }
}

impl Activity {
    /// A request started.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Busy(Arc::clone(self))
    }

    fn touch(&self) {
        *self
            .last_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// When the connection becomes idle for `timeout` if nothing happens; `None` if it already is.
    pub(crate) fn idle_deadline(&self, timeout: Duration) -> Option<Instant> {
        let now = Instant::now();
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Some(now + timeout);
        }
        let last = *self
            .last_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let deadline = last + timeout;
        (deadline > now).then_some(deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_only_without_requests_in_flight() {
        let timeout = Duration::from_secs(30);
        let activity = Arc::new(Activity::default());
        assert!(activity.idle_deadline(timeout).is_some());
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(activity.idle_deadline(timeout), None);
        let busy = activity.begin();
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(
            activity.idle_deadline(timeout).is_some(),
            "a request is in flight"
        );
        drop(busy);
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(activity.idle_deadline(timeout).is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(activity.idle_deadline(timeout), None);
    }
}
