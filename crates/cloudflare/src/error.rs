//! Typed errors of the Cloudflare client; they keep Cloudflare's codes, messages and HTTP status.
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Tunnel name already used by a live tunnel.
/// "Record quota exceeded.": the code Cloudflare is reported to answer a create beyond the
/// zone's quota with (it is not in the published list of codes).
pub const CODE_RECORD_QUOTA_EXCEEDED: u32 = 81045;
pub const CODE_TUNNEL_NAME_EXISTS: u32 = 1013;
/// Tunnel cannot be deleted while connectors are attached.
pub const CODE_ACTIVE_CONNECTIONS: u32 = 1022;
/// Token verification failed (also returned for valid account-owned tokens on the user endpoint).
pub const CODE_INVALID_TOKEN: u32 = 1000;
/// The DNS record create/update codes meaning "a record with that host already exists".
pub const CODES_RECORD_EXISTS: [u32; 4] = [81053, 81054, 81057, 81058];
/// Access calls of an account without Zero Trust: `access.api.error.not_enabled` (the code
/// Cloudflare is reported to answer; it is not in the published list).
pub const CODE_ACCESS_NOT_ENABLED: u32 = 9999;
/// Access application or policy unknown: `access.api.error.not_found` (reported, with 404).
pub const CODE_ACCESS_NOT_FOUND: u32 = 12135;
/// Access request refused: `access.api.error.invalid_request: <detail>` (reported, with 400;
/// e.g. `domain does not belong to zone`).
pub const CODE_ACCESS_INVALID_REQUEST: u32 = 12130;
/// The marker of Cloudflare's Access error messages for an account without Zero Trust.
const ACCESS_NOT_ENABLED_MARKER: &str = "access.api.error.not_enabled";

/// One entry of the envelope's `errors` (or `messages`) list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorItem {
    #[serde(default)]
    pub code: u32,
    #[serde(default)]
    pub message: String,
    /// Nested causes; the innermost entry is usually the useful one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_chain: Vec<ApiErrorItem>,
}

impl ApiErrorItem {
    /// True if this item or anything in its chain carries `code`.
    pub fn has_code(&self, code: u32) -> bool {
        self.code == code || self.error_chain.iter().any(|e| e.has_code(code))
    }
}

impl fmt::Display for ApiErrorItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)?;
        for cause in &self.error_chain {
            write!(f, " (caused by {cause})")?;
        }
        Ok(())
    }
}

/// Wrapper so that error lists display as `a; b; c`.
struct ErrorList<'a>(&'a [ApiErrorItem]);

impl fmt::Display for ErrorList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no error details");
        }
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// Everything a Cloudflare call can fail with. Never carries credentials or request bodies.
#[derive(Debug, thiserror::Error)]
pub enum CloudflareError {
    /// Cloudflare answered with a non-2xx status, or `success: false`.
    #[error("cloudflare {operation}: HTTP {status}: {}", ErrorList(errors))]
    Api {
        operation: &'static str,
        status: u16,
        errors: Vec<ApiErrorItem>,
    },
    /// HTTP 429 persisted after every allowed attempt.
    #[error("cloudflare {operation}: rate limited, retry after {}s", retry_after.as_secs())]
    RateLimited {
        operation: &'static str,
        retry_after: Duration,
    },
    /// No answer within the per-attempt timeout, on the last attempt.
    #[error("cloudflare {operation}: no answer within {}s", after.as_secs())]
    Timeout {
        operation: &'static str,
        after: Duration,
    },
    /// Connection-level failure (DNS, TCP, TLS, HTTP framing).
    #[error("cloudflare {operation}: transport error")]
    Transport {
        operation: &'static str,
        #[source]
        source: TransportError,
    },
    /// The answer did not have the expected shape.
    #[error("cloudflare {operation}: cannot decode HTTP {status} answer: {detail}")]
    Decode {
        operation: &'static str,
        status: u16,
        detail: String,
    },
    /// The caller passed something the client refuses to send.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A write was not sent: the leadership term that asked for it has ended (or its lease
    /// permit expired).
    #[error("cloudflare {operation}: not sent, this replica no longer leads")]
    NotLeading { operation: &'static str },
}

/// The underlying transport failure.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error(transparent)]
    Http(reqwest::Error),
    #[error("response body larger than {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("in-process body: {0}")]
    InProcess(String),
}

impl CloudflareError {
    /// HTTP status of an API error, if Cloudflare answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::Decode { status, .. } => Some(*status),
            Self::RateLimited { .. } => Some(429),
            _ => None,
        }
    }

    /// The error items of an API error (empty for other variants).
    pub fn errors(&self) -> &[ApiErrorItem] {
        match self {
            Self::Api { errors, .. } => errors,
            _ => &[],
        }
    }

    /// HTTP 404: the object does not exist (deletes treat this as success).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Api { status: 404, .. })
    }

    /// True if Cloudflare reported `code`, at the top level or in an `error_chain`.
    pub fn has_code(&self, code: u32) -> bool {
        self.errors().iter().any(|e| e.has_code(code))
    }

    /// Tunnel create clashed with a live tunnel of the same name (409 or code 1013).
    pub fn is_conflict_tunnel_name(&self) -> bool {
        matches!(self, Self::Api { status: 409, .. }) || self.has_code(CODE_TUNNEL_NAME_EXISTS)
    }

    /// Tunnel delete refused because connectors are attached (code 1022).
    pub fn is_active_connections(&self) -> bool {
        self.has_code(CODE_ACTIVE_CONNECTIONS)
    }

    /// An Access call refused because the account has no Zero Trust organization (its message
    /// marker, or code 9999 on a 4xx).
    pub fn is_access_not_enabled(&self) -> bool {
        let marked = self
            .errors()
            .iter()
            .any(|e| e.message.contains(ACCESS_NOT_ENABLED_MARKER));
        let coded = matches!(
            self,
            Self::Api {
                status: 400..=499,
                ..
            }
        ) && self.has_code(CODE_ACCESS_NOT_ENABLED);
        marked || coded
    }

    /// DNS write refused because a record with that host already exists.
    pub fn is_record_exists(&self) -> bool {
        CODES_RECORD_EXISTS.iter().any(|c| self.has_code(*c))
    }

    /// DNS create refused because the zone holds as many records as its quota allows
    /// ([`crate::CODE_RECORD_QUOTA_EXCEEDED`]).
    pub fn is_quota_exceeded(&self) -> bool {
        self.has_code(CODE_RECORD_QUOTA_EXCEEDED)
    }

    /// A failure that passes by itself (5xx, 429, a timeout, a lost connection): worth trying
    /// again soon, unlike an answer that stays the same until someone changes something.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Transport { .. } | Self::RateLimited { .. } => true,
            Self::Api { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// Credentials rejected or lacking permission (401/403).
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            Self::Api {
                status: 401 | 403,
                ..
            }
        )
    }

    /// Short, fixed label for metrics and log fields.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api { status, .. } => match status {
                401 | 403 => "auth",
                404 => "not_found",
                409 => "conflict",
                400..=499 => "client_error",
                500..=599 => "server_error",
                _ => "api_error",
            },
            Self::RateLimited { .. } => "rate_limited",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Decode { .. } => "decode",
            Self::InvalidInput(_) => "invalid_input",
            Self::NotLeading { .. } => "not_leading",
        }
    }
}

/// Describes a serde_json error without quoting the input (which may hold a token or secret).
pub(crate) fn describe_json_error(err: &serde_json::Error) -> String {
    let kind = match err.classify() {
        serde_json::error::Category::Io => "I/O error",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected JSON shape",
        serde_json::error::Category::Eof => "truncated JSON",
    };
    let text = err.to_string();
    // "missing field `x`" names a field, never a value, so it is safe to keep.
    match text.split(" at line").next() {
        Some(head) if head.starts_with("missing field") => {
            format!("{head} at line {} column {}", err.line(), err.column())
        }
        _ => format!("{kind} at line {} column {}", err.line(), err.column()),
    }
}
