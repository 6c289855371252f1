//! The API slots: how many tunnel reconciles talk to the API server at once
//! (`tunnel_reconciler::context::API_SLOTS`), handed out by lane (docs/design.md §3.8). A FIFO semaphore
//! would put a user's new tunnel behind every reconcile of a backlog that reached the slots
//! first; here a free slot goes to the waiting reconcile of the highest lane: a deletion, then
//! the newest request of a user, then the backlog in order.
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::asks::Lane;
use cftunnel_cloudflare::{Priority, Work};

/// Where a waiter stands within its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// Interactive: the newest request first (a user waits for the one just made).
    Newest(Reverse<Work>),
    /// Every other lane: in order.
    Oldest(Work),
}

/// A waiter's key: lane, rank, then arrival.
type Key = (Priority, Rank, u64);

#[derive(Debug)]
struct State {
    free: usize,
    waiting: BTreeMap<Key, Arc<Notify>>,
}

impl State {
    fn wake_head(&self) {
        if self.free > 0
            && let Some((_, notify)) = self.waiting.iter().next()
        {
            notify.notify_one();
        }
    }
}

/// A semaphore whose waiters are served by lane.
#[derive(Debug)]
pub struct Slots {
    state: Mutex<State>,
    arrivals: AtomicU64,
}

/// A held slot; dropping it frees the slot for the next waiter.
#[derive(Debug)]
pub struct Slot<'s> {
    slots: &'s Slots,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        state.free += 1;
        state.wake_head();
    }
}

/// A place in the queue; leaving it without a slot (the waiter dropped) wakes the next.
struct Waiter<'s> {
    slots: &'s Slots,
    key: Key,
    served: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.served {
            return;
        }
        let mut state = self.slots.lock();
        if state.waiting.remove(&self.key).is_some() {
            state.wake_head();
        }
    }
}

impl Slots {
    pub fn new(count: usize) -> Slots {
        Slots {
            state: Mutex::new(State {
                free: count,
                waiting: BTreeMap::new(),
            }),
            arrivals: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot: every waiter of a higher lane, and of its own lane ranked before it,
    /// is served first.
    pub async fn acquire(&self, lane: Lane) -> Slot<'_> {
        let rank = match lane.priority {
            Priority::Interactive => Rank::Newest(Reverse(lane.work)),
            _ => Rank::Oldest(lane.work),
        };
        let key = (
            lane.priority,
            rank,
            self.arrivals.fetch_add(1, Ordering::Relaxed),
        );
        let notify = Arc::new(Notify::new());
        let mut waiter = Waiter {
            slots: self,
            key,
            served: false,
        };
        {
            let mut state = self.lock();
            state.waiting.insert(key, notify.clone());
            state.wake_head();
        }
        loop {
            notify.notified().await;
            let mut state = self.lock();
            let head = state.waiting.keys().next().copied();
            if state.free > 0 && head == Some(key) {
                state.waiting.remove(&key);
                state.free -= 1;
                state.wake_head();
                waiter.served = true;
                return Slot { slots: self };
            }
        }
    }

    /// Reconciles waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lane(priority: Priority) -> Lane {
        Lane {
            priority,
            work: Work::starting(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_free_slot_goes_to_a_deletion_then_the_newest_request_then_the_backlog_in_order() {
        let slots = Arc::new(Slots::new(1));
        let held = slots.acquire(lane(Priority::Normal)).await;
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let lanes = [
            ("backlog-1", lane(Priority::Normal)),
            ("backlog-2", lane(Priority::Normal)),
            ("asked-first", lane(Priority::Interactive)),
            ("asked-last", lane(Priority::Interactive)),
            ("delete", lane(Priority::Urgent)),
        ];
        for (label, lane) in lanes {
            let (slots, served) = (slots.clone(), served.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = slots.acquire(lane).await;
                served.lock().expect("served").push(label);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(slots.waiting(), 5);
        drop(held);
        for task in tasks {
            task.await.expect("task");
        }
        assert_eq!(
            *served.lock().expect("served"),
            [
                "delete",
                "asked-last",
                "asked-first",
                "backlog-1",
                "backlog-2"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_gives_up_passes_the_slot_on() {
        let slots = Slots::new(1);
        let held = slots.acquire(lane(Priority::Normal)).await;
        let first = lane(Priority::Interactive);
        let second = lane(Priority::Normal);
        let gave_up = tokio::time::timeout(Duration::from_millis(5), slots.acquire(first)).await;
        assert!(gave_up.is_err());
        drop(held);
        let got = tokio::time::timeout(Duration::from_secs(1), slots.acquire(second)).await;
        assert!(
            got.is_ok(),
            "the slot was lost with the waiter that gave up"
        );
        assert_eq!(slots.waiting(), 0);
    }
}
