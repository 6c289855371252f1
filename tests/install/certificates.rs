//! Self-managed certificates against the API server, as cftunnel's ServiceAccount: two managers
//! racing end with one CA injected everywhere, a CA rotation keeps both CAs, and `cftunnel run`
//! serves the certificate it keeps in its Secret.
use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use cftunnel::certs::lifetime::{read_cert, signed_by};
use cftunnel::certs::{CertManager, CertSettings};
use cftunnel_testenv::poll_until;
use cftunnel_testenv::registration::shipped_webhooks;
use cftunnel_types::crds::CONVERTED_CRDS;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::sync::Mutex;

use crate::install_support::{NAMESPACE, OPERATOR_USER, POLL, WAIT, operator_client};
use crate::plane;

/// Both tests write the same Secrets and configurations: one at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());
const HOST: &str = "cftunnel-webhook.cftunnel-system.svc";

async fn ca_bundles(client: &kube::Client) -> Vec<String> {
    let text = |b: Option<&k8s_openapi::ByteString>| {
        b.map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default()
    };
    let mut bundles = Vec::new();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config = validating
        .get("cftunnel")
        .await
        .expect("validating configuration");
    for webhook in config.webhooks.iter().flatten() {
        bundles.push(text(webhook.client_config.ca_bundle.as_ref()));
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let config = mutating
        .get("cftunnel")
        .await
        .expect("mutating configuration");
    for webhook in config.webhooks.iter().flatten() {
        bundles.push(text(webhook.client_config.ca_bundle.as_ref()));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in CONVERTED_CRDS {
        let crd = crds.get(name).await.expect("CRD");
        let config = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config);
        bundles.push(text(config.as_ref().and_then(|c| c.ca_bundle.as_ref())));
    }
    bundles
}

fn secret_text(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn certificate_managers_racing_end_with_one_ca_injected_everywhere() {
    let plane = plane().await;
    let _serial = SERIAL.lock().await;
    let settings = CertSettings::default();
    let first = CertManager::new(operator_client(plane), settings.clone());
    let second = CertManager::new(operator_client(plane), settings.clone());
    let now = Timestamp::now();
    let (a, b) = tokio::join!(first.reconcile(now), second.reconcile(now));
    let (a, b) = (a.expect("first manager"), b.expect("second manager"));
    assert_eq!(
        a.cert_pem, b.cert_pem,
        "both replicas serve the winner's certificate"
    );

    let admin = plane.admin_client().expect("admin client");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let ca_secret = secrets.get(&settings.ca_secret).await.expect("CA Secret");
    let ca = secret_text(&ca_secret, "tls.crt");
    let bundle = secret_text(&ca_secret, "ca.crt");
    assert_eq!(bundle, ca, "one CA, and the bundle holds exactly it");
    let mut names: Vec<String> = secrets
        .list(&Default::default())
        .await
        .expect("list Secrets")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [settings.ca_secret.clone(), settings.serving_secret.clone()]
    );
    assert!(signed_by(&a.cert_pem, &ca));
    let facts = read_cert(&a.cert_pem).expect("serving certificate");
    assert_eq!(
        facts.dns_names,
        vec![
            "cftunnel-webhook.cftunnel-system.svc".to_owned(),
            "cftunnel-admission.cftunnel-system.svc".to_owned()
        ]
    );
    // Every webhook of both shipped configurations, then both CRDs.
    let (validating, mutating) = shipped_webhooks().expect("manifests/webhooks.yaml");
    let webhooks =
        validating.webhooks.map_or(0, |w| w.len()) + mutating.webhooks.map_or(0, |w| w.len());
    let bundles = ca_bundles(&admin).await;
    assert_eq!(bundles.len(), webhooks + CONVERTED_CRDS.len());
    assert!(bundles.iter().all(|b| *b == ca), "{bundles:?}");

    // A second pass writes nothing.
    let version = |s: &Secret| s.metadata.resource_version.clone();
    let before = version(&ca_secret);
    let serving_before = version(
        &secrets
            .get(&settings.serving_secret)
            .await
            .expect("serving"),
    );
    first
        .reconcile(Timestamp::now())
        .await
        .expect("second pass");
    assert_eq!(
        version(&secrets.get(&settings.ca_secret).await.expect("CA")),
        before
    );
    assert_eq!(
        version(
            &secrets
                .get(&settings.serving_secret)
                .await
                .expect("serving")
        ),
        serving_before
    );

    // Seven years on, the ten-year CA rotates: the bundle holds the new CA first and the old
    // one after it, everywhere, and the serving certificate is re-issued by the new CA.
    let later = Timestamp::now() + SignedDuration::from_hours(7 * 365 * 24);
    let renewed = first.reconcile(later).await.expect("rotation pass");
    let rotated = secrets.get(&settings.ca_secret).await.expect("CA");
    let new_ca = secret_text(&rotated, "tls.crt");
    assert_ne!(new_ca, ca);
    let both = format!("{new_ca}{ca}");
    assert_eq!(secret_text(&rotated, "ca.crt"), both);
    assert!(ca_bundles(&admin).await.iter().all(|b| *b == both));
    assert!(signed_by(&renewed.cert_pem, &new_ca));
    assert!(!signed_by(&renewed.cert_pem, &ca));
}

/// A `cftunnel run` process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> SocketAddr {
    let port = cftunnel_testenv::free_port().expect("free port");
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The leaf certificate a TLS handshake with `addr` for `HOST` presents, trusting `bundle`.
async fn served_certificate(addr: SocketAddr, bundle: &str) -> Option<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(cert.ok()?).ok()?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .ok()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = ServerName::try_from(HOST).ok()?;
    let tls = connector.connect(name, stream).await.ok()?;
    tls.get_ref()
        .1
        .peer_certificates()?
        .first()
        .map(|c| c.to_vec())
}

#[tokio::test]
async fn cftunnel_run_serves_the_certificate_it_keeps_in_its_secret() {
    let plane = plane().await;
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let user = plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user");
    let ns = plane.create_namespace("run").await.expect("namespace");
    let (https, health) = (free_addr(), free_addr());
    let (cert_file, key_file) = (
        dir.path().join("tls/tls.crt"),
        dir.path().join("tls/tls.key"),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_cftunnel"))
        .arg("run")
        .args(["--webhook-listen", &https.to_string()])
        .args(["--health-listen", &health.to_string()])
        .args(["--tls-cert-file", &cert_file.to_string_lossy()])
        .args(["--tls-key-file", &key_file.to_string_lossy()])
        .args(["--watch-namespace", &ns])
        .args(["--cloudflare-api-url", "http://127.0.0.1:9"])
        .args(["--drift-interval", "0"])
        .env("KUBECONFIG", user.kubeconfig())
        .env("POD_NAMESPACE", NAMESPACE)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cftunnel run");
    let stderr = child.stderr.take();
    let running = Running(child);

    let http = reqwest::Client::new();
    let healthz = format!("http://{health}/healthz");
    poll_until("cftunnel run to serve /healthz", WAIT, POLL, || async {
        let response = http.get(&healthz).send().await.ok()?;
        response.status().is_success().then_some(())
    })
    .await
    .expect("cftunnel run is up");

    let admin = plane.admin_client().expect("admin client");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let settings = CertSettings::default();
    let serving = secrets
        .get(&settings.serving_secret)
        .await
        .expect("serving Secret");
    let bundle = secret_text(
        &secrets.get(&settings.ca_secret).await.expect("CA Secret"),
        "ca.crt",
    );
    let served = served_certificate(https, &bundle)
        .await
        .expect("TLS handshake for the Service name");
    let expected = CertificateDer::from_pem_slice(secret_text(&serving, "tls.crt").as_bytes())
        .expect("certificate PEM");
    assert_eq!(served, expected.to_vec());
    assert_eq!(
        std::fs::read_to_string(&key_file).ok(),
        Some(secret_text(&serving, "tls.key"))
    );
    assert!(ca_bundles(&admin).await.iter().all(|b| *b == bundle));

    drop(running);
    let mut log = String::new();
    if let Some(mut stderr) = stderr {
        let _ = stderr.read_to_string(&mut log);
    }
    assert!(
        log.contains("webhook serving certificate in place"),
        "{log}"
    );
    assert!(
        !log.contains("PRIVATE KEY"),
        "a key reached the log:\n{log}"
    );
}
