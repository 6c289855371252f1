//! How requests reach Cloudflare: real HTTP, or straight into an in-process axum Router (tests).
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use tower::ServiceExt;

use super::error::{CloudflareError, TransportError};

/// Largest response body read; Cloudflare pages are far smaller.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Where requests go.
#[derive(Clone)]
pub enum Transport {
    /// A real HTTP client (rustls).
    Http(reqwest::Client),
    /// An axum Router called in-process with `oneshot`: no sockets, works under paused time.
    InProcess(axum::Router),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Http(_) => f.write_str("Transport::Http"),
            Self::InProcess(_) => f.write_str("Transport::InProcess"),
        }
    }
}

/// A response read in full. No Debug: the body may hold a token.
pub(crate) struct RawResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Transport {
    /// A new rustls HTTP client: the compiled-in roots, HTTP/2 or 1.1, a 10 s connect timeout.
    /// It holds a connection pool and a TLS session cache, so share one per process (or per
    /// runtime: its connections are tasks of the runtime that opened them) rather than building
    /// one per [`crate::CloudflareClient`].
    pub fn http() -> Result<Transport, CloudflareError> {
        // reqwest panics without a process-wide provider; installing ring again is a no-op.
        crate::install_crypto_provider();
        reqwest::Client::builder()
            .user_agent(crate::USER_AGENT)
            .tls_backend_preconfigured(super::tls::client_tls_config()?)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map(Transport::Http)
            .map_err(|e| CloudflareError::InvalidInput(format!("cannot build HTTP client: {e}")))
    }

    /// Sends one request and reads the whole answer (bounded by [`MAX_BODY_BYTES`]).
    pub(crate) async fn send(
        &self,
        request: Request<Bytes>,
    ) -> Result<RawResponse, TransportError> {
        match self {
            Self::Http(client) => {
                let request = reqwest::Request::try_from(request)
                    .map_err(|e| TransportError::Http(e.without_url()))?;
                let mut response = client
                    .execute(request)
                    .await
                    .map_err(|e| TransportError::Http(e.without_url()))?;
                let status = response.status();
                let headers = std::mem::take(response.headers_mut());
                let mut body = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .map_err(|e| TransportError::Http(e.without_url()))?
                {
                    if body.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(TransportError::BodyTooLarge {
                            limit: MAX_BODY_BYTES,
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(RawResponse {
                    status,
                    headers,
                    body: Bytes::from(body),
                })
            }
            Self::InProcess(router) => {
                let response = match router
                    .clone()
                    .oneshot(request.map(axum::body::Body::from))
                    .await
                {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                let (parts, body) = response.into_parts();
                let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
                    .await
                    .map_err(|e| TransportError::InProcess(e.to_string()))?;
                Ok(RawResponse {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                })
            }
        }
    }
}
