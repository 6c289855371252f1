//! `cftunnel run`: one process serving the admission webhook from watch caches, with health
//! and metrics. (The tunnel and route reconcilers join this process as they are built.)
use std::future::Future;
use std::sync::Arc;

use kube::Client;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};

use crate::admission::review;
use crate::view_cache::{ViewCache, WatchScope};
use crate::webhook::{self, Policy, Readiness, ServingHandle, WebhookConfig, WebhookError};

/// The admission policy: pure rules over the cached view.
pub struct CachedPolicy {
    cache: Arc<ViewCache>,
}

impl Policy for CachedPolicy {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::validate(request, &self.cache.snapshot())
    }

    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::mutate(request)
    }

    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        review::convert(request)
    }
}

/// Starts the caches, the webhook and the config-checksum watcher; admission answers (and
/// `/readyz`) wait for the caches.
pub async fn start_webhook(
    client: Client,
    scope: &WatchScope,
    config: WebhookConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServingHandle, WebhookError> {
    tokio::spawn(crate::checksum_watcher::run(
        client.clone(),
        scope.namespace.clone(),
    ));
    let (cache, synced) = ViewCache::start(client, scope);
    let readiness = Readiness::new();
    let ready = readiness.clone();
    tokio::spawn(async move {
        synced.await;
        ready.set_ready(true);
        tracing::info!("caches synced; admission is ready");
    });
    webhook::serve(
        config,
        Arc::new(CachedPolicy { cache }),
        readiness,
        shutdown,
    )
    .await
}
