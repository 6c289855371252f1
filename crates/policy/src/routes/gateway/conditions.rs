//! The conditions cftunnel writes on Gateway API objects: each carries the object's generation
//! and keeps `lastTransitionTime` from the current condition when its status is unchanged
//! (else `now`); and a route parent's condition of the DNS sync's problems.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};

/// A route parent's condition while the DNS sync has a problem with a hostname it serves
/// (`False`, with the problem's reason: `DNSConflict`, `QuotaExceeded`, …); absent otherwise.
/// The specification leaves room for conditions of an implementation's own, domain-prefixed.
pub const DNS_CONDITION: &str = "cfargotunnel.com/DNSRecords";

/// One problem of a tunnel's DNS, as the DNS sync reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsNote {
    /// The hostname it concerns (`None`: every hostname of the tunnel).
    pub hostname: Option<String>,
    pub reason: String,
    pub message: String,
}

pub(super) struct Conditions<'a> {
    previous: &'a [Condition],
    generation: Option<i64>,
    now: &'a Time,
    pub(super) out: Vec<Condition>,
}

impl Conditions<'_> {
    pub(super) fn set(
        &mut self,
        type_: &str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
    ) {
        let status = if status { "True" } else { "False" };
        let last_transition_time = self
            .previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or_else(|| self.now.clone(), |c| c.last_transition_time.clone());
        self.out.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            observed_generation: self.generation,
            last_transition_time,
        });
    }
}

pub(super) fn conditions<'a>(
    previous: &'a [Condition],
    metadata: &ObjectMeta,
    now: &'a Time,
) -> Conditions<'a> {
    Conditions {
        previous,
        generation: metadata.generation,
        now,
        out: Vec::new(),
    }
}
