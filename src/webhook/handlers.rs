//! HTTPS routes: reviews in, policy answers out. No decisions are made here.
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::core::admission::Operation;
use serde::Serialize;
use tracing::{Instrument, Span, field};

use super::budget::{BodyBudget, Budgets, SMALL_BODY_BYTES};
use super::decode_cost::decode_cost;
use super::large::LargeReviews;
use super::log_limit::{LOG_INTERVAL, LogLimiter};
use super::metrics::{Endpoint, Outcome, WebhookMetrics};
use super::{Policy, Readiness};
use crate::webhook::body::{
    admission_review, conversion_review, decode_admission, decode_conversion,
};

/// Longest time one request may take, body upload included; the API server gives up after 5 s anyway.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct AppState {
    policy: Arc<dyn Policy>,
    readiness: Readiness,
    metrics: Arc<WebhookMetrics>,
    max_body_bytes: usize,
    budget: BodyBudget,
    decoding: BodyBudget,
    /// The thread large reviews are decided on (`large.rs`).
    large: Arc<LargeReviews>,
    log_limiter: Arc<LogLimiter>,
}

/// The HTTPS routes with private metrics; usable in-process in tests.
pub fn router(policy: Arc<dyn Policy>, readiness: Readiness, max_body_bytes: usize) -> Router {
    router_with_metrics(
        policy,
        readiness,
        max_body_bytes,
        Arc::new(WebhookMetrics::new()),
    )
}

/// The HTTPS routes, recording into `metrics` (shared with the health server's `/metrics`).
pub fn router_with_metrics(
    policy: Arc<dyn Policy>,
    readiness: Readiness,
    max_body_bytes: usize,
    metrics: Arc<WebhookMetrics>,
) -> Router {
    router_with_budget(
        policy,
        readiness,
        max_body_bytes,
        Budgets::default(),
        metrics,
    )
}

/// The HTTPS routes, holding at most `budgets.bodies` bytes of request bodies and
/// `budgets.decoding` bytes of decoded reviews at once.
pub fn router_with_budget(
    policy: Arc<dyn Policy>,
    readiness: Readiness,
    max_body_bytes: usize,
    budgets: Budgets,
    metrics: Arc<WebhookMetrics>,
) -> Router {
    let state = AppState {
        policy,
        readiness,
        metrics,
        max_body_bytes,
        large: Arc::new(LargeReviews::new(budgets.decoding.total())),
        budget: budgets.bodies,
        decoding: budgets.decoding,
        log_limiter: Arc::new(LogLimiter::default()),
    };
    Router::new()
        .route("/validate", post(validate))
        .route("/validate/{*kind}", post(validate))
        .route("/mutate", post(mutate))
        .route("/mutate/{*kind}", post(mutate))
        .route("/convert", post(convert))
        .route("/convert/{*kind}", post(convert))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn validate(State(state): State<AppState>, request: Request) -> Response {
    answer(state, Endpoint::Validate, request).await
}

async fn mutate(State(state): State<AppState>, request: Request) -> Response {
    answer(state, Endpoint::Mutate, request).await
}

async fn convert(State(state): State<AppState>, request: Request) -> Response {
    answer(state, Endpoint::Convert, request).await
}

/// Runs one request inside its span, bounded in time, and records its outcome.
///
/// Admission waits for readiness: an empty cache would approve everything.
async fn answer(state: AppState, endpoint: Endpoint, request: Request) -> Response {
    let span = tracing::info_span!(
        "admission",
        endpoint = endpoint.as_str(),
        request_uid = field::Empty,
        kind = field::Empty,
        namespace = field::Empty,
        name = field::Empty,
        operation = field::Empty,
        allowed = field::Empty,
    );
    let started = Instant::now();
    // Conversion needs no cache, and the caches cannot sync without it, so it never waits.
    let (outcome, response) = if endpoint == Endpoint::Convert || state.readiness.is_ready() {
        let decided = decide(&state, endpoint, request, &span);
        match tokio::time::timeout(REQUEST_TIMEOUT, decided.instrument(span.clone())).await {
            Ok(answered) => answered,
            Err(_) => failure(
                Outcome::Timeout,
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request took longer than {} s; send the whole review promptly",
                    REQUEST_TIMEOUT.as_secs()
                ),
            ),
        }
    } else {
        failure(
            Outcome::NotReady,
            StatusCode::SERVICE_UNAVAILABLE,
            "the cftunnel webhook is not ready: its caches have not synced yet; retry shortly"
                .to_owned(),
        )
    };
    state.metrics.observe(endpoint, outcome, started.elapsed());
    span.in_scope(|| log_outcome(&state, outcome, response.status()));
    response
}

/// Refusals of malformed or excess requests are rate-limited ([`LogLimiter`]): anyone who
/// reaches the port could otherwise fill the log.
fn log_outcome(state: &AppState, outcome: Outcome, status: StatusCode) {
    let result = outcome.as_str();
    let status = status.as_u16();
    match outcome {
        Outcome::Allowed | Outcome::Converted | Outcome::NotReady => {
            tracing::debug!(result, status, "answered")
        }
        Outcome::Denied | Outcome::ConversionFailed => tracing::info!(result, status, "answered"),
        Outcome::BadRequest | Outcome::TooLarge | Outcome::Timeout | Outcome::Busy => {
            let decision = state.log_limiter.record(Instant::now());
            if decision.suppressed_before > 0 {
                tracing::warn!(
                    suppressed = decision.suppressed_before,
                    interval_seconds = LOG_INTERVAL.as_secs(),
                    "more requests were refused than logged in the last interval"
                );
            }
            if decision.log_this {
                tracing::warn!(result, status, "refused a request");
            } else {
                state.metrics.add_suppressed_log_lines(1);
            }
        }
        Outcome::InternalError => tracing::error!(result, status, "failed to answer"),
    }
}

async fn decide(
    state: &AppState,
    endpoint: Endpoint,
    request: Request,
    span: &Span,
) -> (Outcome, Response) {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|bytes| bytes > state.max_body_bytes) {
        return too_large(state);
    }
    // Room for the whole body before any of it is read; without a length, the worst case.
    let Some(reservation) = state
        .budget
        .try_reserve(declared.unwrap_or(state.max_body_bytes))
    else {
        // Answered before the body is read, and the connection closed after the answer:
        // reading (or decrypting) a refused body would cost what the refusal saves.
        drop(request);
        return busy(format!(
            "the webhook already holds {} MiB of requests; retry shortly",
            state.budget.total() >> 20
        ));
    };
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return too_large(state);
        }
        Err(rejection) => {
            return failure(
                Outcome::BadRequest,
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {}", rejection.body_text()),
            );
        }
    };
    let policy = state.policy.clone();
    let decoding = state.decoding.clone();
    let large = state.large.clone();
    // Decoding a large body takes milliseconds of CPU: off the threads that serve other requests.
    let off_runtime = declared.is_none_or(|bytes| bytes > SMALL_BODY_BYTES);
    let work = {
        let span = span.clone();
        // The reservation goes with the body: released when the work is done, not before.
        move || {
            let _held = reservation;
            let small = body.len() <= SMALL_BODY_BYTES;
            let cost = endpoint.cost_factor().weigh(decode_cost(&body));
            let Some(_decoding) = decoding.try_reserve_for(cost, small) else {
                return refuse_decoding(&decoding, cost, small);
            };
            let decide = move || match endpoint {
                Endpoint::Validate | Endpoint::Mutate => {
                    admit(policy.as_ref(), endpoint, &body, &span)
                }
                Endpoint::Convert => convert_objects(policy.as_ref(), &body, &span),
            };
            // Waiting for the large-review thread is for a blocking thread, not the runtime's.
            if off_runtime && large.is_large(cost) {
                large.decide(decide)
            } else {
                decide()
            }
        }
    };
    if off_runtime {
        tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|_| policy_failed())
    } else {
        work()
    }
}

/// 429 with a hint to retry; the connection is closed after it.
fn busy(message: String) -> (Outcome, Response) {
    let (outcome, mut response) = failure(Outcome::Busy, StatusCode::TOO_MANY_REQUESTS, message);
    let headers = response.headers_mut();
    headers.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    headers.insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    (outcome, response)
}

/// A body whose decoding finds no room: 429 when it could fit once others are done, 413 when
/// it never could (its shape makes it too costly to decode, whatever its size).
fn refuse_decoding(decoding: &BodyBudget, cost: usize, small: bool) -> (Outcome, Response) {
    if decoding.could_fit(cost, small) {
        return busy(format!(
            "the webhook is already decoding {} MiB worth of reviews; retry shortly",
            decoding.total() >> 20
        ));
    }
    failure(
        Outcome::TooLarge,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "request body would take about {} MiB to decode, more than the webhook's {} MiB \
             for one review; send an object with fewer, larger JSON values",
            cost.div_ceil(1 << 20),
            decoding.largest(small) >> 20
        ),
    )
}

fn too_large(state: &AppState) -> (Outcome, Response) {
    failure(
        Outcome::TooLarge,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "request body is larger than the {} byte limit",
            state.max_body_bytes
        ),
    )
}

/// 400 with the decoder's message.
fn bad_request(bad: &dyn std::fmt::Display) -> (Outcome, Response) {
    failure(
        Outcome::BadRequest,
        StatusCode::BAD_REQUEST,
        bad.to_string(),
    )
}

fn admit(policy: &dyn Policy, endpoint: Endpoint, body: &[u8], span: &Span) -> (Outcome, Response) {
    let request = match decode_admission(body) {
        Ok(request) => request,
        Err(bad) => return bad_request(&bad),
    };
    span.record("request_uid", request.uid.as_str());
    span.record("kind", request.kind.kind.as_str());
    span.record("namespace", request.namespace.as_deref().unwrap_or(""));
    span.record("name", request.name.as_str());
    span.record("operation", operation_name(&request.operation));
    let decided = catch_unwind(AssertUnwindSafe(|| match endpoint {
        Endpoint::Mutate => policy.mutate(&request),
        Endpoint::Validate | Endpoint::Convert => policy.validate(&request),
    }));
    let Ok(response) = decided else {
        return policy_failed();
    };
    span.record("allowed", response.allowed);
    let outcome = if response.allowed {
        Outcome::Allowed
    } else {
        Outcome::Denied
    };
    match admission_review(response, &request.uid) {
        Ok(review) => json_answer(outcome, &review),
        Err(err) => encode_failed(&err),
    }
}

fn convert_objects(policy: &dyn Policy, body: &[u8], span: &Span) -> (Outcome, Response) {
    let request = match decode_conversion(body) {
        Ok(request) => request,
        Err(bad) => return bad_request(&bad),
    };
    span.record("request_uid", request.uid.as_str());
    span.record("operation", "CONVERT");
    if let Some(kind) = request
        .objects
        .first()
        .and_then(|object| object.get("kind"))
        .and_then(|kind| kind.as_str())
    {
        span.record("kind", kind);
    }
    let Ok(response) = catch_unwind(AssertUnwindSafe(|| policy.convert(&request))) else {
        return policy_failed();
    };
    let converted = response.result.is_success();
    span.record("allowed", converted);
    let outcome = if converted {
        Outcome::Converted
    } else {
        Outcome::ConversionFailed
    };
    json_answer(outcome, &conversion_review(response, &request.uid))
}

fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

fn policy_failed() -> (Outcome, Response) {
    failure(
        Outcome::InternalError,
        StatusCode::INTERNAL_SERVER_ERROR,
        "the policy failed while deciding this request; see the webhook logs".to_owned(),
    )
}

fn json_answer(outcome: Outcome, review: &impl Serialize) -> (Outcome, Response) {
    match serde_json::to_vec(review) {
        Ok(body) => (
            outcome,
            ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        ),
        Err(err) => encode_failed(&err),
    }
}

fn encode_failed(err: &serde_json::Error) -> (Outcome, Response) {
    failure(
        Outcome::InternalError,
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("cannot encode the answer: {err}"),
    )
}

/// A Kubernetes-style `Status` body, so every answer is JSON and says what went wrong.
fn failure(outcome: Outcome, status: StatusCode, message: String) -> (Outcome, Response) {
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "code": status.as_u16(),
        "reason": status.canonical_reason().unwrap_or("Error").replace(' ', ""),
        "message": message,
    });
    (
        outcome,
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
    )
}

#[cfg(test)]
#[path = "handlers_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "handlers_props.rs"]
mod props;
