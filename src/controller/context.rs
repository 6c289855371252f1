//! What every reconcile shares: the Kubernetes client, the event recorder, the Cloudflare rate
//! limiters (one per process, so every credential has exactly one bucket) and the options.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use crate::cloudflare::client::{CloudflareClient, CloudflareError, Credentials, RateLimiters};
use crate::view_cache::WatchScope;

/// Default namespace of ClusterTunnels' objects, apart from the operator's own namespace.
pub const DEFAULT_CLUSTER_RESOURCE_NAMESPACE: &str = "cftunnel-tunnels";
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
    /// First retry delay after a failure; doubles per consecutive failure.
    pub retry_base: Duration,
    /// Longest retry delay after failures.
    pub retry_max: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            cloudflare_api_url: crate::cloudflare::client::DEFAULT_BASE_URL.to_string(),
            cluster_resource_namespace: DEFAULT_CLUSTER_RESOURCE_NAMESPACE.to_string(),
            cloudflared_image: DEFAULT_CLOUDFLARED_IMAGE.to_string(),
            drift_interval: Duration::from_secs(600),
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(300),
        }
    }
}

/// Shared state of both controllers.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub limiters: RateLimiters,
    pub options: ControllerOptions,
    pub scope: WatchScope,
    /// Consecutive failures per object, for exponential backoff (no hot loop).
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub fn new(client: Client, options: ControllerOptions, scope: WatchScope) -> Context {
        let reporter = Reporter {
            controller: "cftunnel".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            limiters: RateLimiters::new(),
            options,
            scope,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// A Cloudflare client for `credentials`, sharing the process-wide rate limiters.
    pub fn cloudflare(
        &self,
        credentials: Credentials,
    ) -> Result<CloudflareClient, CloudflareError> {
        CloudflareClient::builder(credentials)
            .base_url(self.options.cloudflare_api_url.clone())
            .limiters(self.limiters.clone())
            .build()
    }

    /// Records one more failure of `key` and returns the delay before the next attempt.
    pub fn next_backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let count = failures.entry(key.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        self.options
            .retry_base
            .saturating_mul(factor)
            .min(self.options.retry_max)
    }

    /// Forgets the failures of `key` after a success.
    pub fn reset_backoff(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.remove(key);
    }
}
