//! Each tunnel's word at Cloudflare's edge and its cloudflared pods, read from the tunnels'
//! statuses when `/metrics` is scraped: `cftunnel_tunnel_edge_status` (1 for the word
//! `status.edge` holds) and `cftunnel_tunnel_connectors` (`state` ready or desired). Three
//! series per tunnel at most.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

const EDGE_HELP: &str = "The status Cloudflare's edge reports for each tunnel (healthy, degraded, down, inactive), 1 for the current one.";
const CONNECTORS_HELP: &str =
    "cloudflared pods of each tunnel: ready (a registered edge connection) and desired.";

/// One tunnel as its status says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EdgeSample {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub status: Option<String>,
    /// Ready and desired pods.
    pub pods: Option<(i32, i32)>,
}

/// What reads the samples (the tunnel stores) at scrape time.
pub(crate) type EdgeSource = Box<dyn Fn() -> Vec<EdgeSample> + Send + Sync>;

/// The two families: a [`Collector`] over the sources registered while they run.
#[derive(Clone, Default)]
pub(super) struct EdgeGauges {
    sources: Arc<Mutex<BTreeMap<u64, EdgeSource>>>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for EdgeGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeGauges").finish_non_exhaustive()
    }
}

impl EdgeGauges {
    fn sources(&self) -> MutexGuard<'_, BTreeMap<u64, EdgeSource>> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    pub(super) fn track(&self, source: EdgeSource) -> TrackedEdges {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.sources().insert(id, source);
        TrackedEdges {
            gauges: self.clone(),
            id,
        }
    }

    fn samples(&self) -> Vec<EdgeSample> {
        self.sources()
            .values()
            .flat_map(|source| source())
            .collect()
    }
}

impl Collector for EdgeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = self.samples();
        let mut family = encoder.encode_descriptor(
            "cftunnel_tunnel_edge_status",
            EDGE_HELP,
            None,
            MetricType::Gauge,
        )?;
        for s in &samples {
            if let Some(status) = &s.status {
                let labels = [
                    ("kind", s.kind),
                    ("namespace", s.namespace.as_str()),
                    ("name", s.name.as_str()),
                    ("status", status.as_str()),
                ];
                ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "cftunnel_tunnel_connectors",
            CONNECTORS_HELP,
            None,
            MetricType::Gauge,
        )?;
        for s in &samples {
            if let Some((ready, desired)) = s.pods {
                for (state, count) in [("ready", ready), ("desired", desired)] {
                    let labels = [
                        ("kind", s.kind),
                        ("namespace", s.namespace.as_str()),
                        ("name", s.name.as_str()),
                        ("state", state),
                    ];
                    ConstGauge::new(i64::from(count)).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

/// Unregisters a source when dropped (the edge health task holds it for its term).
#[derive(Debug)]
pub(crate) struct TrackedEdges {
    gauges: EdgeGauges,
    id: u64,
}

impl Drop for TrackedEdges {
    fn drop(&mut self) {
        self.gauges.sources().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text;

    #[test]
    fn each_tunnel_has_its_word_and_its_pods_while_the_source_lives() {
        let gauges = EdgeGauges::default();
        let tracked = gauges.track(Box::new(|| {
            vec![
                EdgeSample {
                    kind: "tunnel",
                    namespace: "shop".into(),
                    name: "edge".into(),
                    status: Some("down".into()),
                    pods: Some((0, 2)),
                },
                EdgeSample {
                    kind: "clustertunnel",
                    name: "shared".into(),
                    ..EdgeSample::default()
                },
            ]
        }));
        let render = || {
            let mut registry = Registry::default();
            gauges.register(&mut registry);
            let mut out = String::new();
            assert_eq!(text::encode(&mut out, &registry), Ok(()));
            out
        };
        let out = render();
        for line in [
            r#"cftunnel_tunnel_edge_status{kind="tunnel",namespace="shop",name="edge",status="down"} 1"#,
            r#"cftunnel_tunnel_connectors{kind="tunnel",namespace="shop",name="edge",state="ready"} 0"#,
            r#"cftunnel_tunnel_connectors{kind="tunnel",namespace="shop",name="edge",state="desired"} 2"#,
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line} missing from:\n{out}"
            );
        }
        assert!(!out.contains("shared"), "{out}");
        drop(tracked);
        let out = render();
        assert!(!out.contains("cftunnel_tunnel_edge_status{"), "{out}");
        assert!(
            out.contains("# TYPE cftunnel_tunnel_edge_status gauge"),
            "{out}"
        );
    }
}
