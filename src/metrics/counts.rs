//! Gauges of things by one label, counted at scrape time from what the operator already holds:
//! `cftunnel_dns_problems{reason}` (hostnames whose DNS waits on a problem: a conflicting
//! record, the zone's quota, an error; read from the DNS syncs' view),
//! `cftunnel_access_applications{state}` (Access applications cftunnel keeps: `protecting` or
//! `retiring`) and `cftunnel_access_targets{reason}` (AccessPolicy targets by their reason:
//! `Ready`, `Pending`, `ApplicationConflict`, …; read from the AccessPolicy store). Label values
//! are reasons of the code, a dozen at most per family: the cardinality does not grow with the
//! number of tunnels.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// One family of counts by a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Counted {
    DnsProblems,
    AccessApplications,
    AccessTargets,
}

impl Counted {
    const ALL: [Counted; 3] = [
        Counted::DnsProblems,
        Counted::AccessApplications,
        Counted::AccessTargets,
    ];

    fn name(self) -> &'static str {
        match self {
            Counted::DnsProblems => "cftunnel_dns_problems",
            Counted::AccessApplications => "cftunnel_access_applications",
            Counted::AccessTargets => "cftunnel_access_targets",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Counted::DnsProblems => {
                "Hostnames whose DNS record waits on a problem, by reason (DNSConflict, QuotaExceeded, DNSError, DNSHeldByOtherCluster, ...)."
            }
            Counted::AccessApplications => {
                "Access applications cftunnel keeps, by state (protecting a hostname, or retiring once no tunnel checks them)."
            }
            Counted::AccessTargets => {
                "Targets of AccessPolicies by the reason of their status (Ready, Pending, ApplicationConflict, CloudflareError, ...)."
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Counted::DnsProblems | Counted::AccessTargets => "reason",
            Counted::AccessApplications => "state",
        }
    }
}

/// Reads one family's counts at scrape time.
pub(crate) type CountSource = Box<dyn Fn() -> BTreeMap<String, u64> + Send + Sync>;

type Sources = BTreeMap<(Counted, u64), CountSource>;

/// The families: a [`Collector`] over the sources registered while they run. A family is
/// served with its HELP and TYPE even while nothing counts into it.
#[derive(Clone, Default)]
pub(super) struct CountGauges {
    sources: Arc<Mutex<Sources>>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for CountGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountGauges").finish_non_exhaustive()
    }
}

impl CountGauges {
    fn sources(&self) -> MutexGuard<'_, Sources> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    pub(super) fn track(&self, family: Counted, source: CountSource) -> TrackedCounts {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.sources().insert((family, id), source);
        TrackedCounts {
            gauges: self.clone(),
            key: (family, id),
        }
    }

    /// One family's counts, summed over its sources.
    fn counts(&self, family: Counted) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for ((of, _), source) in self.sources().iter() {
            if *of == family {
                for (label, count) in source() {
                    *counts.entry(label).or_default() += count;
                }
            }
        }
        counts
    }
}

impl Collector for CountGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in Counted::ALL {
            let counts = self.counts(family);
            let mut encoded =
                encoder.encode_descriptor(family.name(), family.help(), None, MetricType::Gauge)?;
            for (value, count) in counts {
                let labels = [(family.label(), value.as_str())];
                ConstGauge::new(count).encode(encoded.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// Unregisters a source when dropped (at the end of the term of the task that holds it).
#[derive(Debug)]
pub(crate) struct TrackedCounts {
    gauges: CountGauges,
    key: (Counted, u64),
}

impl Drop for TrackedCounts {
    fn drop(&mut self) {
        self.gauges.sources().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text;

    fn render(gauges: &CountGauges) -> String {
        let mut registry = Registry::default();
        gauges.register(&mut registry);
        let mut out = String::new();
        assert_eq!(text::encode(&mut out, &registry), Ok(()));
        out
    }

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn each_family_sums_its_sources_while_they_live() {
        let gauges = CountGauges::default();
        let first = gauges.track(
            Counted::DnsProblems,
            Box::new(|| counts(&[("DNSConflict", 2), ("QuotaExceeded", 1)])),
        );
        let _second = gauges.track(
            Counted::DnsProblems,
            Box::new(|| counts(&[("DNSConflict", 1)])),
        );
        let _apps = gauges.track(
            Counted::AccessApplications,
            Box::new(|| counts(&[("protecting", 4)])),
        );
        let text = render(&gauges);
        for line in [
            "cftunnel_dns_problems{reason=\"DNSConflict\"} 3",
            "cftunnel_dns_problems{reason=\"QuotaExceeded\"} 1",
            "cftunnel_access_applications{state=\"protecting\"} 4",
            "# TYPE cftunnel_access_targets gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
        drop(first);
        let text = render(&gauges);
        assert!(
            text.lines()
                .any(|l| l == "cftunnel_dns_problems{reason=\"DNSConflict\"} 1"),
            "{text}"
        );
        assert!(!text.contains("{reason=\"QuotaExceeded\"}"), "{text}");
    }
}
