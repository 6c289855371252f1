//! Each credential's Cloudflare budget, read from its pacer when `/metrics` is scraped:
//! `cftunnel_cloudflare_budget_tokens` (calls that could go at once), its `…_capacity` (the
//! most the bucket holds) and `cftunnel_cloudflare_calls_waiting` (calls queued for a token).
//! A credential is named by the first 12 hex digits of its fingerprint, never by itself; one
//! series each per credential.
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use cftunnel_cloudflare::RateLimiters;

/// The pacers of the process, once the wiring handed them over.
#[derive(Clone, Default)]
pub(super) struct BudgetGauges(Arc<Mutex<Option<RateLimiters>>>);

impl std::fmt::Debug for BudgetGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BudgetGauges").finish_non_exhaustive()
    }
}

impl BudgetGauges {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    pub(super) fn track(&self, limiters: RateLimiters) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(limiters);
    }
}

const FAMILIES: [(&str, &str); 3] = [
    (
        "cftunnel_cloudflare_budget_tokens",
        "Cloudflare calls a credential could make at once now, within --cloudflare-budget.",
    ),
    (
        "cftunnel_cloudflare_budget_capacity",
        "The most Cloudflare calls a credential's budget holds at once.",
    ),
    (
        "cftunnel_cloudflare_calls_waiting",
        "Cloudflare calls of a credential queued for its budget now.",
    ),
];

impl Collector for BudgetGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let limiters = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let each = limiters.map(|l| l.each()).unwrap_or_default();
        let values: Vec<(String, [i64; 3])> = each
            .iter()
            .map(|(credential, limiter)| {
                let (tokens, capacity) = limiter.tokens();
                let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                let waiting = i64::try_from(limiter.waiting()).unwrap_or(i64::MAX);
                (
                    credential.clone(),
                    [as_i64(tokens), as_i64(capacity), waiting],
                )
            })
            .collect();
        for (i, (name, help)) in FAMILIES.iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (credential, numbers) in &values {
                let labels = [("credential", credential.as_str())];
                ConstGauge::new(numbers[i]).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_cloudflare::{Credentials, Pace, RateLimit};
    use prometheus_client::encoding::text;

    #[test]
    fn each_credential_has_its_tokens_capacity_and_queue_without_its_secret() {
        let gauges = BudgetGauges::default();
        let limiters = RateLimiters::new();
        let secret = Credentials::ApiToken("a-secret-token".into());
        let _limiter = limiters.limiter(
            &secret,
            Pace::from(RateLimit {
                per_second: 3,
                burst: 30,
            }),
        );
        gauges.track(limiters);
        let mut registry = Registry::default();
        gauges.register(&mut registry);
        let mut out = String::new();
        assert_eq!(text::encode(&mut out, &registry), Ok(()));
        let id: String = secret.fingerprint().chars().take(12).collect();
        for line in [
            format!("cftunnel_cloudflare_budget_tokens{{credential=\"{id}\"}} 30"),
            format!("cftunnel_cloudflare_budget_capacity{{credential=\"{id}\"}} 30"),
            format!("cftunnel_cloudflare_calls_waiting{{credential=\"{id}\"}} 0"),
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line} missing from:\n{out}"
            );
        }
        assert!(!out.contains("a-secret-token"));
    }
}
