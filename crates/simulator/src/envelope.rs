//! Cloudflare's v4 response envelope and the error answers the simulator gives.
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Value, json};

/// A successful answer: HTTP 200, as Cloudflare does for creates too, except where the schema
/// declares another 2xx (the Access creates answer 201, its deletes 202).
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub result: Value,
    pub result_info: Option<Value>,
    pub messages: Vec<Value>,
}

impl Reply {
    pub fn new(result: Value) -> Self {
        Reply {
            status: StatusCode::OK,
            result,
            result_info: None,
            messages: Vec::new(),
        }
    }

    pub fn list(result: Vec<Value>, result_info: Value) -> Self {
        Reply {
            status: StatusCode::OK,
            result: Value::Array(result),
            result_info: Some(result_info),
            messages: Vec::new(),
        }
    }

    /// Answers with another success status than 200.
    pub(crate) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub(crate) fn with_message(mut self, code: u32, message: &str) -> Self {
        self.messages
            .push(json!({ "code": code, "message": message }));
        self
    }

    pub fn body(&self) -> Value {
        let mut body = json!({
            "success": true,
            "errors": [],
            "messages": self.messages,
            "result": self.result,
        });
        if let (Some(info), Some(map)) = (&self.result_info, body.as_object_mut()) {
            map.insert("result_info".into(), info.clone());
        }
        body
    }
}

/// A failed answer: HTTP status, Cloudflare error code and message, optional root causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: u32,
    pub message: String,
    pub chain: Vec<(u32, String)>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: u32, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            chain: Vec::new(),
            retry_after: None,
        }
    }

    pub(crate) fn with_chain(mut self, code: u32, message: impl Into<String>) -> Self {
        self.chain.push((code, message.into()));
        self
    }

    /// Body not valid JSON, or not a JSON object.
    pub(crate) fn invalid_body(detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            9207,
            format!("Request body is invalid: {detail}"),
        )
    }

    /// Tunnel or configuration request that misses or misuses a field.
    pub(crate) fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            1001,
            format!("Invalid request: {detail}"),
        )
    }

    /// DNS record request that fails validation; the detail goes in `error_chain`.
    pub(crate) fn dns_validation(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, 1004, "DNS Validation Error").with_chain(9003, detail)
    }

    /// Unknown zone id, or a path nothing routes to.
    pub(crate) fn no_route(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            7003,
            format!("Could not route to {path}, perhaps your object identifier is invalid?"),
        )
    }

    /// Missing credentials, unknown credentials or an account the credentials cannot reach.
    pub fn authentication(status: StatusCode) -> Self {
        Self::new(status, 10000, "Authentication error")
    }

    pub(crate) fn invalid_token() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, 1000, "Invalid API Token")
    }

    pub fn rate_limited(retry_after: u64) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            971,
            "Please wait and consider throttling your request speed",
        );
        error.retry_after = Some(retry_after);
        error
    }

    pub fn body(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if !self.chain.is_empty() {
            let chain: Vec<Value> = self
                .chain
                .iter()
                .map(|(code, message)| json!({ "code": code, "message": message }))
                .collect();
            if let Some(map) = error.as_object_mut() {
                map.insert("error_chain".into(), Value::Array(chain));
            }
        }
        json!({ "success": false, "errors": [error], "messages": [], "result": null })
    }
}

/// What a request is finally answered with, kept as JSON so that it can be logged as sent.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub retry_after: Option<u64>,
    /// Further headers, e.g. the budget's `Ratelimit` pair.
    pub headers: Vec<(&'static str, String)>,
}

impl From<&Result<Reply, ApiError>> for Answer {
    fn from(outcome: &Result<Reply, ApiError>) -> Self {
        match outcome {
            Ok(reply) => Answer {
                status: reply.status,
                body: reply.body(),
                retry_after: None,
                headers: Vec::new(),
            },
            Err(error) => Answer {
                status: error.status,
                body: error.body(),
                retry_after: error.retry_after,
                headers: Vec::new(),
            },
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response
                    .headers_mut()
                    .insert(HeaderName::from_static(name), value);
            }
        }
        response
    }
}

/// No answer at all: a body whose stream fails at once, so hyper aborts the connection and an
/// in-process caller's body read fails too.
pub(crate) fn dropped_connection() -> Response {
    let failure = std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "simulated dropped connection",
    );
    let stream = futures::stream::iter([Err::<Bytes, _>(failure)]);
    (StatusCode::OK, Body::from_stream(stream)).into_response()
}
