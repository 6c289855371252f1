//! Webhook server end to end: real TLS on loopback, certificate rotation, health port, shutdown.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cftunnel::certs::{CertificateAuthority, ServingCert, issue_serving_cert};
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::{Policy, Readiness, ReloadOutcome, ServingHandle, WebhookConfig, serve};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

const HOUR: Duration = Duration::from_secs(3600);
/// Generous bound for anything that waits on the server.
const PATIENCE: Duration = Duration::from_secs(30);

/// Allows everything except objects named `deny-me`; converts by rewriting apiVersion.
struct FakePolicy;

impl Policy for FakePolicy {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let response = AdmissionResponse::from(request);
        if request.name == "deny-me" {
            response.deny("metadata.name: \"deny-me\" is refused; pick another name")
        } else {
            response
        }
    }

    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(request)
    }

    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        let objects = request
            .objects
            .iter()
            .cloned()
            .map(|mut object| {
                if let Some(fields) = object.as_object_mut() {
                    fields.insert("apiVersion".to_owned(), json!(request.desired_api_version));
                }
                object
            })
            .collect();
        ConversionResponse::for_request(request.clone()).success(objects)
    }
}

fn admission(uid: &str, name: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "kind": "Tunnel"},
            "resource": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "resource": "tunnels"},
            "name": name,
            "namespace": "apps",
            "operation": "UPDATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
                       "metadata": {"name": name, "labels": {"a": "b"}}, "spec": {"newTunnel": {"name": "t"}}},
            "oldObject": {"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
                          "metadata": {"name": name}},
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

fn conversion(uid: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": uid,
            "desiredAPIVersion": "networking.cfargotunnel.com/v1alpha2",
            "objects": [{"apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "Tunnel",
                         "metadata": {"name": "a"}, "spec": {"domain": "example.com"}}]
        }
    })
}

// ---------- real TLS on loopback ----------

/// A directory laid out like a mounted Secret volume: `tls.crt -> ..data/tls.crt`, `..data -> ..<stamp>`.
struct SecretVolume {
    dir: tempfile::TempDir,
}

impl SecretVolume {
    fn new(pair: &ServingCert) -> Self {
        let volume = Self {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        volume.publish(
            "..2026_01_01_00_00_00.000000001",
            &pair.cert_pem,
            &pair.key_pem,
        );
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(
                Path::new("..data").join(name),
                volume.dir.path().join(name),
            )
            .expect("file symlink");
        }
        volume
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    /// Writes a timestamped directory, then atomically renames a new `..data` symlink over the old one.
    fn publish(&self, stamp: &str, cert_pem: &str, key_pem: &str) {
        let root = self.dir.path();
        std::fs::create_dir(root.join(stamp)).expect("stamp dir");
        std::fs::write(root.join(stamp).join("tls.crt"), cert_pem).expect("cert");
        std::fs::write(root.join(stamp).join("tls.key"), key_pem).expect("key");
        std::os::unix::fs::symlink(stamp, root.join("..data_tmp")).expect("tmp symlink");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
    }
}

fn loopback() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

fn pem_der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("pem")
        .to_vec()
}

fn ca_and_pair() -> (CertificateAuthority, ServingCert) {
    let ca = CertificateAuthority::generate(HOUR).expect("ca");
    let pair = issue_serving_cert(&ca, &[], HOUR).expect("serving cert");
    (ca, pair)
}

async fn start(
    volume: &SecretVolume,
    readiness: Readiness,
    reload_interval: Duration,
) -> ServingHandle {
    cftunnel_cloudflare::install_crypto_provider();
    let mut config = WebhookConfig::new(loopback(), loopback(), volume.cert(), volume.key());
    config.reload_interval = reload_interval;
    serve(
        &Scope::root("webhook"),
        config,
        Arc::new(FakePolicy),
        readiness,
        Metrics::process(),
        std::future::pending(),
    )
    .await
    .expect("server starts")
}

/// The leaf certificate a brand-new TLS connection is shown.
async fn served_leaf(addr: SocketAddr, ca: &CertificateAuthority) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem_der(ca.cert_pem()).into()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("tcp connect");
    let name = ServerName::try_from("localhost").expect("name");
    let tls = tokio::time::timeout(PATIENCE, connector.connect(name, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake");
    tls.get_ref().1.peer_certificates().expect("peer certs")[0].to_vec()
}

fn https_client(ca: &CertificateAuthority) -> reqwest::Client {
    let root = reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).expect("ca pem");
    reqwest::Client::builder()
        .tls_certs_only([root])
        .timeout(PATIENCE)
        .build()
        .expect("client")
}

#[tokio::test]
async fn serves_reviews_over_tls_and_reloads_a_rotated_secret_volume() {
    let (ca, first) = ca_and_pair();
    let volume = SecretVolume::new(&first);
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let handle = start(&volume, readiness, HOUR).await;
    let url = format!(
        "https://localhost:{}/validate/tunnels",
        handle.https_addr().port()
    );

    let response = https_client(&ca)
        .post(&url)
        .json(&admission("tls-uid-1", "edge"))
        .send()
        .await
        .expect("request over TLS");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    let answer: Value = response.json().await.expect("json answer");
    assert_eq!(answer["response"]["uid"], "tls-uid-1");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        served_leaf(handle.https_addr(), &ca).await,
        pem_der(&first.cert_pem)
    );

    // Rotation exactly as the kubelet does it.
    let second = issue_serving_cert(&ca, &[], HOUR).expect("second cert");
    volume.publish(
        "..2026_02_01_00_00_00.000000002",
        &second.cert_pem,
        &second.key_pem,
    );
    assert_eq!(handle.reload_now().ok(), Some(ReloadOutcome::Swapped));
    assert_eq!(
        served_leaf(handle.https_addr(), &ca).await,
        pem_der(&second.cert_pem)
    );
    assert_eq!(handle.reload_now().ok(), Some(ReloadOutcome::Unchanged));

    // A half-written pair: new certificate, key not yet matching. The old pair stays.
    let third = issue_serving_cert(&ca, &[], HOUR).expect("third cert");
    volume.publish(
        "..2026_03_01_00_00_00.000000003",
        &third.cert_pem,
        &second.key_pem,
    );
    assert_eq!(
        handle.reload_now().err().map(|e| e.metric_label()),
        Some("key_mismatch")
    );
    assert_eq!(
        served_leaf(handle.https_addr(), &ca).await,
        pem_der(&second.cert_pem)
    );

    // Once the pair is complete it is picked up, still without a restart.
    volume.publish(
        "..2026_03_01_00_00_00.000000004",
        &third.cert_pem,
        &third.key_pem,
    );
    assert_eq!(handle.reload_now().ok(), Some(ReloadOutcome::Swapped));
    assert_eq!(
        served_leaf(handle.https_addr(), &ca).await,
        pem_der(&third.cert_pem)
    );
    let again = https_client(&ca)
        .post(&url)
        .json(&admission("tls-uid-2", "deny-me"))
        .send()
        .await
        .expect("request after rotation");
    let answer: Value = again.json().await.expect("json answer");
    assert_eq!(answer["response"]["uid"], "tls-uid-2");
    assert_eq!(answer["response"]["allowed"], false);

    handle.shutdown_and_join().await.expect("clean shutdown");
}

#[tokio::test]
async fn the_poller_picks_up_a_rotation_without_being_asked() {
    let (ca, first) = ca_and_pair();
    let volume = SecretVolume::new(&first);
    let handle = start(&volume, Readiness::new(), Duration::from_millis(50)).await;
    let second = issue_serving_cert(&ca, &[], HOUR).expect("second cert");
    volume.publish(
        "..2026_02_01_00_00_00.000000002",
        &second.cert_pem,
        &second.key_pem,
    );
    let wanted = pem_der(&second.cert_pem);
    let picked_up = tokio::time::timeout(PATIENCE, async {
        while handle.resolver().current().cert[0].as_ref() != wanted.as_slice() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        picked_up.is_ok(),
        "the new certificate was not loaded within {PATIENCE:?}"
    );
    assert_eq!(served_leaf(handle.https_addr(), &ca).await, wanted);
    handle.shutdown_and_join().await.expect("clean shutdown");
}

#[tokio::test]
async fn health_port_reports_readiness_and_metrics() {
    let (ca, pair) = ca_and_pair();
    let volume = SecretVolume::new(&pair);
    let readiness = Readiness::new();
    let handle = start(&volume, readiness.clone(), HOUR).await;
    let plain = reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("client");
    let health = |path: &str| format!("http://{}{path}", handle.health_addr());
    let status = |r: reqwest::Response| r.status().as_u16();

    assert_eq!(
        plain.get(health("/healthz")).send().await.map(status).ok(),
        Some(200)
    );
    assert_eq!(
        plain.get(health("/readyz")).send().await.map(status).ok(),
        Some(503)
    );
    let url = format!("https://localhost:{}/validate", handle.https_addr().port());
    let refused = https_client(&ca)
        .post(&url)
        .json(&admission("u0", "edge"))
        .send()
        .await;
    assert_eq!(refused.map(status).ok(), Some(503));

    readiness.set_ready(true);
    assert_eq!(
        plain.get(health("/readyz")).send().await.map(status).ok(),
        Some(200)
    );
    let allowed = https_client(&ca)
        .post(&url)
        .json(&admission("u1", "edge"))
        .send()
        .await;
    assert_eq!(allowed.map(status).ok(), Some(200));

    let metrics = plain
        .get(health("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for line in [
        "cftunnel_admission_requests_total{endpoint=\"validate\",result=\"allowed\"} 1",
        "cftunnel_admission_requests_total{endpoint=\"validate\",result=\"not_ready\"} 1",
        "cftunnel_admission_request_duration_seconds_count{endpoint=\"validate\"} 2",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line:?} in\n{metrics}"
        );
    }
    readiness.set_ready(false);
    assert_eq!(
        plain.get(health("/readyz")).send().await.map(status).ok(),
        Some(503)
    );
    handle.shutdown_and_join().await.expect("clean shutdown");
}

#[tokio::test]
async fn the_shutdown_future_stops_both_servers() {
    let (_, pair) = ca_and_pair();
    let volume = SecretVolume::new(&pair);
    cftunnel_cloudflare::install_crypto_provider();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = WebhookConfig::new(loopback(), loopback(), volume.cert(), volume.key());
    let scope = Scope::root("webhook");
    let handle = serve(
        &scope,
        config,
        Arc::new(FakePolicy),
        Readiness::new(),
        Metrics::process(),
        async move {
            let _ = rx.await;
        },
    )
    .await
    .expect("server starts");
    let health_addr = handle.health_addr();
    let _ = tx.send(());
    tokio::time::timeout(PATIENCE, handle.join())
        .await
        .expect("stops in time")
        .expect("clean shutdown");
    assert!(tokio::net::TcpStream::connect(health_addr).await.is_err());
}

#[tokio::test]
async fn serve_refuses_to_start_without_a_usable_pair() {
    let (ca, pair) = ca_and_pair();
    let other = issue_serving_cert(&ca, &[], HOUR).expect("other");
    let volume = SecretVolume::new(&pair);
    std::fs::write(volume.dir.path().join("mismatched.key"), &other.key_pem).expect("key");
    let config = WebhookConfig::new(
        loopback(),
        loopback(),
        volume.cert(),
        volume.dir.path().join("mismatched.key"),
    );
    let err = serve(
        &Scope::root("webhook"),
        config,
        Arc::new(FakePolicy),
        Readiness::new(),
        Metrics::process(),
        std::future::pending(),
    )
    .await
    .err()
    .map(|e| e.metric_label());
    assert_eq!(err, Some("tls"));
}

#[tokio::test]
async fn converts_over_http1_as_well() {
    let (ca, pair) = ca_and_pair();
    let volume = SecretVolume::new(&pair);
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let handle = start(&volume, readiness, HOUR).await;
    let root = reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).expect("ca pem");
    let client = reqwest::Client::builder()
        .tls_certs_only([root])
        .http1_only()
        .timeout(PATIENCE)
        .build()
        .expect("client");
    let url = format!(
        "https://localhost:{}/convert/tunnels",
        handle.https_addr().port()
    );
    let response = client
        .post(&url)
        .json(&conversion("conv-tls"))
        .send()
        .await
        .expect("request over TLS");
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let answer: Value = response.json().await.expect("json answer");
    assert_eq!(answer["kind"], "ConversionReview");
    assert_eq!(answer["response"]["uid"], "conv-tls");
    assert_eq!(
        answer["response"]["convertedObjects"][0]["apiVersion"],
        "networking.cfargotunnel.com/v1alpha2"
    );
    handle.shutdown_and_join().await.expect("clean shutdown");
}

/// Counts how many decisions run at once; each one holds its thread briefly.
#[derive(Default)]
struct CountingPolicy {
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

impl Policy for CountingPolicy {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        AdmissionResponse::from(request)
    }

    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.validate(request)
    }

    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        ConversionResponse::for_request(request.clone()).success(Vec::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_more_than_max_concurrency_decisions_run_at_once() {
    let (ca, pair) = ca_and_pair();
    let volume = SecretVolume::new(&pair);
    cftunnel_cloudflare::install_crypto_provider();
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let mut config = WebhookConfig::new(loopback(), loopback(), volume.cert(), volume.key());
    config.max_concurrency = 2;
    let policy = Arc::new(CountingPolicy::default());
    let handle = serve(
        &Scope::root("webhook"),
        config,
        policy.clone(),
        readiness,
        Metrics::process(),
        std::future::pending(),
    )
    .await
    .expect("server starts");
    let client = https_client(&ca);
    let url = format!("https://localhost:{}/validate", handle.https_addr().port());
    let requests = (0..16).map(|i| {
        let request = client.post(&url).json(&admission(&format!("u{i}"), "edge"));
        async move { request.send().await.map(|r| r.status().as_u16()).ok() }
    });
    let statuses = futures::future::join_all(requests).await;
    assert_eq!(statuses, vec![Some(200); 16]);
    let most = policy.most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} decisions ran at once");
    handle.shutdown_and_join().await.expect("clean shutdown");
}
