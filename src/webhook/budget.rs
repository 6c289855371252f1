//! Bytes the webhook holds at once, bounded: request bodies, and what decoding them takes.
//!
//! Memory of a review is its body, then the request decoded from it, whose size depends on the
//! body's shape (`decode_cost.rs`); bounding both in bytes — not only the number of requests —
//! bounds memory. The same [`BodyBudget`] type serves both ([`Budgets`]). A request reserves its
//! `Content-Length` (or the body limit when it declares none) before its body is read, and
//! releases it when answered. Reviews up to [`SMALL_BODY_BYTES`] may also draw on a reserve that
//! large ones cannot touch, so a flood of huge bodies never starves ordinary reviews. A request
//! that finds no room is refused at once with 429: nothing queues, so nothing piles up.
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bodies up to this size count as ordinary reviews (a large Deployment is ~20 KiB).
pub const SMALL_BODY_BYTES: usize = 256 * 1024;

/// Room for bodies being read or decided; `total` splits into a shared part and a reserve that
/// only small bodies use.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    shared: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    total: usize,
    reserve_total: usize,
}

/// The router's two budgets: bytes of bodies held (reserved before a body is read) and bytes
/// of decoding (reserved from the body's decode cost before it is decoded).
#[derive(Debug, Clone)]
pub struct Budgets {
    /// Bytes of request bodies, by `Content-Length`.
    pub bodies: BodyBudget,
    /// Bytes of decoded reviews, by [`super::decode_cost`].
    pub decoding: BodyBudget,
}

impl Default for Budgets {
    /// The webhook's defaults ([`super::DEFAULT_MAX_BYTES_IN_FLIGHT`],
    /// [`super::DEFAULT_MAX_DECODE_BYTES`]).
    fn default() -> Self {
        Self {
            bodies: BodyBudget::new(
                super::DEFAULT_MAX_BYTES_IN_FLIGHT,
                super::DEFAULT_SMALL_BODY_RESERVE,
            ),
            decoding: BodyBudget::new(
                super::DEFAULT_MAX_DECODE_BYTES,
                super::DEFAULT_SMALL_DECODE_RESERVE,
            ),
        }
    }
}

/// Held while a request's body is in memory; returns its bytes to the budget when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    _permit: OwnedSemaphorePermit,
}

impl BodyBudget {
    /// `total` bytes, of which `reserve` only for small bodies (clamped to `total`).
    pub fn new(total: usize, reserve: usize) -> Self {
        let reserve = reserve.min(total);
        Self {
            shared: Arc::new(Semaphore::new(clamp(total - reserve) as usize)),
            reserve: Arc::new(Semaphore::new(clamp(reserve) as usize)),
            total,
            reserve_total: reserve,
        }
    }

    /// The whole budget in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Whether `bytes` could ever be reserved for a request whose body is `small` or not,
    /// even with nothing else held.
    pub(crate) fn could_fit(&self, bytes: usize, small: bool) -> bool {
        bytes <= self.largest(small)
    }

    /// The most one request whose body is `small` or not can ever reserve.
    pub(crate) fn largest(&self, small: bool) -> usize {
        if small {
            self.total
        } else {
            self.total - self.reserve_total
        }
    }

    /// Takes room for `bytes` without waiting; `None` when the webhook already holds too much.
    pub(crate) fn try_reserve(&self, bytes: usize) -> Option<Reservation> {
        self.try_reserve_for(bytes, bytes <= SMALL_BODY_BYTES)
    }

    /// Takes room for `bytes` on behalf of a request whose body is `small` (may use the
    /// reserve) or not; `None` when there is no room now.
    pub(crate) fn try_reserve_for(&self, bytes: usize, small: bool) -> Option<Reservation> {
        let permits = clamp(bytes.max(1));
        let pools: &[&Arc<Semaphore>] = if small {
            &[&self.reserve, &self.shared]
        } else {
            &[&self.shared]
        };
        pools.iter().find_map(|pool| {
            Arc::clone(pool)
                .try_acquire_many_owned(permits)
                .ok()
                .map(|permit| Reservation { _permit: permit })
        })
    }
}

fn clamp(bytes: usize) -> u32 {
    u32::try_from(bytes)
        .unwrap_or(u32::MAX)
        .min(Semaphore::MAX_PERMITS as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_bodies_share_only_the_shared_part() {
        let budget = BodyBudget::new(10 << 20, 2 << 20);
        let first = budget.try_reserve(3 << 20);
        let second = budget.try_reserve(3 << 20);
        assert!(first.is_some() && second.is_some());
        assert!(
            budget.try_reserve(3 << 20).is_none(),
            "8 MiB shared, 6 taken"
        );
        // Small reviews still get through, first from the reserve, then from what is left.
        let small: Vec<_> = (0..8)
            .filter_map(|_| budget.try_reserve(256 << 10))
            .collect();
        assert_eq!(small.len(), 8);
        assert!(
            budget.try_reserve(256 << 10).is_some(),
            "2 MiB of the shared part is free"
        );
        drop(first);
        assert!(budget.try_reserve(3 << 20).is_some(), "released on drop");
    }

    #[test]
    fn a_request_larger_than_the_budget_is_refused() {
        let budget = BodyBudget::new(1 << 20, 0);
        assert!(budget.try_reserve(2 << 20).is_none());
        assert!(!budget.could_fit(2 << 20, true));
        assert!(budget.try_reserve(1 << 20).is_some());
    }

    #[test]
    fn smallness_can_be_given_apart_from_the_bytes_reserved() {
        // A decoding budget: a small body whose decoding costs more than the small-body size
        // still draws on the reserve; a large body's decoding never does.
        let budget = BodyBudget::new(10 << 20, 4 << 20);
        assert!(budget.could_fit(10 << 20, true));
        assert!(!budget.could_fit(7 << 20, false));
        let small = budget.try_reserve_for(4 << 20, true);
        assert!(small.is_some());
        let large = budget.try_reserve_for(6 << 20, false);
        assert!(large.is_some(), "the shared part is untouched");
        assert!(budget.try_reserve_for(1, true).is_none(), "all taken");
        drop(small);
        assert!(
            budget.try_reserve_for(1, false).is_none(),
            "the reserve is not for large bodies"
        );
        assert!(budget.try_reserve_for(4 << 20, true).is_some());
    }
}
