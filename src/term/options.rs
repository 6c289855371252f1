//! The operator-wide settings of a term's reconcilers (`cftunnel run`'s flags) and their
//! defaults.
use std::time::Duration;

use cftunnel_cloudflare::Budget;
use cftunnel_types::ConfigSource;

/// Default namespace of ClusterTunnels' objects, apart from the operator's own namespace.
pub const DEFAULT_CLUSTER_RESOURCE_NAMESPACE: &str = "cftunnel-tunnels";
/// Default of `--deletion-pod-wait`: how long a deletion waits for cloudflared pods that
/// still run.
/// Three quarters of Cloudflare's 1,200 requests per 5 minutes per token: room for the
/// dashboard and other tools on the same token, and for windows that do not line up.
pub(crate) const DEFAULT_CLOUDFLARE_BUDGET: Budget = Budget {
    requests: 900,
    window: Duration::from_secs(300),
};
pub(crate) const DEFAULT_DELETION_POD_WAIT: Duration = Duration::from_secs(120);
/// Default pinned cloudflared image.
pub const DEFAULT_CLOUDFLARED_IMAGE: &str = "cloudflare/cloudflared:2026.11.0";

/// Operator-wide settings of the tunnel reconciler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerOptions {
    /// Cloudflare API base, e.g. `https://api.cloudflare.com/client/v4` or a simulator's URL.
    pub cloudflare_api_url: String,
    /// Where ClusterTunnels' Secrets, ConfigMaps and Deployments live.
    pub cluster_resource_namespace: String,
    pub cloudflared_image: String,
    /// Slow drift check of the tunnel on Cloudflare; zero disables it.
    pub drift_interval: Duration,
    /// How often the edge health task asks Cloudflare how each tunnel is connected; zero
    /// disables it.
    pub edge_interval: Duration,
    /// What cftunnel may spend of each credential's Cloudflare API budget (`--cloudflare-budget`).
    pub cloudflare_budget: Budget,
    /// First retry delay after a failure; doubles per consecutive failure.
    pub retry_base: Duration,
    /// Longest retry delay after failures.
    pub retry_max: Duration,
    /// Longest retry delay after failures that pass by themselves (Cloudflare 5xx, 429,
    /// timeouts), so a storm's end is followed within this long.
    pub transient_retry_max: Duration,
    /// Attempts per Cloudflare call (`None`: the client's default budget).
    pub cloudflare_max_attempts: Option<u32>,
    /// `--overwrite-unmanaged-dns`: replace DNS records cftunnel does not own.
    pub overwrite_unmanaged_dns: bool,
    /// Write the `_managed.<fqdn>` TXT records the Go operator reads (public: they name the
    /// tunnel).
    pub dns_txt_records: bool,
    /// `--dns-batch`: batched or single-record DNS writes.
    pub dns_batch: cftunnel_policy::dns::BatchMode,
    /// `--deletion-pod-wait`: how long a deletion waits for cloudflared pods that still run
    /// (see `deletion_pods`).
    pub deletion_pod_wait: Duration,
    /// `--cluster-id`; `None`: the uid of the kube-system Namespace ([`super::cluster`]).
    pub cluster_id: Option<String>,
    /// `--default-config-source`: where cloudflared takes its rules from for a tunnel whose
    /// spec names no `configSource`.
    pub default_config_source: ConfigSource,
}

/// How long a copy of what Cloudflare holds that only this term writes (a zone's records, the
/// configuration of a tunnel it created) is used instead of a read: the drift interval, which
/// reads it at least that often, or [`WITHOUT_DRIFT`] when drift checks are off (`drift` zero).
pub(crate) fn copy_max_age(drift: Duration) -> Duration {
    if drift.is_zero() {
        WITHOUT_DRIFT
    } else {
        drift
    }
}

/// How long a copy serves when drift checks are off.
pub(crate) const WITHOUT_DRIFT: Duration = Duration::from_secs(600);

impl ControllerOptions {
    /// The drift interval ±10 %, so many objects do not check in lockstep.
    pub(crate) fn jittered_drift_interval(&self) -> Duration {
        use rand::Rng;
        let factor = rand::rng().random_range(0.9..=1.1);
        self.drift_interval.mul_f64(factor)
    }
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            cloudflare_api_url: cftunnel_cloudflare::DEFAULT_BASE_URL.to_string(),
            cluster_resource_namespace: DEFAULT_CLUSTER_RESOURCE_NAMESPACE.to_string(),
            cloudflared_image: DEFAULT_CLOUDFLARED_IMAGE.to_string(),
            drift_interval: Duration::from_secs(600),
            edge_interval: Duration::from_secs(60),
            cloudflare_budget: DEFAULT_CLOUDFLARE_BUDGET,
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(300),
            transient_retry_max: Duration::from_secs(60),
            cloudflare_max_attempts: None,
            overwrite_unmanaged_dns: false,
            dns_txt_records: true,
            dns_batch: cftunnel_policy::dns::BatchMode::Auto,
            deletion_pod_wait: DEFAULT_DELETION_POD_WAIT,
            cluster_id: None,
            default_config_source: ConfigSource::Local,
        }
    }
}
