//! DNS record writes by action and result.
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Declared;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Write {
    action: &'static str,
    result: &'static str,
}

/// `cftunnel_dns_writes_total`.
#[derive(Debug, Default)]
pub(super) struct DnsMetrics {
    writes: Family<Write, Counter>,
}

impl DnsMetrics {
    pub(super) fn written(&self, action: &'static str, succeeded: bool) {
        let result = if succeeded { "success" } else { "error" };
        self.writes.get_or_create(&Write { action, result }).inc();
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cftunnel_dns_writes",
            "DNS record writes by action (create, update, take_over, delete) and result",
            Declared(self.writes.clone()),
        );
    }
}
