//! Progress over time: one sample a second of the first sync, written as CSV.
use std::fmt::Write as _;

/// Seconds since the first create, Ready tunnels, hostnames with their CNAME, and the
/// operator's resident memory then (when a peak happens says what it holds).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: f64,
    pub ready: usize,
    pub dns: usize,
    pub rss_kib: u64,
}

pub fn csv(samples: &[Sample]) -> String {
    let mut out = String::from("seconds,ready_tunnels,hostnames_with_dns,rss_mib\n");
    for s in samples {
        let _ = writeln!(
            out,
            "{:.1},{},{},{:.1}",
            s.at,
            s.ready,
            s.dns,
            s.rss_kib as f64 / 1024.0
        );
    }
    out
}
