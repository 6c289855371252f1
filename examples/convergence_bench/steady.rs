//! The steady state after the restart (`--steady SECONDS`): nothing changes, so every call the
//! operator makes should be a drift check. Counts them by operation and writes (the report
//! shows any write), and gives their share of cftunnel's pace, over the whole window and over
//! its busiest budget window (sliding, one sample a second).
//!
//! After a restart every tunnel's first drift check is scheduled one jittered interval (±10 %)
//! from the moment it is first seen, so a window of 1.1 × `--drift-interval` plus a minute
//! sees every tunnel's check, bunched into the last fifth: the busiest case, not the average
//! one of an operator that has run for hours.
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cftunnel_cloudflare::Budget;
use cftunnel_sim::Simulator;

use super::{Operator, POLL, Phase};

pub struct Steady {
    pub window: Duration,
    pub phase: Phase,
    /// The most calls within any span of the pace's window.
    pub busiest: u64,
}

impl Steady {
    /// Calls of the whole window as a share of what the pace allows in it.
    pub fn share(&self, pace: Budget) -> f64 {
        let allowed = pace.requests as f64 * self.window.as_secs_f64() / pace.window.as_secs_f64();
        self.phase.total() as f64 / allowed.max(1.0)
    }

    /// The busiest span's calls as a share of the pace's budget.
    pub fn busiest_share(&self, pace: Budget) -> f64 {
        self.busiest as f64 / f64::from(pace.requests.max(1))
    }
}

/// Runs the operator untouched for `window`, counting from zero.
pub async fn observe(
    sim: &Simulator,
    client: &kube::Client,
    operator: &mut Operator,
    window: Duration,
    pace: Budget,
) -> anyhow::Result<Steady> {
    sim.reset_counters();
    let started = Instant::now();
    // (when, total calls then), for the sliding span of the pace's window.
    let mut recent: VecDeque<(Instant, u64)> = VecDeque::from([(started, 0)]);
    let mut busiest = 0;
    while started.elapsed() < window {
        tokio::time::sleep(POLL).await;
        operator.check()?;
        let now = Instant::now();
        let total = sim.total_calls();
        while recent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > pace.window)
        {
            recent.pop_front();
        }
        let oldest = recent.front().map_or(0, |(_, calls)| *calls);
        busiest = busiest.max(total.saturating_sub(oldest));
        recent.push_back((now, total));
    }
    Ok(Steady {
        window,
        phase: Phase::measure(sim, client, operator).await?,
        busiest,
    })
}
