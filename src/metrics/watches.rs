//! What the operator failed to watch or to know: watches restarted with backoff, and the
//! AccessPolicies becoming unknown.
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Declared;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Watched {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cause {
    cause: &'static str,
}

/// `cftunnel_watch_restarts_total` and `cftunnel_access_policies_unknown_total`.
#[derive(Debug, Default)]
pub(super) struct WatchMetrics {
    restarts: Family<Watched, Counter>,
    access_unknown: Family<Cause, Counter>,
}

impl WatchMetrics {
    /// `what` is a type name; its last path segment is the label.
    pub(super) fn restarted(&self, what: &str) {
        let kind = short_type_name(what);
        self.restarts.get_or_create(&Watched { kind }).inc();
    }

    pub(super) fn access_policies_unknown(&self, cause: &'static str) {
        self.access_unknown.get_or_create(&Cause { cause }).inc();
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cftunnel_watch_restarts",
            "Watches that failed and were restarted with backoff, by watched kind",
            Declared(self.restarts.clone()),
        );
        registry.register(
            "cftunnel_access_policies_unknown",
            "Times the AccessPolicies became unknown (RBAC forbids reading them, one does not \
             decode, their watch fails), by cause",
            Declared(self.access_unknown.clone()),
        );
    }
}

fn short_type_name(what: &str) -> String {
    let inner = what.trim_end_matches('>');
    let last = inner.rsplit("::").next().unwrap_or(inner);
    last.trim_start_matches('<').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_kinds_are_the_last_segment_of_the_type_name() {
        assert_eq!(
            short_type_name("k8s_openapi::api::core::v1::Service"),
            "Service"
        );
        assert_eq!(
            short_type_name(
                "kube_core::metadata::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>"
            ),
            "Secret"
        );
        assert_eq!(short_type_name("tunnel"), "tunnel");
    }
}
