//! Fault injection: per-operation errors, rate limits, latency and failures after commit.
use std::time::Duration;

use http::StatusCode;
use rand::{Rng, rngs::StdRng};

use super::envelope::ApiError;

/// A fault to inject on one operation; kinds combine, a second fault of one kind replaces the first.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    kind: FaultKind,
}

#[derive(Debug, Clone, PartialEq)]
enum FaultKind {
    ErrorRate {
        probability: f64,
        status: u16,
    },
    FailNext {
        remaining: u32,
        status: u16,
    },
    RateLimitNext {
        remaining: u32,
        retry_after_secs: u64,
    },
    Latency(Duration),
    FailAfterApply {
        remaining: u32,
        status: u16,
    },
    FailAfter {
        passing: u32,
        status: u16,
    },
}

impl Fault {
    /// Each call fails with `status` with the given probability (drawn from the seedable RNG).
    pub fn error_rate(probability: f64, status: u16) -> Self {
        Fault {
            kind: FaultKind::ErrorRate {
                probability: probability.clamp(0.0, 1.0),
                status,
            },
        }
    }

    /// The next `n` calls fail with `status` without any effect.
    pub fn fail_next(n: u32, status: u16) -> Self {
        Fault {
            kind: FaultKind::FailNext {
                remaining: n,
                status,
            },
        }
    }

    /// The next `n` calls answer 429, code 971, with `retry-after: retry_after_secs`.
    pub fn rate_limit_next(n: u32, retry_after_secs: u64) -> Self {
        Fault {
            kind: FaultKind::RateLimitNext {
                remaining: n,
                retry_after_secs,
            },
        }
    }

    /// Each call waits `d` (tokio time, so paused-clock tests see it instantly).
    pub fn latency(d: Duration) -> Self {
        Fault {
            kind: FaultKind::Latency(d),
        }
    }

    /// The next `passing` calls go through, then one fails with `status` without any effect (a
    /// later write of a sequence failing, e.g. the TXT after its CNAME).
    pub fn fail_after(passing: u32, status: u16) -> Self {
        Fault {
            kind: FaultKind::FailAfter { passing, status },
        }
    }

    /// The next `n` calls apply their effect, then answer `status` (a commit followed by a lost reply).
    pub fn fail_after_apply(n: u32, status: u16) -> Self {
        Fault {
            kind: FaultKind::FailAfterApply {
                remaining: n,
                status,
            },
        }
    }
}

/// The faults armed on one operation, at most one of each kind.
#[derive(Debug, Default, Clone)]
pub(crate) struct FaultSet {
    error_rate: Option<(f64, u16)>,
    fail_next: Option<(u32, u16)>,
    rate_limit_next: Option<(u32, u64)>,
    latency: Option<Duration>,
    fail_after_apply: Option<(u32, u16)>,
    fail_after: Option<(u32, u16)>,
}

/// What the faults decided for one call, drawn under the state lock.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    pub latency: Option<Duration>,
    /// Answer this instead of running the operation.
    pub reject: Option<ApiError>,
    /// Run the operation, then answer this instead of its result.
    pub fail_after_apply: Option<ApiError>,
}

impl FaultSet {
    pub fn add(&mut self, fault: Fault) {
        match fault.kind {
            FaultKind::ErrorRate {
                probability,
                status,
            } => self.error_rate = Some((probability, status)),
            FaultKind::FailNext { remaining, status } => self.fail_next = Some((remaining, status)),
            FaultKind::RateLimitNext {
                remaining,
                retry_after_secs,
            } => self.rate_limit_next = Some((remaining, retry_after_secs)),
            FaultKind::Latency(d) => self.latency = Some(d),
            FaultKind::FailAfterApply { remaining, status } => {
                self.fail_after_apply = Some((remaining, status))
            }
            FaultKind::FailAfter { passing, status } => self.fail_after = Some((passing, status)),
        }
    }

    /// Decides this call's fate; counted faults are consumed even when an earlier kind wins.
    pub fn plan(&mut self, rng: &mut StdRng) -> FaultPlan {
        let mut plan = FaultPlan {
            latency: self.latency,
            ..FaultPlan::default()
        };
        if let Some(retry_after) = take_one(&mut self.rate_limit_next) {
            plan.reject = Some(ApiError::rate_limited(retry_after));
        } else if let Some(status) = take_one(&mut self.fail_next) {
            plan.reject = Some(fault_error(status));
        } else if let Some(status) = count_down(&mut self.fail_after) {
            plan.reject = Some(fault_error(status));
        } else if let Some((probability, status)) = self.error_rate
            && rng.random_bool(probability)
        {
            plan.reject = Some(fault_error(status));
        }
        if plan.reject.is_none()
            && let Some(status) = take_one(&mut self.fail_after_apply)
        {
            plan.fail_after_apply = Some(fault_error(status));
        }
        plan
    }
}

/// Counts one passing call down; the call after the last passing one gets the payload, once.
fn count_down<T: Copy>(slot: &mut Option<(u32, T)>) -> Option<T> {
    let (passing, payload) = (*slot)?;
    if passing == 0 {
        *slot = None;
        return Some(payload);
    }
    *slot = Some((passing - 1, payload));
    None
}

/// Consumes one unit of a counted fault, returning its payload while any remain.
fn take_one<T: Copy>(slot: &mut Option<(u32, T)>) -> Option<T> {
    let (remaining, payload) = (*slot)?;
    if remaining == 0 {
        *slot = None;
        return None;
    }
    *slot = if remaining > 1 {
        Some((remaining - 1, payload))
    } else {
        None
    };
    Some(payload)
}

/// The envelope Cloudflare's edge gives for a server-side failure of the given status.
pub(crate) fn fault_error(status: u16) -> ApiError {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status == StatusCode::TOO_MANY_REQUESTS {
        return ApiError::rate_limited(1);
    }
    let reason = status.canonical_reason().unwrap_or("Error");
    let code = if status.is_server_error() {
        10001
    } else {
        10000
    };
    ApiError::new(
        status,
        code,
        format!("Simulated fault: {} {reason}", status.as_u16()),
    )
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn fail_next_counts_down_then_disarms() {
        let mut set = FaultSet::default();
        set.add(Fault::fail_next(2, 503));
        let mut rng = StdRng::seed_from_u64(1);
        let statuses: Vec<Option<u16>> = (0..3)
            .map(|_| set.plan(&mut rng).reject.map(|e| e.status.as_u16()))
            .collect();
        assert_eq!(statuses, vec![Some(503), Some(503), None]);
    }

    #[test]
    fn error_rate_extremes_are_exact() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut always = FaultSet::default();
        always.add(Fault::error_rate(1.0, 500));
        let mut never = FaultSet::default();
        never.add(Fault::error_rate(0.0, 500));
        for _ in 0..20 {
            assert_eq!(always.plan(&mut rng).reject.map(|e| e.code), Some(10001));
            assert!(never.plan(&mut rng).reject.is_none());
        }
    }

    #[test]
    fn error_rate_is_reproducible_with_a_seed() {
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut set = FaultSet::default();
            set.add(Fault::error_rate(0.5, 502));
            (0..32)
                .map(|_| set.plan(&mut rng).reject.is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert!(draw(42).contains(&true) && draw(42).contains(&false));
    }

    #[test]
    fn a_429_status_becomes_the_rate_limit_envelope() {
        let error = fault_error(429);
        assert_eq!((error.code, error.retry_after), (971, Some(1)));
    }

    #[test]
    fn fail_after_lets_calls_pass_then_fails_one() {
        let mut set = FaultSet::default();
        set.add(Fault::fail_after(2, 500));
        let mut rng = StdRng::seed_from_u64(0);
        let rejected: Vec<bool> = (0..5)
            .map(|_| set.plan(&mut rng).reject.is_some())
            .collect();
        assert_eq!(rejected, [false, false, true, false, false]);
    }
}
