//! No credential or secret ever reaches the logs, even at TRACE.
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;

use super::*;
use crate::cloudflare::client::{ConfigSrc, NewDnsRecord};

const API_KEY: &str = "globalkey-Hh27Lq0";
const SECRET: [u8; 32] = [0xA5; 32];
const CONNECTOR_TOKEN: &str = "eyJhIjoiY29ubmVjdG9yLXRva2VuLXNlY3JldCJ9";

/// A writer that appends every log line to a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

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
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn trace_subscriber(buffer: &Buffer) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(buffer.clone())
        .with_ansi(false)
        .finish()
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
    let buffer = Buffer::default();
    let _guard = tracing::subscriber::set_default(trace_subscriber(&buffer));
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

    let logs = buffer.text();
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
