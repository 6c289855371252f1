//! Rate limiting per credential as Cloudflare does it: blocks after a 429, early calls and the
//! request budget.
//!
//! Every instant here is `tokio::time::Instant`, so tests on a paused clock drive it.
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::envelope::ApiError;

/// How long after a 429 left a request of the same credential may still have been on the wire.
pub(crate) const DEFAULT_IN_FLIGHT_GRACE: Duration = Duration::from_millis(100);

/// Cloudflare's global limit per credential: `requests` within a sliding `window`, then every
/// call is refused for `block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBudget {
    pub requests: u32,
    pub window: Duration,
    pub block: Duration,
}

/// Cloudflare's documented limit: 1,200 requests per 5 minutes, then 5 minutes blocked.
impl Default for RequestBudget {
    fn default() -> Self {
        RequestBudget {
            requests: 1_200,
            window: Duration::from_secs(300),
            block: Duration::from_secs(300),
        }
    }
}

/// A period during which a credential should not call, started by a 429.
#[derive(Debug, Clone, Copy)]
struct Block {
    /// When the 429 that started it was answered.
    answered_at: Instant,
    until: Instant,
    /// Budget blocks are always enforced; the others only with `block_on_rate_limit`.
    by_budget: bool,
}

/// Blocks, budget windows and their counters, keyed by credential fingerprint.
#[derive(Debug)]
pub(crate) struct Limits {
    pub block_on_rate_limit: bool,
    pub in_flight_grace: Duration,
    /// Answers to a budgeted credential carry the `Ratelimit` headers (the default).
    pub budget_headers: bool,
    budget: Option<RequestBudget>,
    blocks: HashMap<String, Vec<Block>>,
    /// Instants of the requests the budget let through, oldest first.
    windows: HashMap<String, VecDeque<Instant>>,
    pub early_calls: u64,
    pub budget_refusals: u64,
}

impl Limits {
    pub fn new(budget: Option<RequestBudget>) -> Self {
        Limits {
            block_on_rate_limit: false,
            in_flight_grace: DEFAULT_IN_FLIGHT_GRACE,
            budget_headers: true,
            budget,
            blocks: HashMap::new(),
            windows: HashMap::new(),
            early_calls: 0,
            budget_refusals: 0,
        }
    }

    pub fn budget(&self) -> Option<RequestBudget> {
        self.budget
    }

    /// A new budget starts every window afresh and lifts the blocks the old one imposed.
    pub fn set_budget(&mut self, budget: Option<RequestBudget>) {
        self.budget = budget;
        self.windows.clear();
        for blocks in self.blocks.values_mut() {
            blocks.retain(|b| !b.by_budget);
        }
        self.blocks.retain(|_, blocks| !blocks.is_empty());
    }

    /// Whether this arrival is an early call (counted): inside a block, past the grace after
    /// the 429 that started it.
    pub fn note_arrival(&mut self, credential: &str, arrival: Instant) -> bool {
        let grace = self.in_flight_grace;
        let early = self.blocks.get(credential).is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| arrival < b.until && arrival > later(b.answered_at, grace))
        });
        if early {
            self.early_calls += 1;
        }
        early
    }

    /// The 429 for a call its credential may not make now; otherwise the call is counted in the
    /// budget's window (when `budgeted`). A refusal never extends a block it answers.
    pub fn admit(&mut self, credential: &str, budgeted: bool, now: Instant) -> Option<ApiError> {
        self.prune(credential, now);
        let enforce_all = self.block_on_rate_limit;
        let enforced = self.blocks.get(credential).and_then(|blocks| {
            let enforced = blocks.iter().filter(|b| b.by_budget || enforce_all);
            let until = enforced.clone().map(|b| b.until).max()?;
            Some((until, enforced.clone().any(|b| b.by_budget)))
        });
        if let Some((until, by_budget)) = enforced {
            if by_budget {
                self.budget_refusals += 1;
            }
            let left = ceil_secs(until.saturating_duration_since(now)).max(1);
            return Some(ApiError::rate_limited(left));
        }
        let budget = self.budget.filter(|_| budgeted)?;
        let window = self.windows.entry(credential.to_string()).or_default();
        if window.len() >= budget.requests as usize {
            self.budget_refusals += 1;
            self.blocks
                .entry(credential.to_string())
                .or_default()
                .push(Block {
                    answered_at: now,
                    until: later(now, budget.block),
                    by_budget: true,
                });
            return Some(ApiError::rate_limited(ceil_secs(budget.block)));
        }
        window.push_back(now);
        None
    }

    /// Starts the block a 429 with `retry-after: retry_after_secs` announces.
    pub fn rate_limited(&mut self, credential: &str, retry_after_secs: u64, answered_at: Instant) {
        let until = later(answered_at, Duration::from_secs(retry_after_secs));
        self.blocks
            .entry(credential.to_string())
            .or_default()
            .push(Block {
                answered_at,
                until,
                by_budget: false,
            });
    }

    /// The `Ratelimit` and `Ratelimit-Policy` headers Cloudflare sends with every answer to a
    /// budgeted credential; `t` is the seconds until the budget next frees a request (the end
    /// of a budget block, during one).
    pub fn headers(
        &mut self,
        credential: &str,
        now: Instant,
    ) -> Option<[(&'static str, String); 2]> {
        let budget = self.budget.filter(|_| self.budget_headers)?;
        self.prune(credential, now);
        let blocked_until = self
            .blocks
            .get(credential)
            .and_then(|blocks| blocks.iter().filter(|b| b.by_budget).map(|b| b.until).max());
        let (left, reset) = match blocked_until {
            Some(until) => (0, ceil_secs(until.saturating_duration_since(now))),
            None => {
                let window = self.windows.get(credential);
                let counted = window.map_or(0, VecDeque::len);
                let oldest = window.and_then(|w| w.front().copied());
                let reset = oldest.map_or(0, |at| {
                    ceil_secs(later(at, budget.window).saturating_duration_since(now))
                });
                ((budget.requests as usize).saturating_sub(counted), reset)
            }
        };
        Some([
            ("ratelimit", format!("\"default\";r={left};t={reset}")),
            (
                "ratelimit-policy",
                format!(
                    "\"default\";q={};w={}",
                    budget.requests,
                    ceil_secs(budget.window)
                ),
            ),
        ])
    }

    /// Forgets the credential's blocks that ended and the requests that left its window.
    fn prune(&mut self, credential: &str, now: Instant) {
        if let Some(blocks) = self.blocks.get_mut(credential) {
            blocks.retain(|b| b.until > now);
            if blocks.is_empty() {
                self.blocks.remove(credential);
            }
        }
        let span = self.budget.map(|b| b.window).unwrap_or_default();
        if let Some(window) = self.windows.get_mut(credential) {
            while window.front().is_some_and(|at| later(*at, span) <= now) {
                window.pop_front();
            }
        }
    }
}

/// `at + d`, saturating far in the future instead of overflowing on absurd durations.
fn later(at: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    at.checked_add(d)
        .or_else(|| at.checked_add(CENTURY))
        .unwrap_or(at)
}

/// Whole seconds, rounded up, so a client waiting that long is never early.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
