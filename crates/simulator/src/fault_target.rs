//! Which requests a fault applies to, and the armed rules judged in order for each request.
use std::collections::HashMap;

use rand::rngs::StdRng;

use super::faults::{Fault, FaultPlan, FaultSet};
use super::operation::Operation;

/// The requests a fault applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTarget {
    /// Requests routed to this operation (what [`crate::Simulator::inject`] arms).
    Operation(Operation),
    /// Every request, unmatched routes included.
    All,
    /// Requests of any method but GET.
    Writes,
    /// GET requests.
    Reads,
    /// Requests whose path relative to the API base contains `contains` (case-sensitive) and,
    /// when `method` is given, whose method is that one.
    Path {
        method: Option<http::Method>,
        contains: String,
    },
}

/// The request facts a target is matched against.
pub(crate) struct Call<'a> {
    pub operation: Option<Operation>,
    pub method: &'a http::Method,
    /// Relative to the API base (`/zones/…`), as the router sees it.
    pub path: &'a str,
}

impl FaultTarget {
    fn matches(&self, call: &Call<'_>) -> bool {
        match self {
            FaultTarget::Operation(op) => call.operation == Some(*op),
            FaultTarget::All => true,
            FaultTarget::Writes => call.method != http::Method::GET,
            FaultTarget::Reads => call.method == http::Method::GET,
            FaultTarget::Path { method, contains } => {
                call.path.contains(contains.as_str())
                    && method.as_ref().is_none_or(|m| m == call.method)
            }
        }
    }
}

/// Every armed fault: per operation, then targeted rules in the order first armed.
#[derive(Debug, Default)]
pub(crate) struct FaultRules {
    by_operation: HashMap<Operation, FaultSet>,
    /// Arming a target already present adds to its rule, which keeps its place.
    targeted: Vec<(FaultTarget, FaultSet)>,
}

impl FaultRules {
    pub fn add(&mut self, target: FaultTarget, fault: Fault) {
        if let FaultTarget::Operation(op) = target {
            self.by_operation.entry(op).or_default().add(fault);
        } else if let Some((_, set)) = self.targeted.iter_mut().find(|(t, _)| *t == target) {
            set.add(fault);
        } else {
            let mut set = FaultSet::default();
            set.add(fault);
            self.targeted.push((target, set));
        }
    }

    pub fn clear(&mut self) {
        self.by_operation.clear();
        self.targeted.clear();
    }

    /// Judges one call: the first rejection wins, then the first after-apply fault; latencies add.
    pub fn plan(&mut self, call: &Call<'_>, rng: &mut StdRng) -> FaultPlan {
        let own = call.operation.and_then(|op| self.by_operation.get_mut(&op));
        let targeted = self
            .targeted
            .iter_mut()
            .filter(|(target, _)| target.matches(call))
            .map(|(_, set)| set);
        let mut matching: Vec<&mut FaultSet> = own.into_iter().chain(targeted).collect();
        let mut plan = FaultPlan {
            latency: matching.iter().map(|set| set.latency()).sum(),
            ..FaultPlan::default()
        };
        plan.reject = matching.iter_mut().find_map(|set| set.reject(rng));
        if plan.reject.is_none() {
            plan.after_apply = matching.iter_mut().find_map(|set| set.after_apply());
        }
        plan
    }
}
