//! Behaviour tests of the client against small in-process fake servers.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    CloudflareClient, CloudflareClientBuilder, Credentials, RateLimit, RateLimiters, Transport,
};

mod access;
mod certificates;
mod envelope;
mod gate;
mod http;
mod logging;
mod operations;
mod ratelimit;
mod retries;
mod turn;

pub(super) const ACCOUNT: &str = "0123456789abcdef0123456789abcdef";
pub(super) const ZONE: &str = "fedcba9876543210fedcba9876543210";
pub(super) const TUNNEL: &str = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
pub(super) const TOKEN: &str = "test-token-Zq81xW0p";

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

/// Requests seen by a fake server, in arrival order.
#[derive(Debug, Clone, Default)]
pub(super) struct Log(Arc<Mutex<Vec<Seen>>>);

impl Log {
    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// A fake server: every request is logged, then answered by `answer(request, index)`.
pub(super) fn fake<F>(answer: F) -> (Router, Log)
where
    F: Fn(&Seen, usize) -> Response + Clone + Send + Sync + 'static,
{
    let log = Log::default();
    let state = log.clone();
    let router = Router::new().fallback(move |request: axum::extract::Request| {
        let log = state.clone();
        let answer = answer.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20)
                .await
                .unwrap_or_default();
            let seen = Seen {
                method: parts.method,
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().map(str::to_owned),
                headers: parts.headers,
                body,
                at: Instant::now(),
            };
            let index = {
                let mut all = log.0.lock().unwrap();
                all.push(seen.clone());
                all.len() - 1
            };
            answer(&seen, index)
        }
    });
    (router, log)
}

/// A success envelope around `result`.
pub(super) fn ok(result: Value) -> Response {
    axum::Json(json!({"success": true, "errors": [], "messages": [], "result": result}))
        .into_response()
}

/// A success envelope of a list page.
pub(super) fn ok_page(
    items: Vec<Value>,
    page: u32,
    per_page: u32,
    total: u32,
    total_pages: Option<u32>,
) -> Response {
    let mut info =
        json!({"page": page, "per_page": per_page, "count": items.len(), "total_count": total});
    if let Some(pages) = total_pages {
        info["total_pages"] = json!(pages);
    }
    axum::Json(json!({"success": true, "errors": [], "messages": [], "result": items, "result_info": info}))
        .into_response()
}

/// A failure envelope.
pub(super) fn fail(status: u16, code: u32, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    let body = json!({"success": false, "errors": [{"code": code, "message": message}], "messages": [], "result": null});
    (status, axum::Json(body)).into_response()
}

/// A 429 with `Retry-After`.
pub(super) fn too_many(retry_after: u64) -> Response {
    let mut response = fail(
        429,
        971,
        "Please wait and consider throttling your request speed",
    );
    response
        .headers_mut()
        .insert("retry-after", retry_after.to_string().parse().unwrap());
    response
}

/// Builder for a client that talks to `router` in-process, with a private limiter registry
/// generous enough not to matter, and short backoffs.
pub(super) fn builder(router: Router) -> CloudflareClientBuilder {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .transport(Transport::InProcess(router))
        .limiters(RateLimiters::new())
        .rate_limit(RateLimit {
            per_second: 1000,
            burst: 1000,
        })
        .backoff(Duration::from_millis(100), Duration::from_secs(2))
}

pub(super) fn client(router: Router) -> CloudflareClient {
    builder(router).build().unwrap()
}

/// A tunnel object as Cloudflare returns it.
pub(super) fn tunnel_json(id: &str, name: &str) -> Value {
    json!({
        "id": id, "account_tag": ACCOUNT, "name": name,
        "created_at": "2025-01-25T18:22:34.317854Z", "deleted_at": null,
        "connections": [], "conns_active_at": null, "conns_inactive_at": "2025-01-25T18:22:34Z",
        "status": "inactive", "tun_type": "cfd_tunnel", "metadata": {}, "remote_config": false,
        "config_src": "local"
    })
}

/// A DNS record object as Cloudflare returns it.
pub(super) fn record_json(id: &str, name: &str) -> Value {
    json!({
        "id": id, "type": "CNAME", "name": name, "content": format!("{TUNNEL}.cfargotunnel.com"),
        "proxiable": true, "proxied": true, "ttl": 1, "comment": null, "tags": [],
        "meta": {}, "settings": {}, "created_on": "2025-01-01T05:20:00.12345Z",
        "modified_on": "2025-01-01T05:20:00.12345Z"
    })
}

/// Body as JSON, `Null` when empty.
pub(super) fn body_json(seen: &Seen) -> Value {
    if seen.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&seen.body).unwrap()
    }
}

/// Shorthand for building a response with an arbitrary body.
pub(super) fn raw(status: u16, body: &'static str) -> Response {
    Response::builder()
        .status(status)
        .body(Body::from(body))
        .unwrap()
}
