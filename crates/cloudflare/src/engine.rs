//! The client handle, its builder, and the one request path every operation goes through:
//! rate limit, per-attempt timeout, retries, envelope decoding, tracing.
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use http::{Method, Request};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::Instrument;
use url::Url;

use super::budget::{Budget, Pace};
use super::error::{CloudflareError, describe_json_error};
use super::models::{Envelope, FailureEnvelope, Page};
use super::observer::{AttemptStatus, CallObserver, CallOutcome};
use super::pacer::{Limiter, Priority, Work};
use super::ratelimit_headers;
use super::retry::{self, RetryPolicy};
use super::transport::{RawResponse, Transport};
use super::turn::Prepaid;

/// A list walk that has not ended after this many pages is treated as a broken server.
const MAX_PAGES: u32 = 10_000;

/// Cloudflare API v4 client. Cheap to clone; clones share transport and rate limiter.
#[derive(Clone)]
pub struct CloudflareClient {
    inner: Arc<Inner>,
    /// Where this clone's calls queue at the credential's pacer.
    priority: Priority,
    /// The work this clone's calls belong to: they wait as old as it is.
    work: Option<Work>,
    /// A token taken for this clone's next call ([`CloudflareClient::take_turn`]).
    prepaid: Option<Arc<Prepaid>>,
}

/// Shared state of all clones of one client.
pub(super) struct Inner {
    pub base: Url,
    pub transport: Transport,
    pub auth: HeaderMap,
    pub limiter: Arc<Limiter>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Checked right before every write is sent (see [`crate::WriteGate`]).
    pub gate: crate::WriteGate,
    /// Told of every attempt and every rate-limiter wait (the operator's metrics).
    pub observer: Arc<dyn CallObserver>,
}

impl fmt::Debug for CloudflareClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudflareClient")
            .field("base", &self.inner.base.as_str())
            .field("transport", &self.inner.transport)
            .field("timeout", &self.inner.timeout)
            .field("retry", &self.inner.retry)
            .field("pace", &self.inner.limiter.pace())
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

impl CloudflareClient {
    /// The API base URL in use.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// Wraps built state; only the builder calls this.
    pub(super) fn from_inner(inner: Arc<Inner>) -> Self {
        Self {
            inner,
            priority: Priority::Normal,
            work: None,
            prepaid: None,
        }
    }

    /// A clone whose calls queue at `priority` (e.g. a deletion's [`Priority::Urgent`], a drift
    /// check's [`Priority::Background`]); the pacer and everything else stay shared.
    pub fn with_priority(&self, priority: Priority) -> Self {
        Self {
            inner: self.inner.clone(),
            priority,
            work: self.work,
            prepaid: self.prepaid.clone(),
        }
    }

    /// A clone whose calls belong to `work` (see [`Work`]): a reconcile's create, reads and
    /// push queue as one piece of work at the pacer, dated when it started.
    pub fn for_work(&self, work: Work) -> Self {
        Self {
            inner: self.inner.clone(),
            priority: self.priority,
            work: Some(work),
            prepaid: self.prepaid.clone(),
        }
    }

    /// The priority of this clone's calls.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The credential's pacer (shared by every client of the credential in the registry).
    pub fn limiter(&self) -> &Limiter {
        &self.inner.limiter
    }

    /// Waits for this clone's turn at the pacer (its priority, its work's age) and takes the
    /// token, then returns a clone whose next call spends it: build that call's request after
    /// this returns, from the newest state (`turn.rs`). Also returns how long the turn took.
    pub async fn take_turn(&self) -> (CloudflareClient, std::time::Duration) {
        let limiter = self.inner.limiter.clone();
        let waited = limiter.acquire_for(self.priority, self.work).await;
        self.inner.observer.rate_limit_waited(waited);
        (self.with_prepaid(Arc::new(Prepaid::taken(limiter))), waited)
    }

    /// A clone whose next call spends `prepaid` instead of waiting at the pacer.
    fn with_prepaid(&self, prepaid: Arc<Prepaid>) -> Self {
        Self {
            inner: self.inner.clone(),
            priority: self.priority,
            work: self.work,
            prepaid: Some(prepaid),
        }
    }
}

/// One API call before it is sent. DELETE calls are built without a body by construction.
/// No Debug: the body may hold a tunnel secret.
pub(crate) struct Call<'a> {
    pub operation: &'static str,
    pub method: Method,
    pub path: &'a [&'a str],
    pub query: Vec<(&'static str, String)>,
    body: Option<Bytes>,
}

impl<'a> Call<'a> {
    pub fn get(operation: &'static str, path: &'a [&'a str]) -> Self {
        Self::without_body(operation, Method::GET, path)
    }

    pub fn delete(operation: &'static str, path: &'a [&'a str]) -> Self {
        Self::without_body(operation, Method::DELETE, path)
    }

    fn without_body(operation: &'static str, method: Method, path: &'a [&'a str]) -> Self {
        Self {
            operation,
            method,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    /// A POST/PUT/PATCH with a JSON body.
    pub(crate) fn with_json<B: Serialize>(
        operation: &'static str,
        method: Method,
        path: &'a [&'a str],
        body: &B,
    ) -> Result<Self, CloudflareError> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            CloudflareError::InvalidInput(format!("cannot encode {operation} body: {e}"))
        })?;
        Ok(Self {
            body: Some(Bytes::from(bytes)),
            ..Self::without_body(operation, method, path)
        })
    }

    pub fn query(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.query.push((key, value.into()));
        self
    }
}

impl CloudflareClient {
    fn url(&self, call: &Call<'_>) -> Result<Url, CloudflareError> {
        let mut url = self.inner.base.clone();
        {
            let mut segments = url.path_segments_mut().map_err(|()| {
                CloudflareError::InvalidInput("API base URL cannot take a path".into())
            })?;
            segments.pop_if_empty();
            for segment in call.path {
                // `.`/`..` would be resolved away and silently address another resource.
                if segment.is_empty() || *segment == "." || *segment == ".." {
                    return Err(CloudflareError::InvalidInput(format!(
                        "{}: path identifier {segment:?} is not usable",
                        call.operation
                    )));
                }
                segments.push(segment);
            }
        }
        if !call.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in &call.query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    fn request(&self, call: &Call<'_>, url: &Url) -> Result<Request<Bytes>, CloudflareError> {
        let mut builder = Request::builder()
            .method(call.method.clone())
            .uri(url.as_str())
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .header(
                USER_AGENT,
                HeaderValue::from_static(concat!("cftunnel/", env!("CARGO_PKG_VERSION"))),
            );
        if call.body.is_some() {
            builder = builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(headers) = builder.headers_mut() {
            headers.extend(self.inner.auth.clone());
        }
        builder
            .body(call.body.clone().unwrap_or_default())
            .map_err(|e| {
                CloudflareError::InvalidInput(format!("{}: bad request: {e}", call.operation))
            })
    }

    /// Sends `call` with rate limiting, timeout and retries, and checks the envelope.
    ///
    /// POSTs are retried too after a timeout or 5xx, which can create a duplicate; callers
    /// recover by adopting the object on the resulting 409/1013 or 81053.
    pub(crate) async fn execute<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
    ) -> Result<Envelope<T>, CloudflareError> {
        let url = self.url(&call)?;
        let span = tracing::debug_span!(
            "cloudflare",
            operation = call.operation,
            method = %call.method,
            path = url.path(),
        );
        self.execute_with_retries(call, url).instrument(span).await
    }

    async fn execute_with_retries<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        url: Url,
    ) -> Result<Envelope<T>, CloudflareError> {
        let operation = call.operation;
        let result = self.attempts(call, url).await;
        let outcome = match &result {
            Ok(_) => CallOutcome::Ok,
            Err(error) => outcome_of(error),
        };
        self.inner.observer.call_ended(operation, outcome);
        result
    }

    async fn attempts<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        url: Url,
    ) -> Result<Envelope<T>, CloudflareError> {
        let inner = &self.inner;
        let operation = call.operation;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let prepaid = attempt == 1 && self.prepaid.as_ref().is_some_and(|p| p.spend());
            if !prepaid {
                let waited = inner.limiter.acquire_for(self.priority, self.work).await;
                inner.observer.rate_limit_waited(waited);
            }
            // After the (possibly long) rate-limit wait: a term that ended meanwhile sends nothing.
            if call.method != Method::GET && !inner.gate.may_write() {
                return Err(CloudflareError::NotLeading { operation });
            }
            let request = self.request(&call, &url)?;
            let sent = tokio::time::timeout(inner.timeout, inner.transport.send(request)).await;
            let status = match &sent {
                Ok(Ok(response)) => AttemptStatus::Http(response.status.as_u16()),
                Ok(Err(_)) => AttemptStatus::TransportError,
                Err(_) => AttemptStatus::Timeout,
            };
            inner.observer.attempt(operation, status);
            let failure = match sent {
                Err(_) => CloudflareError::Timeout {
                    operation,
                    after: inner.timeout,
                },
                Ok(Err(source)) => CloudflareError::Transport { operation, source },
                Ok(Ok(response)) => {
                    self.heed_headers(&response.headers);
                    let status = response.status.as_u16();
                    tracing::debug!(attempt, status, "cloudflare answered");
                    if status == 429 {
                        let wait = retry::retry_after(&response.headers);
                        inner.limiter.pause_until(Instant::now() + wait);
                        inner.observer.paused(wait);
                        tracing::warn!(
                            attempt,
                            retry_after_s = wait.as_secs(),
                            "rate limited by Cloudflare; pausing every call of this credential"
                        );
                        if attempt < inner.retry.max_attempts {
                            inner.observer.retried(operation, CallOutcome::RateLimited);
                            continue;
                        }
                        return Err(CloudflareError::RateLimited {
                            operation,
                            retry_after: wait,
                        });
                    }
                    match decode(operation, response) {
                        Ok(envelope) => return Ok(envelope),
                        Err(err) => err,
                    }
                }
            };
            if !is_retryable(&failure) || attempt >= inner.retry.max_attempts {
                tracing::debug!(attempt, error = %failure, "cloudflare call failed");
                return Err(failure);
            }
            inner.observer.retried(operation, outcome_of(&failure));
            let delay = inner.retry.backoff(attempt);
            tracing::debug!(
                attempt,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = failure.metric_label(),
                "retrying cloudflare call"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// What the answer says of the budget: no more calls than it says are left before its
    /// reset, and a pace no faster than its policy (at three quarters of it, the share cftunnel
    /// takes of a budget by default).
    fn heed_headers(&self, headers: &http::HeaderMap) {
        let limiter = &self.inner.limiter;
        if let Some(left) = ratelimit_headers::remaining(headers) {
            limiter.server_allowance(left.remaining, Instant::now() + left.reset);
        }
        if let Some(policy) = ratelimit_headers::policy(headers) {
            limiter.slow_to(Pace::within(Budget {
                requests: policy.requests - policy.requests / 4,
                window: policy.window,
            }));
        }
    }

    /// Sends `call` and returns its `result`, which must be present.
    pub(crate) async fn fetch<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
    ) -> Result<T, CloudflareError> {
        let operation = call.operation;
        self.execute::<T>(call)
            .await?
            .result
            .ok_or(CloudflareError::Decode {
                operation,
                status: 200,
                detail: "answer has no result".into(),
            })
    }

    /// One page of a list.
    pub(crate) async fn fetch_page<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
    ) -> Result<Page<T>, CloudflareError> {
        let envelope = self.execute::<Vec<T>>(call).await?;
        Ok(Page {
            items: envelope.result.unwrap_or_default(),
            info: envelope.result_info,
        })
    }

    /// Walks every page of a list: stops at `total_pages`, on a short page or an empty one.
    pub(crate) async fn fetch_all<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        path: &[&str],
        query: Vec<(&'static str, String)>,
        per_page: u32,
    ) -> Result<Vec<T>, CloudflareError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut call = Call::get(operation, path);
            call.query.clone_from(&query);
            let call = call
                .query("page", page.to_string())
                .query("per_page", per_page.to_string());
            let Page { items, info } = self.fetch_page::<T>(call).await?;
            let received = items.len();
            all.extend(items);
            let page_size =
                info.map_or(
                    per_page,
                    |i| if i.per_page > 0 { i.per_page } else { per_page },
                );
            let last_page = info
                .and_then(|i| i.total_pages)
                .is_some_and(|total| page >= total);
            if received == 0 || received < page_size as usize || last_page {
                return Ok(all);
            }
        }
        Err(CloudflareError::Decode {
            operation,
            status: 200,
            detail: format!("pagination did not end after {MAX_PAGES} pages"),
        })
    }
}

/// How a call that failed with `error` is counted.
fn outcome_of(error: &CloudflareError) -> CallOutcome {
    match error {
        CloudflareError::Timeout { .. } => CallOutcome::Timeout,
        CloudflareError::Transport { .. } => CallOutcome::TransportError,
        CloudflareError::RateLimited { .. } => CallOutcome::RateLimited,
        CloudflareError::Api { status: 429, .. } => CallOutcome::RateLimited,
        CloudflareError::Api { status, .. } if *status >= 500 => CallOutcome::ServerError,
        CloudflareError::Api { .. } => CallOutcome::ClientError,
        CloudflareError::Decode { .. } | CloudflareError::InvalidInput(_) => {
            CallOutcome::InvalidAnswer
        }
        CloudflareError::NotLeading { .. } => CallOutcome::NotLeading,
    }
}

/// Timeouts, connection errors, 5xx and 429 deserve another attempt; other answers do not.
fn is_retryable(err: &CloudflareError) -> bool {
    match err {
        CloudflareError::Timeout { .. }
        | CloudflareError::Transport { .. }
        | CloudflareError::RateLimited { .. } => true,
        CloudflareError::Api { status, .. } => retry::is_retryable_status(*status),
        CloudflareError::Decode { .. }
        | CloudflareError::InvalidInput(_)
        | CloudflareError::NotLeading { .. } => false,
    }
}

/// `success` and the HTTP status are both checked: `success:false` with 200 is an error.
#[derive(serde::Deserialize)]
struct SuccessProbe {
    #[serde(default)]
    success: Option<bool>,
    #[serde(flatten)]
    failure: FailureEnvelope,
}

fn decode<T: DeserializeOwned>(
    operation: &'static str,
    response: RawResponse,
) -> Result<Envelope<T>, CloudflareError> {
    let status = response.status.as_u16();
    if !response.status.is_success() {
        let errors = serde_json::from_slice::<FailureEnvelope>(&response.body)
            .map(|f| f.errors)
            .unwrap_or_default();
        return Err(CloudflareError::Api {
            operation,
            status,
            errors,
        });
    }
    let probe: SuccessProbe =
        serde_json::from_slice(&response.body).map_err(|e| CloudflareError::Decode {
            operation,
            status,
            detail: describe_json_error(&e),
        })?;
    match probe.success {
        Some(true) => {}
        Some(false) => {
            return Err(CloudflareError::Api {
                operation,
                status,
                errors: probe.failure.errors,
            });
        }
        None => {
            return Err(CloudflareError::Decode {
                operation,
                status,
                detail: "answer has no `success` field".into(),
            });
        }
    }
    serde_json::from_slice(&response.body).map_err(|e| CloudflareError::Decode {
        operation,
        status,
        detail: describe_json_error(&e),
    })
}
