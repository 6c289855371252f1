//! The results as Markdown, and the files of `--out-dir`.
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use cftunnel_cloudflare::{Budget, Pace};
use cftunnel_sim::RequestBudget;

use super::admission::Admission;
use super::first_sync::FirstSync;
use super::single_route::SingleRoute;
use super::steady::Steady;
use super::svg::{Chart, render};
use super::{Args, Phase, Plan, breakdown, budget, samples};

/// The measured phases after the first sync.
pub struct Phases<'a> {
    pub first: &'a Phase,
    pub restart: &'a Phase,
    pub steady: Option<&'a Steady>,
    pub single: &'a SingleRoute,
    pub admission: &'a Admission,
}

pub struct Budgets {
    /// What the simulator enforced, if anything.
    pub sim: Option<RequestBudget>,
    /// cftunnel's `--cloudflare-budget`.
    pub pace: Budget,
}

/// The floors: from the calls the run made until converged, and from the least calls.
struct Floors {
    made: (u64, Duration),
    minimum: (u64, Duration),
}

impl Floors {
    fn new(sync: &FirstSync, pace: Budget) -> Floors {
        let minimum = budget::minimum_calls(sync.tunnels, sync.hostnames, sync.pushed.is_some());
        Floors {
            made: (
                sync.calls_to_converge,
                budget::floor(sync.calls_to_converge, pace),
            ),
            minimum: (minimum, budget::floor(minimum, pace)),
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mib(kib: u64) -> u64 {
    kib / 1024
}

pub fn report(
    args: &Args,
    tunnels: usize,
    routes: usize,
    sync: &FirstSync,
    phases: &Phases,
    budgets: &Budgets,
) -> String {
    let (first, restart) = (phases.first, phases.restart);
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "\n| phase | tunnels | routes | all Ready | all DNS records | Cloudflare calls (writes) | 429s | extra rollouts | operator CPU | operator peak RSS |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        w,
        "| first convergence | {tunnels} | {routes} | {:.0} s | {:.0} s | {} ({}) | {} | {} | {:.1} s | {} MiB |",
        secs(sync.ready),
        secs(sync.dns),
        first.total(),
        first.writes(),
        first.refusals,
        first.rollouts,
        first.cpu_seconds,
        mib(first.peak_rss_kib)
    );
    let _ = writeln!(
        w,
        "| restart | {tunnels} | {routes} | – | – | {} ({}) | {} | {} | {:.1} s | {} MiB |",
        restart.total(),
        restart.writes(),
        restart.refusals,
        restart.rollouts,
        restart.cpu_seconds,
        mib(restart.peak_rss_kib)
    );
    if let Some(steady) = phases.steady {
        let p = &steady.phase;
        let _ = writeln!(
            w,
            "| steady, {:.0} s after the restart | {tunnels} | {routes} | – | – | {} ({}) | {} | {} | {:.1} s | {} MiB |",
            secs(steady.window),
            p.total(),
            p.writes(),
            p.refusals,
            p.rollouts,
            p.cpu_seconds,
            mib(p.peak_rss_kib)
        );
    }

    let pace = Pace::within(budgets.pace);
    let floors = Floors::new(sync, budgets.pace);
    let _ = writeln!(
        w,
        "\nFloor at cftunnel's pace ({} per {} s: a burst of {}, then {:.2}/s); target 1.3 × floor + 120 s:\n",
        budgets.pace.requests,
        budgets.pace.window.as_secs(),
        pace.burst,
        pace.per_second()
    );
    let converged = sync
        .ready
        .max(sync.dns)
        .max(sync.pushed.unwrap_or_default());
    let _ = writeln!(
        w,
        "calls ÷ floor: {:.2} ({} ÷ {}); converged ÷ (floor ÷ rate): {:.2} ({:.0} s ÷ {:.0} s)\n",
        floors.made.0 as f64 / floors.minimum.0.max(1) as f64,
        floors.made.0,
        floors.minimum.0,
        secs(converged) / secs(floors.minimum.1).max(1.0),
        secs(converged),
        secs(floors.minimum.1)
    );
    let _ = writeln!(
        w,
        "| calls needed | calls | floor | target | all Ready | all DNS records |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for (what, (calls, floor)) in [
        (
            "made until all Ready and all DNS (429s left out)",
            floors.made,
        ),
        (
            "floor (`cftunnel_policy::cost`: a create per tunnel, a push per remote tunnel, a batch per 200 record writes, the zone and record lists)",
            floors.minimum,
        ),
    ] {
        let target = budget::target(floor);
        let verdict = |d: Duration| match d <= target {
            true => format!("{:.0} s (within)", secs(d)),
            false => format!("{:.0} s (over by {:.0} s)", secs(d), secs(d - target)),
        };
        let _ = writeln!(
            w,
            "| {what} | {calls} | {:.0} s | {:.0} s | {} | {} |",
            secs(floor),
            secs(target),
            verdict(sync.ready),
            verdict(sync.dns)
        );
    }
    let _ = writeln!(
        w,
        "\nobjects created in {:.0} s; routes in status after {:.0} s",
        secs(sync.created),
        secs(sync.routed)
    );
    match budgets.sim {
        Some(b) => {
            let _ = writeln!(
                w,
                "simulator budget: {} per {} s per token, {} s block",
                b.requests,
                b.window.as_secs(),
                b.block.as_secs()
            );
        }
        None => {
            let _ = writeln!(w, "simulator budget: none");
        }
    }
    if let Some(p) = &sync.probes {
        let _ = writeln!(
            w,
            "probes after {:.0} s: `late` Ready with its DNS records {:.1} s later; `gone` ({}) deleted at Cloudflare {:.1} s later",
            secs(p.at),
            secs(p.late_ready),
            p.gone,
            secs(p.gone_deleted)
        );
    }
    let single = phases.single;
    let _ = writeln!(
        w,
        "one route added at rest ({}): its CNAME after {:.1} s{}; its calls: {}",
        single.hostname,
        secs(single.dns),
        single
            .pushed
            .map(|p| format!(", in the pushed configuration after {:.1} s", secs(p)))
            .unwrap_or_default(),
        match single.calls.is_empty() {
            true => "none".to_string(),
            false => breakdown(&single.calls),
        }
    );
    let _ = writeln!(
        w,
        "operator resident at rest: {} MiB once the restart settled, {} MiB after the route",
        mib(single.resident_kib.0),
        mib(single.resident_kib.1)
    );
    let _ = writeln!(
        w,
        "DNS write requests: first convergence {}, restart {}",
        first.dns_writes(),
        restart.dns_writes()
    );
    if let Some(pushed) = sync.pushed {
        let _ = writeln!(
            w,
            "configuration PUTs: first convergence {} (every route pushed after {:.0} s), restart {}",
            first.put_configurations(),
            secs(pushed),
            restart.put_configurations()
        );
    }
    let _ = writeln!(
        w,
        "calls per route: first convergence {:.2}, restart {:.2}",
        first.total() as f64 / routes.max(1) as f64,
        restart.total() as f64 / routes.max(1) as f64
    );
    let _ = writeln!(w, "first convergence calls: {}", first.breakdown());
    let _ = writeln!(w, "restart calls: {}", restart.breakdown());
    if let Some(steady) = phases.steady {
        let _ = writeln!(
            w,
            "steady state ({:.0} s, drift checks only): calls {}; {:.1} % of the pace over the window, {:.1} % in its busiest {} s ({} calls)",
            secs(steady.window),
            steady.phase.breakdown(),
            100.0 * steady.share(budgets.pace),
            100.0 * steady.busiest_share(budgets.pace),
            budgets.pace.window.as_secs(),
            steady.busiest
        );
    }
    w.push_str(&phases.admission.table());
    let _ = writeln!(
        w,
        "({} namespaces × {} tunnels × {} routes, configSource {}, routes as {}{})",
        args.namespaces,
        args.tunnels_per_namespace,
        args.routes_per_tunnel,
        args.config_source,
        args.routes_as,
        if args.probes { ", probes" } else { "" }
    );
    out
}

/// `results.md`, `samples.csv` and `convergence.svg` in `dir`.
pub fn write_outputs(
    dir: &Path,
    args: &Args,
    plan: &Plan,
    sync: &FirstSync,
    budgets: &Budgets,
    results: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("results.md"), results)?;
    std::fs::write(dir.join("samples.csv"), samples::csv(&sync.samples))?;
    let floors = Floors::new(sync, budgets.pace);
    let budget = match budgets.sim {
        Some(b) => format!("simulator budget {}/{} s", b.requests, b.window.as_secs()),
        None => "no simulator budget".into(),
    };
    let title = format!(
        "{} tunnels, {} routes as {}; {budget}; cftunnel pace {}/{} s",
        plan.tunnel_count(),
        plan.hostnames.len(),
        args.routes_as,
        budgets.pace.requests,
        budgets.pace.window.as_secs()
    );
    let mut marks = vec![
        (
            secs(floors.made.1),
            format!(
                "floor: {} calls made ÷ pace = {:.0} s",
                floors.made.0,
                secs(floors.made.1)
            ),
            "#d62728",
            false,
        ),
        (
            secs(floors.minimum.1),
            format!(
                "floor of the minimum {} calls = {:.0} s",
                floors.minimum.0,
                secs(floors.minimum.1)
            ),
            "#ff7f0e",
            true,
        ),
    ];
    if let Some(p) = &sync.probes {
        marks.push((secs(p.at), "probes (late, gone)".into(), "#7f7f7f", true));
    }
    let chart = Chart {
        title: &title,
        tunnels: sync.tunnels,
        hostnames: sync.hostnames,
        marks,
    };
    std::fs::write(dir.join("convergence.svg"), render(&sync.samples, &chart))?;
    Ok(())
}
