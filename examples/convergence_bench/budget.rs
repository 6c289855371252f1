//! Budgets: the simulator's (Cloudflare's enforcement), cftunnel's pace within its own, the
//! floor that pace sets, and the operator's CPU time.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cftunnel_cloudflare::{Budget, Pace};
use cftunnel_policy::cost::{self, Limits, Work, ZoneWork};
use cftunnel_sim::RequestBudget;

/// cftunnel's default `--cloudflare-budget`.
pub const CFTUNNEL_DEFAULT: Budget = Budget {
    requests: 900,
    window: Duration::from_secs(300),
};

/// `default` (Cloudflare's 1,200 per 300 s, blocked 300 s) or `N/SECONDS` (blocked for the
/// window).
pub fn parse_sim_budget(text: &str) -> anyhow::Result<RequestBudget> {
    if text == "default" {
        return Ok(RequestBudget::default());
    }
    let (requests, window) = parse_pair(text, false)?;
    Ok(RequestBudget {
        requests,
        window,
        block: window,
    })
}

/// cftunnel's `REQUESTS/WINDOW`, the window in seconds or with an `s`, `m` or `h` suffix.
pub fn parse_cftunnel_budget(text: &str) -> anyhow::Result<Budget> {
    let (requests, window) = parse_pair(text, true)?;
    Ok(Budget { requests, window })
}

fn parse_pair(text: &str, units: bool) -> anyhow::Result<(u32, Duration)> {
    let usage = || format!("expected REQUESTS/SECONDS (e.g. 1200/300), not {text:?}");
    let (requests, window) = text.split_once('/').with_context(usage)?;
    let requests: u32 = requests.trim().parse().with_context(usage)?;
    let window = window.trim();
    let (digits, scale) = match window.char_indices().last() {
        Some((i, 's')) if units => (&window[..i], 1),
        Some((i, 'm')) if units => (&window[..i], 60),
        Some((i, 'h')) if units => (&window[..i], 3600),
        _ => (window, 1),
    };
    let seconds: u64 = digits.parse().with_context(usage)?;
    if requests == 0 || seconds == 0 {
        bail!(usage());
    }
    Ok((requests, Duration::from_secs(seconds * scale)))
}

/// The least time `calls` take at cftunnel's pace within `budget`: its burst at once, the rest
/// at the steady rate.
pub fn floor(calls: u64, budget: Budget) -> Duration {
    let pace = Pace::within(budget);
    let paced = calls.saturating_sub(u64::from(pace.burst));
    Duration::from_secs_f64(paced as f64 / pace.per_second())
}

/// The least calls a first sync needs, by the operator's own cost model
/// ([`cftunnel_policy::cost`]): the benchmark's one account and one empty zone, every tunnel
/// created (and pushed when `remote`), every hostname with its `_managed` TXT.
pub fn minimum_calls(tunnels: usize, hostnames: usize, remote: bool) -> u64 {
    let tunnels = tunnels as u64;
    let work = Work {
        accounts: 1,
        tunnels_created: tunnels,
        tunnels_pushed: if remote { tunnels } else { 0 },
        zones: vec![ZoneWork {
            hostnames: hostnames as u64,
            txt_records: true,
            held: 0,
        }],
    };
    cost::floor(&work, Limits::default()).total()
}

/// The time by which a converging run is on target: 1.3 × floor + 120 s.
pub fn target(floor: Duration) -> Duration {
    floor.mul_f64(1.3) + Duration::from_secs(120)
}

/// utime + stime of a process, from `/proc/PID/stat` (clock ticks of 1/100 s, Linux's
/// `USER_HZ`).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command (which may hold spaces), from the third: state, ppid, …
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("reading /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the command.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .context("a short /proc/PID/stat")?
            .parse::<u64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse() {
        assert_eq!(
            parse_sim_budget("default").ok(),
            Some(RequestBudget::default())
        );
        assert!(parse_sim_budget("60/0").is_err());
        let b = parse_cftunnel_budget("900/5m").ok();
        assert_eq!(b, Some(CFTUNNEL_DEFAULT));
    }
}
