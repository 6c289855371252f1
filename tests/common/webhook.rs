//! A cftunnel webhook for tests, served from a thread of its own so it outlives every test's
//! runtime.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use cftunnel::admission_view::serve::start_webhook;
use cftunnel::caches::WatchScope;
use cftunnel::caches::{TermCaches, child_namespaces};
use cftunnel::checksum_watcher;
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::WebhookConfig;
use cftunnel_testenv::ControlPlane;

/// Serializes starts: two tests racing to start the webhook would write the key and the
/// certificate of two different pairs into the same files, and one webhook would read a
/// mismatched pair.
static START: Mutex<()> = Mutex::new(());

/// Starts a webhook with a serving certificate from the plane's CA and returns its HTTPS
/// address. Each call gets its own certificate directory.
pub fn start_webhook_thread(plane: &'static ControlPlane) -> SocketAddr {
    let _serial = START
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = unique_dir(plane);
    let cert = plane
        .ca()
        .issue_server_cert(&["127.0.0.1", "localhost"])
        .expect("serving cert");
    std::fs::write(dir.join("tls.crt"), &cert.cert_pem).expect("write cert");
    std::fs::write(dir.join("tls.key"), &cert.key_pem).expect("write key");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("webhook runtime");
        rt.block_on(async move {
            let client = plane.admin_client().expect("client");
            let config = WebhookConfig::new(
                "127.0.0.1:0".parse().expect("addr"),
                "127.0.0.1:0".parse().expect("addr"),
                dir.join("tls.crt"),
                dir.join("tls.key"),
            );
            let handle = start_webhook(
                client.clone(),
                &WatchScope::default(),
                config,
                std::future::pending(),
            )
            .await
            .expect("webhook");
            // The checksum watcher patches workloads, so `cftunnel run` starts it only in the
            // leader's term; these tests have no election and run it beside the webhook.
            let term = Scope::root("checksum-watcher");
            let namespaces = child_namespaces(&WatchScope::default(), "cftunnel-tunnels");
            let children = TermCaches::start(&term, &client, &namespaces, &Metrics::process());
            term.spawn(
                "checksum-watcher",
                checksum_watcher::run(client, children, Metrics::process()),
            );
            tx.send(handle.https_addr()).expect("report address");
            let _ = handle.join().await;
        });
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("webhook started")
}

fn unique_dir(plane: &ControlPlane) -> std::path::PathBuf {
    tempfile::Builder::new()
        .prefix("cftunnel-webhook-")
        .tempdir_in(plane.dir())
        .expect("webhook certificate dir")
        .keep()
}
