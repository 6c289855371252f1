//! Rate limit for log lines about refused requests: anyone who reaches the port can send bad
//! requests, and must not be able to fill the log with them.
//!
//! Per interval the first [`LINES_PER_INTERVAL`] refusals are logged as they come; the rest are
//! only counted (`cftunnel_admission_log_lines_suppressed_total`), and the first refusal after
//! the interval logs one summary line with the count of those left out.
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

/// Length of one interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Refusals logged one by one per interval.
pub const LINES_PER_INTERVAL: u64 = 5;

/// What the caller should log for one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogDecision {
    /// Log this refusal itself.
    pub log_this: bool,
    /// Refusals left out of the log in the interval that just ended (0: no summary due).
    pub suppressed_before: u64,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    logged: u64,
    suppressed: u64,
}

/// Counts refusals per interval and decides which get a line.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    interval: Duration,
    per_interval: u64,
    window: Mutex<Window>,
}

impl Default for LogLimiter {
    fn default() -> Self {
        Self::new(LOG_INTERVAL, LINES_PER_INTERVAL)
    }
}

impl LogLimiter {
    /// `per_interval` lines per `interval`.
    pub fn new(interval: Duration, per_interval: u64) -> Self {
        Self {
            interval,
            per_interval,
            window: Mutex::new(Window {
                started: Instant::now(),
                logged: 0,
                suppressed: 0,
            }),
        }
    }

    /// Records one refusal at `now`.
    pub fn record(&self, now: Instant) -> LogDecision {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let mut suppressed_before = 0;
        if now.saturating_duration_since(window.started) >= self.interval {
            suppressed_before = window.suppressed;
            *window = Window {
                started: now,
                logged: 0,
                suppressed: 0,
            };
        }
        let log_this = window.logged < self.per_interval;
        if log_this {
            window.logged += 1;
        } else {
            window.suppressed += 1;
        }
        LogDecision {
            log_this,
            suppressed_before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_lines_then_one_summary_per_interval() {
        let limiter = LogLimiter::new(Duration::from_secs(10), 3);
        let start = Instant::now();
        let decisions: Vec<LogDecision> = (0..100).map(|_| limiter.record(start)).collect();
        assert_eq!(decisions.iter().filter(|d| d.log_this).count(), 3);
        assert!(decisions.iter().all(|d| d.suppressed_before == 0));
        let next = limiter.record(start + Duration::from_secs(10));
        assert_eq!(
            next,
            LogDecision {
                log_this: true,
                suppressed_before: 97
            }
        );
        let after = limiter.record(start + Duration::from_secs(11));
        assert_eq!(after.suppressed_before, 0);
    }
}
