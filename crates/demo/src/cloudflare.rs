//! What the simulated Cloudflare account holds after the demo: live tunnels, the DNS records
//! of the routed hostnames, the number of API calls.
use std::time::Duration;

use cftunnel_sim::{SimDnsRecord, Simulator};
use cftunnel_testenv::{TestEnvError, poll_until};

/// Hostnames the examples route, and so expect DNS records for (admin.example.com only once
/// its Access application exists).
const ROUTED: [&str; 5] = [
    "web.example.com",
    "api.example.com",
    "app.example.com",
    "admin.example.com",
    "blog.example.com",
];

/// Waits until every routed hostname has its CNAME; the zone's records then.
pub(crate) async fn routed_records(sim: &Simulator) -> Result<Vec<SimDnsRecord>, TestEnvError> {
    poll_until(
        "the DNS records of the routed hostnames",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let records = sim.dns_records("example.com");
            ROUTED
                .iter()
                .all(|h| {
                    records
                        .iter()
                        .any(|r| r.name == *h && r.record_type == "CNAME")
                })
                .then_some(records)
        },
    )
    .await
}

pub(crate) fn print(sim: &Simulator, dns: Result<Vec<SimDnsRecord>, TestEnvError>) {
    let live: Vec<String> = sim
        .tunnels()
        .into_iter()
        .filter(|t| t.deleted_at.is_none())
        .map(|t| format!("{} ({})", t.name, t.id))
        .collect();
    println!(
        "  Cloudflare (simulated): {} live tunnels: {}",
        live.len(),
        live.join(", ")
    );
    match dns {
        Ok(records) => {
            println!("  DNS records in example.com (simulated):");
            for r in records {
                println!("    {} {} {}", r.record_type, r.name, r.content);
            }
        }
        Err(e) => println!("  DNS records in example.com: not all there ({e})"),
    }
    println!("  Cloudflare API calls made: {}", sim.total_calls());
}
