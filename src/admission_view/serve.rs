//! The admission webhook of `cftunnel run`, served from the process-wide watch caches, with
//! health and metrics. The process itself is wired in [`crate::wiring`].
use std::future::Future;
use std::sync::Arc;

use kube::Client;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};

use crate::admission_view::ViewCache;
use crate::caches::ProcessCaches;
use crate::caches::WatchScope;
use crate::metrics::Metrics;
use crate::scope::Scope;
use crate::webhook::{self, Policy, Readiness, ServingHandle, WebhookConfig, WebhookError};
use cftunnel_policy::admission::review;

/// The admission policy: pure rules over the cached view.
pub(crate) struct CachedPolicy {
    cache: Arc<ViewCache>,
}

impl Policy for CachedPolicy {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::validate_with(request, || self.cache.snapshot())
    }

    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::mutate(request)
    }

    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        review::convert(request)
    }
}

/// Starts the process-wide caches in a scope of their own, then the webhook (see
/// [`serve_webhook`]). For tests and the demo; `cftunnel run` shares its caches with the
/// leader's reconcilers.
pub async fn start_webhook(
    client: Client,
    scope: &WatchScope,
    config: WebhookConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServingHandle, WebhookError> {
    let process = Scope::root("webhook");
    let metrics = Metrics::process();
    let caches = ProcessCaches::start(&process, &client, scope, &metrics);
    match serve_webhook(&process, &client, caches, config, metrics, shutdown).await {
        Ok(handle) => Ok(handle.owning(process)),
        Err(error) => {
            process.cancel();
            Err(error)
        }
    }
}

/// Serves the webhook from `caches`; admission answers (and `/readyz`) wait until they have
/// listed.
pub(crate) async fn serve_webhook(
    process: &Scope,
    client: &Client,
    caches: ProcessCaches,
    config: WebhookConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServingHandle, WebhookError> {
    let cache = ViewCache::new(caches.clone());
    let idle = cache.clone();
    process.spawn("admission-view-release", async move {
        loop {
            tokio::time::sleep(super::IDLE_RELEASE / 2).await;
            if idle.release_if_idle() {
                tracing::debug!("admission view dropped while idle");
            }
        }
    });
    let readiness = Readiness::new();
    let ready = readiness.clone();
    process.spawn("readiness", async move {
        caches.synced().await;
        ready.set_ready(true);
        tracing::info!("caches synced; admission is ready");
    });
    let reachable = readiness.clone();
    process.spawn(
        "api-reachability",
        crate::kube_client::track_reachability(client.clone(), move |ok| {
            reachable.set_api_reachable(ok);
        }),
    );
    webhook::serve(
        process,
        config,
        Arc::new(CachedPolicy { cache }),
        readiness,
        metrics,
        shutdown,
    )
    .await
}
