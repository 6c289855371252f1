//! One stored object that does not decode into cftunnel's types stops neither the watch caches
//! nor `/readyz`: it is skipped and counted. The object is written while a looser schema of the
//! TunnelBinding CRD is installed, then the real CRD is put back; the API server keeps serving
//! the stored object as it was written.
use std::time::Duration;

use cftunnel::caches::WatchScope;
use cftunnel::caches::{ProcessCaches, decode::undecodable_objects};
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::WebhookConfig;
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until, shared};
use cftunnel_types::TunnelBinding;
use cftunnel_types::crds::{self, ConversionService};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);
const LABEL: &str = "undecodable-test";

/// The TunnelBinding CRD with a schema that accepts anything.
fn loose_binding_crd() -> CustomResourceDefinition {
    let mut crd = crds::tunnel_binding();
    for version in &mut crd.spec.versions {
        if let Some(validation) = version.schema.as_mut() {
            validation.open_api_v3_schema = Some(JSONSchemaProps {
                type_: Some("object".into()),
                x_kubernetes_preserve_unknown_fields: Some(true),
                ..JSONSchemaProps::default()
            });
        }
    }
    crd
}

async fn plane() -> &'static ControlPlane {
    shared(|| {
        let mut crds = crds::all(&ConversionService::default());
        crds.retain(|crd| crd.spec.names.kind != "TunnelBinding");
        crds.push(loose_binding_crd());
        ControlPlaneOptions {
            crds,
            ..ControlPlaneOptions::default()
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn binding(ns: &str, name: &str, subjects: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL: ns}},
        "subjects": subjects,
        "tunnelRef": {"kind": "Tunnel", "name": "edge"},
    }))
    .expect("a binding")
}

#[tokio::test]
async fn a_stored_object_that_does_not_decode_is_skipped_and_the_caches_stay_ready() {
    let plane = plane().await;
    let client = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("undecodable")
        .await
        .expect("namespace");
    let resource = ApiResource::erase::<TunnelBinding>(&());
    let bindings: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    bindings
        .create(
            &PostParams::default(),
            &binding(&ns, "broken", json!("not a list")),
        )
        .await
        .expect("the loose schema stores a binding our types reject");

    // Put the real CRD back and wait until the API server enforces it.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "tunnelbindings.networking.cfargotunnel.com",
        &PatchParams::apply("undecodable-test").force(),
        &Patch::Apply(crds::tunnel_binding()),
    )
    .await
    .expect("install the real CRD");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    poll_until("the real schema is enforced", WAIT, POLL, || {
        let (bindings, dry_run, ns) = (bindings.clone(), dry_run.clone(), ns.clone());
        async move {
            let probe = binding(&ns, "probe", json!("not a list"));
            bindings
                .create(&dry_run, &probe)
                .await
                .is_err()
                .then_some(())
        }
    })
    .await
    .expect("schema enforced");
    bindings
        .create(
            &PostParams::default(),
            &binding(&ns, "good", json!([{"name": "web"}])),
        )
        .await
        .expect("a valid binding");
    let stored = bindings.get("broken").await.expect("the broken binding");
    assert_eq!(stored.data["subjects"], json!("not a list"));

    let scope = WatchScope {
        namespace: Some(ns.clone()),
        label_selector: Some(format!("{LABEL}={ns}")),
    };
    let skipped_before = undecodable_objects();
    let process = Scope::root("process");
    let caches = ProcessCaches::start(&process, &client, &scope, &Metrics::process());
    tokio::time::timeout(WAIT, caches.synced())
        .await
        .expect("the caches sync despite the broken binding");
    let names: Vec<String> = caches
        .bindings
        .store()
        .state()
        .iter()
        .map(|b| b.name_any())
        .collect();
    assert_eq!(names, ["good"]);
    assert!(
        undecodable_objects() > skipped_before,
        "the skip is counted"
    );

    // The webhook's readiness waits on the same caches.
    let dir = tempfile::tempdir().expect("temp dir");
    let cert = plane
        .ca()
        .issue_server_cert(&["127.0.0.1", "localhost"])
        .expect("serving certificate");
    std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem).expect("write cert");
    std::fs::write(dir.path().join("tls.key"), &cert.key_pem).expect("write key");
    let config = WebhookConfig::new(
        "127.0.0.1:0".parse().expect("address"),
        "127.0.0.1:0".parse().expect("address"),
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
    );
    let handle = cftunnel::admission_view::serve::start_webhook(
        client,
        &scope,
        config,
        std::future::pending(),
    )
    .await
    .expect("webhook");
    let health = handle.health_addr();
    poll_until("/readyz answers 200", WAIT, POLL, || async move {
        let response = reqwest::get(format!("http://{health}/readyz")).await.ok()?;
        (response.status() == reqwest::StatusCode::OK).then_some(())
    })
    .await
    .expect("ready");
    handle.shutdown();
    assert!(process.shutdown(Duration::from_secs(10)).await);
}
