//! No credential or secret ever reaches the logs, even at TRACE.
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;

use super::*;
use crate::{ConfigSrc, NewDnsRecord};

const API_KEY: &str = "globalkey-Hh27Lq0";
const SECRET: [u8; 32] = [0xA5; 32];
const CONNECTOR_TOKEN: &str = "eyJhIjoiY29ubmVjdG9yLXRva2VuLXNlY3JldCJ9";

/// A writer that appends every log line to a shared buffer.
#[derive(Clone, Default)]
pub(super) struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Buffer {
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A TRACE-level capture into a buffer, on this thread, for as long as it lives.
pub(super) struct Capture {
    pub buffer: Buffer,
    _guard: tracing::subscriber::DefaultGuard,
    _anchor: tracing::Dispatch,
}

/// Starts a capture. tracing caches each callsite's interest process-wide, computed from the
/// thread that first reaches it; a second live dispatcher makes that computation consult every
/// dispatcher, so a parallel test without a subscriber cannot switch our events off.
pub(super) fn capture() -> Capture {
    let anchor = tracing::Dispatch::new(tracing_subscriber::registry());
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(buffer.clone())
        .with_ansi(false)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    Capture {
        buffer,
        _guard: guard,
        _anchor: anchor,
    }
}

/// Answers every operation, including failures, retries and a 429.
fn busy_router() -> Router {
    fake(
        |seen, index| match (seen.method.as_str(), seen.path.as_str()) {
            _ if index == 0 => too_many(1),
            _ if index == 1 => fail(503, 1000, "try later"),
            ("POST", p) if p.ends_with("/cfd_tunnel") => {
                let mut t = tunnel_json(TUNNEL, "blog");
                t["token"] = json!(CONNECTOR_TOKEN);
                t["credentials_file"] = json!({"AccountTag": ACCOUNT, "TunnelID": TUNNEL,
                "TunnelSecret": STANDARD.encode(SECRET)});
                ok(t)
            }
            (_, p) if p.ends_with("/token") => ok(json!(CONNECTOR_TOKEN)),
            ("POST", _) => fail(
                400,
                81053,
                "An A, AAAA, or CNAME record with that host already exists.",
            ),
            _ => fail(404, 1004, "not found"),
        },
    )
    .0
}

async fn exercise(client: &CloudflareClient) -> Vec<String> {
    let mut rendered = Vec::new();
    let tunnel = client
        .create_tunnel(ACCOUNT, "blog", &SECRET, ConfigSrc::Local)
        .await
        .unwrap();
    rendered.push(format!("{tunnel:?}"));
    let token = client.tunnel_token(ACCOUNT, TUNNEL).await.unwrap();
    rendered.push(format!("{token:?}"));
    let record = NewDnsRecord::tunnel_cname("app.example.com", TUNNEL, None);
    let err = client.create_dns_record(ZONE, &record).await.unwrap_err();
    rendered.push(format!("{err} {err:?}"));
    let err = client.get_tunnel(ACCOUNT, TUNNEL).await.unwrap_err();
    rendered.push(format!("{err} {err:?}"));
    rendered.push(format!("{client:?}"));
    rendered
}

fn assert_clean(text: &str, forbidden: &[&str]) {
    for secret in forbidden {
        assert!(!text.contains(secret), "{secret:?} leaked into:\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn trace_logs_never_contain_credentials_or_secrets() {
    let capture = capture();
    let secret_b64 = STANDARD.encode(SECRET);
    let forbidden = [TOKEN, API_KEY, secret_b64.as_str(), CONNECTOR_TOKEN];

    let token_client = builder(busy_router()).build().unwrap();
    let mut rendered = exercise(&token_client).await;

    let key_client = CloudflareClient::builder(Credentials::ApiKey {
        email: "ops@example.com".into(),
        key: API_KEY.into(),
    })
    .transport(Transport::InProcess(busy_router()))
    .limiters(RateLimiters::new())
    .backoff(Duration::from_millis(10), Duration::from_millis(10))
    .build()
    .unwrap();
    rendered.extend(exercise(&key_client).await);

    let logs = capture.buffer.text();
    // The logs are real: operations, statuses, the 429 pause and retries are all there.
    for expected in [
        "tunnel.create",
        "tunnel.token",
        "dns.create",
        "status=429",
        "status=503",
        "retrying cloudflare call",
        "pausing every call",
    ] {
        assert!(
            logs.contains(expected),
            "{expected:?} missing from:\n{logs}"
        );
    }
    assert_clean(&logs, &forbidden);
    assert_clean(&rendered.join("\n"), &forbidden);
}
