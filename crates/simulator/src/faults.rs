//! Fault injection: errors, rate limits, latency, failures after commit and dropped connections.
//!
//! Faults are armed per operation ([`crate::Simulator::inject`]) or on a wider target
//! ([`crate::Simulator::inject_on`]); a request is judged by its operation's faults first, then
//! by each matching targeted rule in the order armed. The first rule that rejects the call
//! decides its answer (later rules are not consulted, so their counted faults stay armed); when
//! none rejects, the first rule with an after-apply fault decides how the applied call ends.
//! Latencies of every matching rule add up. Within one rule the kinds are consulted in this
//! order: `drop_next`, `rate_limit_next`, `fail_next`, `fail_after`, `rate_limit_rate`,
//! `error_rate`, `error_mix`; then, after the effect, `drop_after_apply`, `fail_after_apply`.
use std::time::Duration;

use http::StatusCode;
use rand::{Rng, rngs::StdRng};

use super::envelope::ApiError;

/// A fault to inject; kinds combine on one target, a second fault of one kind replaces the first.
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
    ErrorMix {
        probability: f64,
        statuses: Vec<u16>,
    },
    FailNext {
        remaining: u32,
        status: u16,
    },
    RateLimitNext {
        remaining: u32,
        retry_after_secs: u64,
    },
    RateLimitRate {
        probability: f64,
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
    DropNext {
        remaining: u32,
    },
    DropAfterApply {
        remaining: u32,
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

    /// Each call fails, without effect, with the given probability and a status drawn uniformly
    /// from `statuses` (both draws from the seedable RNG); an empty list draws 500.
    pub fn error_mix(probability: f64, statuses: &[u16]) -> Self {
        Fault {
            kind: FaultKind::ErrorMix {
                probability: probability.clamp(0.0, 1.0),
                statuses: statuses.to_vec(),
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

    /// Each call answers 429, code 971, with `retry-after: retry_after_secs` with the given
    /// probability (drawn from the seedable RNG).
    pub fn rate_limit_rate(probability: f64, retry_after_secs: u64) -> Self {
        Fault {
            kind: FaultKind::RateLimitRate {
                probability: probability.clamp(0.0, 1.0),
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

    /// The next `n` calls get no answer: the connection is dropped before anything is applied.
    pub fn drop_next(n: u32) -> Self {
        Fault {
            kind: FaultKind::DropNext { remaining: n },
        }
    }

    /// The next `n` calls are applied, then their connection is dropped without an answer.
    pub fn drop_after_apply(n: u32) -> Self {
        Fault {
            kind: FaultKind::DropAfterApply { remaining: n },
        }
    }
}

/// How a faulted call ends instead of with the operation's own answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// An error envelope is answered.
    Answer(ApiError),
    /// The connection is dropped: the client gets no answer at all.
    Drop,
}

/// The faults armed on one target, at most one of each kind.
#[derive(Debug, Default, Clone)]
pub(crate) struct FaultSet {
    error_rate: Option<(f64, u16)>,
    error_mix: Option<(f64, Vec<u16>)>,
    fail_next: Option<(u32, u16)>,
    rate_limit_next: Option<(u32, u64)>,
    rate_limit_rate: Option<(f64, u64)>,
    latency: Option<Duration>,
    fail_after_apply: Option<(u32, u16)>,
    fail_after: Option<(u32, u16)>,
    drop_next: Option<(u32, ())>,
    drop_after_apply: Option<(u32, ())>,
}

/// What the faults decided for one call, drawn under the state lock.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    /// The sum of every matching rule's latency.
    pub latency: Duration,
    /// End the call this way instead of running the operation.
    pub reject: Option<Failure>,
    /// Run the operation, then end the call this way instead of with its result.
    pub after_apply: Option<Failure>,
}

impl FaultSet {
    pub fn add(&mut self, fault: Fault) {
        match fault.kind {
            FaultKind::ErrorRate {
                probability,
                status,
            } => self.error_rate = Some((probability, status)),
            FaultKind::ErrorMix {
                probability,
                statuses,
            } => self.error_mix = Some((probability, statuses)),
            FaultKind::FailNext { remaining, status } => self.fail_next = Some((remaining, status)),
            FaultKind::RateLimitNext {
                remaining,
                retry_after_secs,
            } => self.rate_limit_next = Some((remaining, retry_after_secs)),
            FaultKind::RateLimitRate {
                probability,
                retry_after_secs,
            } => self.rate_limit_rate = Some((probability, retry_after_secs)),
            FaultKind::Latency(d) => self.latency = Some(d),
            FaultKind::FailAfterApply { remaining, status } => {
                self.fail_after_apply = Some((remaining, status))
            }
            FaultKind::FailAfter { passing, status } => self.fail_after = Some((passing, status)),
            FaultKind::DropNext { remaining } => self.drop_next = Some((remaining, ())),
            FaultKind::DropAfterApply { remaining } => {
                self.drop_after_apply = Some((remaining, ()))
            }
        }
    }

    pub fn latency(&self) -> Duration {
        self.latency.unwrap_or_default()
    }

    /// Whether this call is refused before it runs; only the kinds consulted are consumed.
    pub fn reject(&mut self, rng: &mut StdRng) -> Option<Failure> {
        if take_one(&mut self.drop_next).is_some() {
            return Some(Failure::Drop);
        }
        if let Some(retry_after) = take_one(&mut self.rate_limit_next) {
            return Some(Failure::Answer(ApiError::rate_limited(retry_after)));
        }
        if let Some(status) = take_one(&mut self.fail_next) {
            return Some(Failure::Answer(fault_error(status)));
        }
        if let Some(status) = count_down(&mut self.fail_after) {
            return Some(Failure::Answer(fault_error(status)));
        }
        if let Some((probability, retry_after)) = self.rate_limit_rate
            && rng.random_bool(probability)
        {
            return Some(Failure::Answer(ApiError::rate_limited(retry_after)));
        }
        if let Some((probability, status)) = self.error_rate
            && rng.random_bool(probability)
        {
            return Some(Failure::Answer(fault_error(status)));
        }
        if let Some((probability, statuses)) = &self.error_mix
            && rng.random_bool(*probability)
        {
            let status = match statuses.len() {
                0 => 500,
                n => statuses.get(rng.random_range(0..n)).copied().unwrap_or(500),
            };
            return Some(Failure::Answer(fault_error(status)));
        }
        None
    }

    /// How an applied call ends, when one of the after-apply kinds is armed.
    pub fn after_apply(&mut self) -> Option<Failure> {
        if take_one(&mut self.drop_after_apply).is_some() {
            return Some(Failure::Drop);
        }
        take_one(&mut self.fail_after_apply).map(|status| Failure::Answer(fault_error(status)))
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

    /// The status a rejection answers, 0 for a dropped connection.
    fn status(failure: Option<Failure>) -> Option<u16> {
        failure.map(|f| match f {
            Failure::Answer(error) => error.status.as_u16(),
            Failure::Drop => 0,
        })
    }

    #[test]
    fn fail_next_counts_down_then_disarms() {
        let mut set = FaultSet::default();
        set.add(Fault::fail_next(2, 503));
        let mut rng = StdRng::seed_from_u64(1);
        let statuses: Vec<Option<u16>> = (0..3).map(|_| status(set.reject(&mut rng))).collect();
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
            assert_eq!(status(always.reject(&mut rng)), Some(500));
            assert_eq!(never.reject(&mut rng), None);
        }
    }

    #[test]
    fn error_rate_is_reproducible_with_a_seed() {
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut set = FaultSet::default();
            set.add(Fault::error_rate(0.5, 502));
            (0..32)
                .map(|_| set.reject(&mut rng).is_some())
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
        let rejected: Vec<bool> = (0..5).map(|_| set.reject(&mut rng).is_some()).collect();
        assert_eq!(rejected, [false, false, true, false, false]);
    }

    #[test]
    fn drop_next_comes_before_every_other_kind_and_leaves_them_armed() {
        let mut set = FaultSet::default();
        set.add(Fault::fail_next(1, 503));
        set.add(Fault::drop_next(1));
        let mut rng = StdRng::seed_from_u64(0);
        let statuses: Vec<Option<u16>> = (0..3).map(|_| status(set.reject(&mut rng))).collect();
        assert_eq!(statuses, vec![Some(0), Some(503), None]);
    }

    #[test]
    fn drop_after_apply_comes_before_fail_after_apply() {
        let mut set = FaultSet::default();
        set.add(Fault::fail_after_apply(1, 504));
        set.add(Fault::drop_after_apply(1));
        let ends: Vec<Option<u16>> = (0..3).map(|_| status(set.after_apply())).collect();
        assert_eq!(ends, vec![Some(0), Some(504), None]);
    }

    #[test]
    fn rate_limit_rate_one_always_answers_the_rate_limit_envelope() {
        let mut set = FaultSet::default();
        set.add(Fault::rate_limit_rate(1.0, 9));
        let mut rng = StdRng::seed_from_u64(0);
        for _ in 0..5 {
            assert_eq!(
                set.reject(&mut rng),
                Some(Failure::Answer(ApiError::rate_limited(9)))
            );
        }
    }

    #[test]
    fn an_empty_error_mix_draws_500() {
        let mut set = FaultSet::default();
        set.add(Fault::error_mix(1.0, &[]));
        let mut rng = StdRng::seed_from_u64(0);
        assert_eq!(status(set.reject(&mut rng)), Some(500));
    }
}
