//! Plain-HTTP health server routes: liveness, readiness and metrics.
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::text;
use prometheus_client::registry::Registry;

use super::metrics::WebhookMetrics;
use super::{NotReady, Readiness};
use crate::metrics::Metrics;

/// The content type of what [`text::encode`] writes: OpenMetrics text, which Prometheus
/// scrapes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct HealthState {
    readiness: Readiness,
    registry: Arc<Registry>,
}

/// `/healthz` (always 200), `/readyz` (200 once ready) and `/metrics` (OpenMetrics text of one
/// registry, built here once: the admission metrics of `metrics`, then the operator's).
pub fn health_router(
    readiness: Readiness,
    metrics: Arc<WebhookMetrics>,
    operator: Arc<Metrics>,
) -> Router {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    operator.register(&mut registry);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(HealthState {
            readiness,
            registry: Arc::new(registry),
        })
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<HealthState>) -> Response {
    match state.readiness.serving() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(NotReady::CachesNotSynced) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: caches have not synced yet\n",
        )
            .into_response(),
        Err(NotReady::ApiServerUnreachable) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the API server does not answer\n",
        )
            .into_response(),
    }
}

async fn metrics_text(State(state): State<HealthState>) -> Response {
    let mut out = String::new();
    match text::encode(&mut out, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], out).into_response(),
        Err(error) => {
            tracing::warn!(%error, "the metrics could not be encoded");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the metrics could not be encoded\n",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::metrics::{Endpoint, Outcome};
    use axum::body::Body;
    use axum::http::Request;
    use std::time::Duration;
    use tower::ServiceExt;

    async fn get_text(app: &Router, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty());
        let Ok(request) = request else {
            return (StatusCode::IM_A_TEAPOT, String::new());
        };
        let Ok(response) = app.clone().oneshot(request).await;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn readyz_follows_readiness_and_healthz_is_always_ok() {
        let readiness = Readiness::new();
        let app = health_router(
            readiness.clone(),
            Arc::new(WebhookMetrics::new()),
            Metrics::process(),
        );
        assert_eq!(
            get_text(&app, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: caches have not synced yet\n".to_owned()
            )
        );
        assert_eq!(
            get_text(&app, "/healthz").await,
            (StatusCode::OK, "ok\n".to_owned())
        );
        readiness.set_ready(true);
        assert_eq!(
            get_text(&app, "/readyz").await,
            (StatusCode::OK, "ready\n".to_owned())
        );
        readiness.set_api_reachable(false);
        assert_eq!(
            get_text(&app, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the API server does not answer\n".to_owned()
            )
        );
        readiness.set_api_reachable(true);
        readiness.set_ready(false);
        assert_eq!(
            get_text(&app, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[tokio::test]
    async fn metrics_lists_recorded_requests() {
        let metrics = Arc::new(WebhookMetrics::new());
        metrics.observe(
            Endpoint::Validate,
            Outcome::Denied,
            Duration::from_millis(1),
        );
        let app = health_router(Readiness::new(), metrics, Metrics::process());
        let (status, text) = get_text(&app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            text.contains(
                "cftunnel_admission_requests_total{endpoint=\"validate\",result=\"denied\"} 1\n"
            ),
            "{text}"
        );
    }
}

#[cfg(test)]
#[path = "families_tests.rs"]
mod families_tests;
