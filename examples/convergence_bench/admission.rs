//! The webhook's latency as kube-apiserver measures it: its own histogram
//! `apiserver_admission_webhook_admission_duration_seconds` (labels `name`, `operation`,
//! `rejected`, `type` = `validating` or `admit`), summed over cftunnel's webhooks (names ending
//! in `.cfargotunnel.com`), read from the API server's `/metrics` before and after a phase. The
//! histogram's buckets are the API server's (0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 25 s in
//! Kubernetes 1.37), so a quantile is interpolated within its bucket as PromQL's
//! `histogram_quantile` does: it says which bucket, not the exact figure.
//!
//! Two phases: the first sync (every object created while the operator converges), and at rest
//! (after the restart settled): [`REST_REQUESTS`] server-side dry-run creates of Tunnels,
//! TunnelBindings and labelled Services, which the API server admits through the webhooks like
//! any write but never stores, so the operator has nothing to do.
use std::collections::BTreeMap;

use anyhow::Context as _;
use cftunnel_types::TunnelBinding;
use cftunnel_types::names::{LABEL_EXPOSE_TUNNEL, service_annotations};
use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use super::{Plan, ZONE, object};

const FAMILY: &str = "apiserver_admission_webhook_admission_duration_seconds";
const OURS: &str = ".cfargotunnel.com";
/// Dry-run creates made at rest, a third of each kind.
pub const REST_REQUESTS: usize = 300;

/// One histogram: cumulative counts by upper bound, in order, and the total.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub buckets: BTreeMap<Bound, u64>,
    pub count: u64,
}

/// A bucket's upper bound, ordered (`+Inf` last).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound(pub f64);

impl Eq for Bound {}

impl PartialOrd for Bound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Histogram {
    /// What was observed after `before`.
    fn since(&self, before: &Histogram) -> Histogram {
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(le, n)| (*le, n.saturating_sub(*before.buckets.get(le).unwrap_or(&0))))
                .collect(),
            count: self.count.saturating_sub(before.count),
        }
    }

    /// The `q` quantile, interpolated linearly within its bucket from the bucket below's bound
    /// (0 for the first), as `histogram_quantile` does; `None` with no observation. In the
    /// `+Inf` bucket it is the highest finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = q * self.count as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for (Bound(le), cumulative) in &self.buckets {
            if *cumulative as f64 >= rank {
                if le.is_infinite() {
                    return Some(lower);
                }
                let inside = (*cumulative - below) as f64;
                let share = match inside > 0.0 {
                    true => (rank - below as f64) / inside,
                    false => 1.0,
                };
                return Some(lower + (le - lower) * share);
            }
            (lower, below) = (*le, *cumulative);
        }
        Some(lower)
    }
}

/// cftunnel's webhooks' histograms by `type` (`validating`, `admit`).
pub type Snapshot = BTreeMap<String, Histogram>;

/// Reads the API server's `/metrics` now.
pub async fn snapshot(client: &Client) -> anyhow::Result<Snapshot> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .context("reading kube-apiserver's /metrics")?;
    Ok(parse(&text))
}

/// The histograms of cftunnel's webhooks in a Prometheus text exposition, by `type`.
pub fn parse(text: &str) -> Snapshot {
    let mut out = Snapshot::new();
    for line in text.lines().filter(|l| l.starts_with(FAMILY)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let label = |key: &str| {
            labels
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim_end_matches('}').trim_matches('"').to_string())
        };
        if !label("name").is_some_and(|n| n.ends_with(OURS)) {
            continue;
        }
        let Some(kind) = label("type") else { continue };
        let histogram = out.entry(kind).or_default();
        match name.strip_prefix(FAMILY) {
            Some("_bucket") => {
                let le = match label("le").as_deref() {
                    Some("+Inf") => f64::INFINITY,
                    Some(le) => match le.parse() {
                        Ok(le) => le,
                        Err(_) => continue,
                    },
                    None => continue,
                };
                *histogram.buckets.entry(Bound(le)).or_default() += value as u64;
            }
            Some("_count") => histogram.count += value as u64,
            _ => {}
        }
    }
    out
}

/// What was observed between two snapshots.
pub fn since(after: &Snapshot, before: &Snapshot) -> Snapshot {
    after
        .iter()
        .map(|(kind, h)| {
            let base = before.get(kind).cloned().unwrap_or_default();
            (kind.clone(), h.since(&base))
        })
        .collect()
}

/// What the API server measured in each phase.
pub struct Admission {
    pub first: Snapshot,
    pub rest: Snapshot,
}

impl Admission {
    /// The Markdown table: one row per phase and webhook type.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "\nAdmission latency, kube-apiserver's own histogram of cftunnel's webhooks \
             (interpolated within its buckets: 5 ms, 25 ms, 100 ms, 500 ms, 1 s, ...):\n\n\
             | phase | webhook type | requests | p50 | p99 |\n|---|---|---|---|---|\n",
        );
        let ms = |q: Option<f64>| q.map_or("–".to_string(), |s| format!("{:.1} ms", s * 1e3));
        for (phase, snapshot) in [
            ("first sync", &self.first),
            (
                "at rest (dry-run creates of Tunnels, TunnelBindings, labelled Services)",
                &self.rest,
            ),
        ] {
            for (kind, shown) in [("validating", "validating"), ("admit", "mutating")] {
                let h = snapshot.get(kind).cloned().unwrap_or_default();
                out.push_str(&format!(
                    "| {phase} | {shown} | {} | {} | {} |\n",
                    h.count,
                    ms(h.quantile(0.5)),
                    ms(h.quantile(0.99))
                ));
            }
        }
        out
    }
}

/// The rest phase's writes: dry-run creates spread over the plan's namespaces.
pub async fn rest_requests(client: &Client, plan: &Plan) -> anyhow::Result<()> {
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let tunnels = plan.tunnels();
    for k in 0..REST_REQUESTS / 3 {
        let (ns, tunnel) = &tunnels[k % tunnels.len()];
        let host = format!("{ns}-rest{k}.{ZONE}");
        for manifest in [
            plan.tunnel(ns, &format!("rest{k}")),
            object::<TunnelBinding>(
                json!({"name": format!("rest{k}"), "namespace": ns}),
                json!({"subjects": [{"name": format!("rest{k}"), "spec": {"fqdn": host}}],
                    "tunnelRef": {"kind": "Tunnel", "name": tunnel}}),
            ),
            object::<Service>(
                json!({"name": format!("rest{k}"), "namespace": ns,
                    "labels": {LABEL_EXPOSE_TUNNEL: tunnel},
                    "annotations": {service_annotations::HOSTNAME: host}}),
                json!({"spec": {"ports": [{"name": "http", "port": 80}]}}),
            ),
        ] {
            let (resource, manifest) = manifest;
            let object: DynamicObject = serde_json::from_value(manifest)?;
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            api.create(&dry, &object)
                .await
                .with_context(|| format!("dry-run create of {} rest{k}", resource.kind))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="tunnels.validate.cfargotunnel.com",operation="CREATE",rejected="false",type="validating",le="0.005"} 50
apiserver_admission_webhook_admission_duration_seconds_bucket{name="tunnels.validate.cfargotunnel.com",operation="CREATE",rejected="false",type="validating",le="0.025"} 90
apiserver_admission_webhook_admission_duration_seconds_bucket{name="tunnels.validate.cfargotunnel.com",operation="CREATE",rejected="false",type="validating",le="+Inf"} 100
apiserver_admission_webhook_admission_duration_seconds_count{name="tunnels.validate.cfargotunnel.com",operation="CREATE",rejected="false",type="validating"} 100
apiserver_admission_webhook_admission_duration_seconds_bucket{name="other.example.com",operation="CREATE",rejected="false",type="validating",le="+Inf"} 7
apiserver_admission_webhook_admission_duration_seconds_count{name="other.example.com",operation="CREATE",rejected="false",type="validating"} 7
"#;

    #[test]
    fn only_cftunnels_webhooks_count_and_quantiles_interpolate_in_their_bucket() {
        let snapshot = parse(TEXT);
        let validating = &snapshot["validating"];
        assert_eq!(validating.count, 100);
        // Half the observations are in the first bucket: p50 at its bound.
        assert_eq!(validating.quantile(0.5), Some(0.005));
        // 70 of 100 lies halfway through the second bucket (50 → 90).
        let p70 = validating.quantile(0.7).unwrap_or_default();
        assert!((p70 - 0.015).abs() < 1e-9, "{p70}");
        // In +Inf: the highest finite bound.
        assert_eq!(validating.quantile(0.99), Some(0.025));
        let none = since(&snapshot, &snapshot);
        assert_eq!(none["validating"].quantile(0.5), None);
    }
}
