//! A tiny HTTPS admission webhook that denies ConfigMaps carrying one label, recording every call.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use cftunnel_testenv::TestCa;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// One admission request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub name: String,
    pub dry_run: bool,
    pub allowed: bool,
}

#[derive(Clone)]
struct Policy {
    label: String,
    message: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

/// The running server; aborted on drop.
pub struct DenyingWebhook {
    pub url_base: String,
    calls: Arc<Mutex<Vec<Call>>>,
    task: JoinHandle<()>,
}

impl DenyingWebhook {
    /// Serves `POST /validate` on 127.0.0.1 with a certificate from `ca`.
    pub async fn start(ca: &TestCa, label: &str, message: &str) -> DenyingWebhook {
        let issued = ca
            .issue_server_cert(&["127.0.0.1", "localhost"])
            .expect("serving certificate");
        let chain =
            vec![CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).expect("cert PEM")];
        let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).expect("key PEM");
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(tls));

        let calls = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new()
            .route("/validate", post(review))
            .with_state(Policy {
                label: label.to_string(),
                message: message.to_string(),
                calls: calls.clone(),
            });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        DenyingWebhook {
            url_base: format!("https://{addr}"),
            calls,
            task,
        }
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for DenyingWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn review(
    State(policy): State<Policy>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => return Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    let object = request.object.as_ref();
    let name = object
        .and_then(|o| o.metadata.name.clone())
        .unwrap_or_default();
    let labelled = object
        .and_then(|o| o.metadata.labels.as_ref())
        .is_some_and(|labels| labels.contains_key(&policy.label));
    if let Ok(mut calls) = policy.calls.lock() {
        calls.push(Call {
            name,
            dry_run: request.dry_run,
            allowed: !labelled,
        });
    }
    let response = AdmissionResponse::from(&request);
    let response = if labelled {
        response.deny(&policy.message)
    } else {
        response
    };
    Json(response.into_review())
}
