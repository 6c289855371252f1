//! The route pipeline's own work: route tables computed, and the status writer's writes.
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Declared;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusWrite {
    kind: &'static str,
    result: &'static str,
}

/// `cftunnel_route_computations_total` and `cftunnel_status_writes_total`.
#[derive(Debug, Default)]
pub(super) struct PipelineMetrics {
    computations: Counter,
    status_writes: Family<StatusWrite, Counter>,
}

impl PipelineMetrics {
    pub(super) fn route_computed(&self) {
        self.computations.inc();
    }

    pub(super) fn status_written(&self, kind: &'static str, succeeded: bool) {
        let result = if succeeded { "success" } else { "error" };
        self.status_writes
            .get_or_create(&StatusWrite { kind, result })
            .inc();
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cftunnel_route_computations",
            "Route tables the route reconciler computed (a wake that changed nothing routes read \
             computes none)",
            self.computations.clone(),
        );
        registry.register(
            "cftunnel_status_writes",
            "Writes of the status writer by kind (TunnelBinding, Ingress, GatewayClass, Gateway, \
             HTTPRoute, GRPCRoute, Event) and result (success, error: tried again by a later pass)",
            Declared(self.status_writes.clone()),
        );
    }
}
