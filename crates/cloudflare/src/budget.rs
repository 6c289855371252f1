//! Budgets, and the paces that keep within them.
use std::time::Duration;

/// Steady rate and burst of one credential's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per second (Cloudflare allows 1,200 per 5 minutes, i.e. 4/s, shared).
    pub per_second: u32,
    /// Bucket capacity: calls admitted at once after a quiet period.
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: 3,
            burst: 10,
        }
    }
}

/// A request budget: at most `requests` calls in any `window` (Cloudflare's is 1,200 per five
/// minutes per token; going over answers 429 and blocks the token for the window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub requests: u32,
    pub window: Duration,
}

impl Budget {
    /// Cloudflare's documented budget per API token.
    pub const CLOUDFLARE: Budget = Budget {
        requests: 1200,
        window: Duration::from_secs(300),
    };
}

/// What a pacer keeps to: `tokens` per `window` at the steady rate, and `burst` at once after
/// a quiet spell. In any window it admits at most `burst + tokens` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub tokens: u32,
    pub window: Duration,
    pub burst: u32,
}

impl Pace {
    /// The pace that spends at most `budget` in any of its windows: a burst of a twentieth of
    /// it (1 to 10 calls), the rest spread evenly.
    pub fn within(budget: Budget) -> Pace {
        let burst = (budget.requests / 20).clamp(1, 10);
        Pace {
            tokens: budget.requests.saturating_sub(burst).max(1),
            window: budget.window.max(Duration::from_millis(1)),
            burst,
        }
    }

    /// Calls admitted per second at the steady rate.
    pub fn per_second(&self) -> f64 {
        f64::from(self.tokens) / self.window.as_secs_f64()
    }

    /// Tokens a [`crate::Priority::Background`] call leaves in the bucket.
    pub fn reserve(&self) -> u32 {
        self.burst / 2
    }

    pub(crate) fn is_slower_than(&self, other: &Pace) -> bool {
        u128::from(self.tokens) * other.window.as_nanos()
            < u128::from(other.tokens) * self.window.as_nanos()
    }

    /// Credit units of one token (see the pacer's bucket).
    pub(crate) fn token(&self) -> u128 {
        self.window.as_nanos().max(1)
    }

    pub(crate) fn capacity(&self) -> u128 {
        u128::from(self.burst.max(1)) * self.token()
    }

    /// Credit units the background calls' bucket holds: [`Pace::reserve`] calls (at least
    /// one), at two tokens each.
    pub(crate) fn background_capacity(&self) -> u128 {
        u128::from(self.reserve().max(1)) * 2 * self.token()
    }
}

impl From<RateLimit> for Pace {
    fn from(rate: RateLimit) -> Pace {
        Pace {
            tokens: rate.per_second.max(1),
            window: Duration::from_secs(1),
            burst: rate.burst.max(1),
        }
    }
}
