//! Heap of the route model at the convergence benchmark's shapes, without a cluster: a world of
//! N namespaces × T tunnels × R routes (per tunnel one TunnelBinding with R/2 subjects, each
//! naming its own Service, and R/2 labelled Services), as `--namespaces N
//! --tunnels-per-namespace T --routes-per-tunnel R` creates. A counting allocator reports the
//! bytes the world holds, the peak while `compute_routes` runs, what the table keeps, and the
//! DNS task's part of it (`dns_only`).
//!
//! Run: `cargo run --release --example route_memory_bench -- [N T R]` (default 100 10 10).
use std::sync::Arc;

use cftunnel_policy::routes::{RouteWorld, compute_routes};
use cftunnel_policy::rules::facts::{link_account_zones, tunnel_facts};
use cftunnel_types::ServicePorts;
use cftunnel_types::names::{LABEL_EXPOSE_TUNNEL, service_annotations};
use cftunnel_types::{Tunnel, TunnelBinding, TunnelKind};
use peak_alloc::PeakAlloc;
use serde_json::json;

/// The system allocator, counting the bytes live and the most live since the last reset.
#[global_allocator]
static GLOBAL: PeakAlloc = PeakAlloc;

const ZONE: &str = "bench.example.com";

fn live() -> usize {
    GLOBAL.current_usage()
}

fn reset_peak() {
    GLOBAL.reset_peak_usage();
}

fn peak_live() -> usize {
    GLOBAL.peak_usage()
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn world(namespaces: usize, tunnels: usize, routes: usize) -> anyhow::Result<RouteWorld> {
    let mut world = RouteWorld::default();
    let created = "2026-12-05T00:00:00Z";
    for n in 0..namespaces {
        let ns = format!("bench-{n}");
        for t in 0..tunnels {
            let name = format!("t{t}");
            let tunnel: Tunnel = serde_json::from_value(json!({
                "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"newTunnel": {"name": format!("{ns}-{name}")},
                    "cloudflare": {"domain": ZONE, "secret": "cloudflare", "accountId": "a1"}}
            }))?;
            world
                .tunnels
                .push(tunnel_facts(TunnelKind::Tunnel, &ns, &name, &tunnel.spec));
            let mut subjects = Vec::new();
            for k in 0..routes {
                let service = format!("{name}-{}{k}", if k < routes / 2 { "b" } else { "l" });
                let hostname = format!("{ns}-{service}.{ZONE}");
                let uid = format!("uid-{ns}-{service}");
                let mut metadata = json!({"name": service, "namespace": ns, "uid": uid,
                    "creationTimestamp": created});
                if k < routes / 2 {
                    subjects.push(json!({"name": service, "spec": {"fqdn": hostname}}));
                } else {
                    metadata["labels"] = json!({LABEL_EXPOSE_TUNNEL: name});
                    metadata["annotations"] = json!({service_annotations::HOSTNAME: hostname});
                }
                let svc: ServicePorts = serde_json::from_value(json!({
                    "metadata": metadata,
                    "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
                }))?;
                world.services.push(Arc::new(svc));
            }
            let binding: TunnelBinding = serde_json::from_value(json!({
                "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
                "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
                    "creationTimestamp": created},
                "subjects": subjects,
                "tunnelRef": {"kind": "Tunnel", "name": name}
            }))?;
            world.bindings.push(Arc::new(binding));
        }
    }
    link_account_zones(&mut world.tunnels);
    Ok(world)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let (n, t, r) = match args[..] {
        [] => (100, 10, 10),
        [n, t, r] => (n, t, r),
        _ => anyhow::bail!("usage: route_memory_bench [NAMESPACES TUNNELS ROUTES]"),
    };
    let before = live();
    let world = world(n, t, r)?;
    let world_bytes = live() - before;

    reset_peak();
    let base = live();
    let table = compute_routes(&world);
    let peak = peak_live() - base;
    let kept = live() - base;

    reset_peak();
    let base = live();
    let dns = table.dns_only(None);
    let dns_bytes = live() - base;

    reset_peak();
    let base = live();
    let mut again = compute_routes(&world);
    again.share_unchanged(&table);
    let shared_kept = live() - base;
    let second_peak = peak_live() - base;

    let routes: usize = table.tunnels.values().map(|t| t.routes.len()).sum();
    println!("{} tunnels, {routes} routes served", n * t);
    println!("| what | MB | bytes per route |");
    println!("|---|---|---|");
    for (what, bytes) in [
        ("world (objects as parsed)", world_bytes),
        ("compute_routes peak", peak),
        ("table kept", kept),
        ("dns_only kept", dns_bytes),
        ("second table, peak while computed", second_peak),
        ("second table kept after share_unchanged", shared_kept),
    ] {
        println!(
            "| {what} | {:.2} | {:.0} |",
            mb(bytes),
            bytes as f64 / routes.max(1) as f64
        );
    }
    drop((dns, again));
    Ok(())
}
