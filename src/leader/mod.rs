//! Leader election for the reconcilers on a coordination.k8s.io/v1 Lease (docs/design.md §7.1, §7.3).
//!
//! Every replica serves the webhook; only the holder of the lease runs the reconcilers.
//! [`run_while_leading`] loops: wait to acquire → start a term ([`crate::scope::Scope`])
//! and run the reconcilers in it → on loss, cancel the term and wait for every task it started
//! → wait again. On shutdown it ends the term, then releases the lease (empty holder) so a
//! successor takes over without waiting for expiry.
//!
//! - **No write after loss**: the term's write permit expires `renew_deadline` after the start
//!   of its last successful renewal, and every Cloudflare write checks it right before it is
//!   sent. A leader frozen past its lease (SIGSTOP, a stalled VM) wakes with the permit already
//!   expired, so it sends nothing even before its own elector task has run.
//!
//! - **Writes** are a create or a full replace with the resourceVersion read (never a patch),
//!   so two candidates cannot both win ([`lease`]).
//! - **Clock**: a lease is expired once it has looked the same for `leaseDurationSeconds` on
//!   this process's monotonic clock, counted from when this process first read that record —
//!   not from `renewTime`, which another node's wall clock wrote ([`decision`]).
//! - **Safety margin**: a leader stops reconciling when `renew_deadline` (10 s) has passed since
//!   the start of its last successful renewal; a rival may take over only after
//!   `lease_duration` (15 s) of seeing no change. A lease found deleted, or naming another
//!   holder, ends leadership at once (the elector then competes again).
//! - **Go operator**: while its lease `9f193cf8.cfargotunnel.com` names a live holder, cftunnel
//!   neither acquires nor keeps leadership. A missing lease or namespace, or a 403 reading it,
//!   does not block.
mod decision;
#[cfg(test)]
mod decision_tests;
mod elector;
mod lease;
mod status;

use std::time::Duration;

pub use decision::{
    Decision, LeaseRecord, Observed, Observer, RELEASED_DURATION_SECONDS, decide, next_record,
    released_record,
};
pub use elector::{TERM_GRACE, run_while_leading};
pub use lease::{LeaseLock, record_of};
pub use status::{LeaderState, LeaderStatus, report_to_metrics};

/// Name of the Lease the Go cloudflare-operator (controller-runtime) elects its leader on.
pub const GO_OPERATOR_LEASE: &str = "9f193cf8.cfargotunnel.com";
/// Namespace the Go operator ran in by default.
pub(crate) const DEFAULT_GO_OPERATOR_NAMESPACE: &str = "cloudflare-operator-system";
/// Name of cftunnel's own Lease.
pub const DEFAULT_LEASE_NAME: &str = "cftunnel-leader";
/// Namespace used when the pod's own namespace cannot be read.
pub(crate) const FALLBACK_NAMESPACE: &str = "cftunnel-system";
/// Where Kubernetes mounts the pod's namespace.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Where the lease lives, who this candidate is, and the timings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Namespace of cftunnel's Lease.
    pub namespace: String,
    /// Name of cftunnel's Lease.
    pub lease_name: String,
    /// `holderIdentity` written by this process (unique per process).
    pub identity: String,
    /// `leaseDurationSeconds` (whole seconds): how long a rival waits for a silent leader.
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long stops reconciling.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
    /// Namespace of the Go operator's lease to respect; `None` to not look.
    pub go_operator_lease_namespace: Option<String>,
}

impl LeaderElectionConfig {
    /// The lease `namespace/lease_name` with the defaults: 15 s lease, 10 s renew deadline,
    /// 2 s retry, identity from the pod name, the Go operator's lease in its default namespace.
    pub fn new(namespace: impl Into<String>, lease_name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            go_operator_lease_namespace: Some(DEFAULT_GO_OPERATOR_NAMESPACE.to_string()),
        }
    }

    /// `leaseDurationSeconds` as written into the lease.
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// Checks the names and that retry < renew deadline < lease duration (whole seconds).
    pub fn validate(&self) -> Result<(), LeaderConfigError> {
        use cftunnel_policy::rules::syntax::{is_dns_label, is_dns_subdomain};
        if !is_dns_label(&self.namespace) {
            return Err(LeaderConfigError::Namespace(self.namespace.clone()));
        }
        if let Some(go) = &self.go_operator_lease_namespace
            && !is_dns_label(go)
        {
            return Err(LeaderConfigError::Namespace(go.clone()));
        }
        if !is_dns_subdomain(&self.lease_name) {
            return Err(LeaderConfigError::LeaseName(self.lease_name.clone()));
        }
        if self.identity.is_empty() {
            return Err(LeaderConfigError::EmptyIdentity);
        }
        let whole_seconds = self.lease_duration.subsec_nanos() == 0
            && self.lease_duration >= Duration::from_secs(1)
            && self.lease_duration.as_secs() <= i32::MAX as u64;
        if !whole_seconds
            || self.retry_period.is_zero()
            || self.retry_period >= self.renew_deadline
            || self.renew_deadline >= self.lease_duration
        {
            return Err(LeaderConfigError::Timings {
                lease: self.lease_duration,
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// A leader-election setting that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeaderConfigError {
    #[error("leader election namespace {0:?} is not a namespace name (RFC 1123 label)")]
    Namespace(String),
    #[error("--leader-election-id {0:?} is not a Lease name (lowercase DNS subdomain)")]
    LeaseName(String),
    #[error("the leader election identity is empty; set POD_NAME")]
    EmptyIdentity,
    #[error(
        "leader election timings need 0 < retry ({retry:?}) < renew deadline ({renew:?}) < lease \
         duration ({lease:?}), the lease in whole seconds"
    )]
    Timings {
        lease: Duration,
        renew: Duration,
        retry: Duration,
    },
}

/// The pod name (`POD_NAME`, else `HOSTNAME`, else the kernel's host name) plus a random
/// suffix, so a restarted pod with the same name is a new holder.
pub(crate) fn default_identity() -> String {
    let name = ["POD_NAME", "HOSTNAME"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .chain(std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "cftunnel".to_string());
    identity_with_suffix(&name, rand::random::<u32>())
}

fn identity_with_suffix(name: &str, suffix: u32) -> String {
    format!("{name}_{suffix:08x}")
}

/// The pod's namespace (from its service-account mount), else [`FALLBACK_NAMESPACE`].
pub fn default_namespace() -> String {
    std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE)
        .ok()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| FALLBACK_NAMESPACE.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_specified_timings_and_valid() {
        let config = LeaderElectionConfig::new("cftunnel-system", DEFAULT_LEASE_NAME);
        assert_eq!(config.lease_duration_seconds(), 15);
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_a_renew_deadline_not_shorter_than_the_lease() {
        let mut config = LeaderElectionConfig::new("ns", "lease");
        config.renew_deadline = Duration::from_secs(15);
        assert!(matches!(
            config.validate(),
            Err(LeaderConfigError::Timings { .. })
        ));
    }

    #[test]
    fn rejects_a_fractional_lease_duration() {
        let mut config = LeaderElectionConfig::new("ns", "lease");
        config.lease_duration = Duration::from_millis(15_500);
        assert!(matches!(
            config.validate(),
            Err(LeaderConfigError::Timings { .. })
        ));
    }

    #[test]
    fn rejects_a_lease_name_kubernetes_would_refuse() {
        let config = LeaderElectionConfig::new("ns", "Leader_Lease");
        assert_eq!(
            config.validate(),
            Err(LeaderConfigError::LeaseName("Leader_Lease".into()))
        );
        assert_eq!(
            LeaderConfigError::LeaseName("Leader_Lease".into()).to_string(),
            "--leader-election-id \"Leader_Lease\" is not a Lease name (lowercase DNS subdomain)"
        );
    }

    #[test]
    fn identity_is_the_pod_name_and_a_random_suffix() {
        assert_eq!(
            identity_with_suffix("cftunnel-7d9f-abcde", 0xbeef),
            "cftunnel-7d9f-abcde_0000beef"
        );
        assert_ne!(default_identity(), default_identity());
    }
}
