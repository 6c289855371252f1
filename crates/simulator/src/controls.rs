//! Switches a test flips while the simulator runs: faults, rate-limit blocks, the request
//! budget, zone quotas. Each takes effect from the next request.
use std::time::Duration;

use rand::SeedableRng;

use super::{Fault, FaultTarget, Operation, RequestBudget, Simulator};

impl Simulator {
    /// Arms `fault` on the requests routed to `op`: `inject_on(FaultTarget::Operation(op), fault)`.
    pub fn inject(&self, op: Operation, fault: Fault) {
        self.inject_on(FaultTarget::Operation(op), fault);
    }

    /// Arms `fault` on the requests `target` matches; arming a target again adds to its rule
    /// (a second fault of one kind replaces the first) and keeps the rule's place in the order.
    pub fn inject_on(&self, target: FaultTarget, fault: Fault) {
        self.lock().faults.add(target, fault);
    }

    /// Disarms every fault, per operation and targeted.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Reseeds the RNG behind the probabilistic faults (it starts seeded with 0, so runs repeat).
    pub fn seed_faults(&self, seed: u64) {
        self.lock().rng = rand::rngs::StdRng::seed_from_u64(seed);
    }

    /// When on, a credential blocked by a 429 it was answered is refused with 429/971 (and
    /// `retry-after` = the block's remaining whole seconds, at least 1) until the block ends, as
    /// Cloudflare does; those refusals do not extend the block. Off by default, so that counted
    /// 429 faults stay exact; blocks are tracked either way, for [`Simulator::early_calls`].
    pub fn set_block_on_rate_limit(&self, on: bool) {
        self.lock().limits.block_on_rate_limit = on;
    }

    /// How long after a 429 was answered a request of the same credential still counts as
    /// already on the wire, hence not early (default 100 ms).
    pub fn set_in_flight_grace(&self, grace: Duration) {
        self.lock().limits.in_flight_grace = grace;
    }

    /// Requests that arrived while a block of their credential was in force, later than the
    /// in-flight grace after the 429 that started it was answered: the client sent them when it
    /// could have known it had to wait. Counted whether or not blocks are enforced.
    pub fn early_calls(&self) -> u64 {
        self.lock().limits.early_calls
    }

    /// Sets the request budget per authenticated credential (`None` for none, the default);
    /// every window starts afresh and the blocks the previous budget imposed are lifted.
    pub fn set_budget(&self, budget: Option<RequestBudget>) {
        self.lock().limits.set_budget(budget);
    }

    /// Whether answers to a budgeted credential carry the `Ratelimit` and `Ratelimit-Policy`
    /// headers (the default) or not, for a client that must keep within the budget alone.
    pub fn set_budget_headers(&self, on: bool) {
        self.lock().limits.budget_headers = on;
    }

    pub fn budget(&self) -> Option<RequestBudget> {
        self.lock().limits.budget()
    }

    /// The 429s the budget answered, refusals during its blocks included.
    pub fn budget_refusals(&self) -> u64 {
        self.lock().limits.budget_refusals
    }

    /// Sets the most records the zone may hold (`None` for no quota); false for an unknown zone.
    pub fn set_zone_record_quota(&self, zone_name: &str, quota: Option<usize>) -> bool {
        let mut state = self.lock();
        let Some(zone) = state
            .zones
            .iter_mut()
            .find(|z| z.name.eq_ignore_ascii_case(zone_name.trim_end_matches('.')))
        else {
            return false;
        };
        zone.record_quota = quota;
        true
    }

    /// Overrides every zone's DNS batch limit (`None` goes back to the plans' 200 and 3,500).
    pub fn set_batch_limit(&self, limit: Option<usize>) {
        self.lock().batch_limit = limit;
    }
}
