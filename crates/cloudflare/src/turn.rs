//! A call's turn at the pacer taken before its request is built: work that waits for the budget
//! builds what it sends when it may send it, so every change that arrived during the wait goes
//! in that one request instead of a request queued per change (docs/design.md §3.12).
use super::pacer::Limiter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One token taken ahead of the call it pays for. The first attempt of the next call made by
/// the client `CloudflareClient::take_turn` returned spends it instead of waiting again;
/// retries wait as every call does. Dropped unspent (the work gave way, or found nothing to
/// send), the token goes back to the bucket.
pub(crate) struct Prepaid {
    limiter: Arc<Limiter>,
    spent: AtomicBool,
}

impl Prepaid {
    /// A token just taken from `limiter`.
    pub(crate) fn taken(limiter: Arc<Limiter>) -> Prepaid {
        Prepaid {
            limiter,
            spent: AtomicBool::new(false),
        }
    }
}

impl Prepaid {
    /// Spends the token: true once, and never while a 429's pause holds the credential (the
    /// call then waits as any other, and the token goes back when it is dropped).
    pub(crate) fn spend(&self) -> bool {
        !self.limiter.is_paused() && !self.spent.swap(true, Ordering::AcqRel)
    }
}

impl Drop for Prepaid {
    fn drop(&mut self) {
        if !*self.spent.get_mut() {
            self.limiter.give_back();
        }
    }
}
