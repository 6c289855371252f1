//! Admission stays available during a rollout of cftunnel itself: the API server's admission
//! calls go through a Service that routes only to ready replicas (a replica whose caches have not
//! synced answers 503, and the webhooks fail closed), while CRD conversion goes through one that
//! publishes not-ready addresses (a replica must convert stored v1alpha1 Tunnels to list them
//! before it can become ready).
//!
//! Proven with the shipped manifests, two replicas made from the shipped Deployment's pod
//! template (one ready, one still starting) and the real EndpointSlice controller: the
//! EndpointSlices are what Service proxies route by.
mod common;
mod install_support;

use std::collections::{BTreeMap, BTreeSet};

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until, shared};
use cftunnel_types::crds::{self, ConversionService};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use install_support::{NAMESPACE, POLL, WAIT, documents, find, kubectl_ok, repo_path};

const READY_IP: &str = "10.244.0.10";
const STARTING_IP: &str = "10.244.0.11";
/// The EndpointSlice controller skips pods whose Node it does not know.
const NODE: &str = "node-a";

async fn plane() -> &'static ControlPlane {
    shared(|| ControlPlaneOptions {
        controller_manager: true,
        crds: crds::all(&ConversionService::default()),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn manifest_docs(file: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(repo_path(file)).expect("read manifest"))
}

/// The Service names every admission webhook of the shipped configurations calls.
fn admission_services() -> BTreeSet<String> {
    let docs = manifest_docs("manifests/webhooks.yaml");
    let mut names = BTreeSet::new();
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        for config in find(&docs, kind, None) {
            for webhook in config["webhooks"].as_array().into_iter().flatten() {
                let service = &webhook["clientConfig"]["service"];
                assert_eq!(service["namespace"], NAMESPACE, "{webhook}");
                names.insert(service["name"].as_str().expect("service name").to_owned());
            }
        }
    }
    names
}

/// The Service names the shipped CRDs call for conversion.
fn conversion_services() -> BTreeSet<String> {
    let docs = manifest_docs("manifests/crds.yaml");
    find(&docs, "CustomResourceDefinition", None)
        .into_iter()
        .filter(|crd| crd["spec"]["conversion"]["strategy"] == "Webhook")
        .map(|crd| {
            let service = &crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
            service["name"].as_str().expect("service name").to_owned()
        })
        .collect()
}

/// A replica of the shipped Deployment, as its ReplicaSet would create it, with the status a
/// kubelet would write (no kubelet runs here).
async fn replica(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let docs = manifest_docs("manifests/deployment.yaml");
    let template = &find(&docs, "Deployment", Some("cftunnel"))[0]["spec"]["template"];
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": template["metadata"]["labels"] },
        "spec": template["spec"],
    }))
    .map(|mut pod: Pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(NODE.to_owned());
        }
        pod
    })
    .expect("pod from the Deployment template");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create replica");
    let now = jiff::Timestamp::now().to_string();
    let status = if ready { "True" } else { "False" };
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": now}],
        }})),
    )
    .await
    .expect("replica status");
}

/// `ip → ready` as the EndpointSlices of `service` say, once both replicas are listed.
async fn endpoints(slices: &Api<EndpointSlice>, service: &str) -> BTreeMap<String, bool> {
    let selector = format!("kubernetes.io/service-name={service}");
    poll_until(
        &format!("EndpointSlices of {service} listing both replicas"),
        WAIT,
        POLL,
        || async {
            let list = slices
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let mut seen = BTreeMap::new();
            for slice in list.items {
                for endpoint in slice.endpoints.into_iter().flatten() {
                    let ready = endpoint
                        .conditions
                        .as_ref()
                        .and_then(|c| c.ready)
                        .unwrap_or(false);
                    for address in endpoint.addresses {
                        seen.insert(address, ready);
                    }
                }
            }
            (seen.len() == 2).then_some(seen)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn admission_calls_reach_only_ready_replicas_and_conversion_reaches_every_replica() {
    let plane = plane().await;
    for file in ["manifests/namespace.yaml", "manifests/service.yaml"] {
        let path = repo_path(file);
        kubectl_ok(plane, &["apply", "-f", &path.to_string_lossy()], "");
    }
    let admin = plane.admin_client().expect("admin client");
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
    }))
    .expect("node json");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    replica(&pods, "cftunnel-ready", READY_IP, true).await;
    replica(&pods, "cftunnel-starting", STARTING_IP, false).await;
    let slices: Api<EndpointSlice> = Api::namespaced(admin, NAMESPACE);

    let admission = admission_services();
    let conversion = conversion_services();
    assert!(!admission.is_empty() && !conversion.is_empty());
    // Which replicas each Service routes to: the starting one only for conversion.
    let cases = [
        (&admission, false, "admission"),
        (&conversion, true, "conversion"),
    ];
    for (services, reaches_starting, what) in cases {
        for service in services {
            assert_eq!(
                endpoints(&slices, service).await,
                BTreeMap::from([
                    (READY_IP.to_owned(), true),
                    (STARTING_IP.to_owned(), reaches_starting)
                ]),
                "{what} Service {service}: is the starting replica routed to?"
            );
        }
    }
}

#[test]
fn the_chart_calls_the_same_services_as_the_manifests() {
    let chart = std::fs::read_to_string(repo_path("charts/cftunnel/templates/webhooks.yaml"))
        .expect("chart webhooks");
    let calls: BTreeSet<&str> = chart
        .lines()
        .filter_map(|l| l.split("service: {name: ").nth(1))
        .filter_map(|rest| rest.split(',').next())
        .collect();
    let expected = admission_services();
    assert_eq!(
        calls,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    let services = std::fs::read_to_string(repo_path("charts/cftunnel/templates/service.yaml"))
        .expect("chart services");
    let docs: Vec<&str> = services.split("\n---\n").collect();
    for (name, publishes) in [("cftunnel-webhook", true), ("cftunnel-admission", false)] {
        let doc = docs
            .iter()
            .find(|d| d.contains(&format!("name: {name}\n")))
            .unwrap_or_else(|| panic!("chart has no Service {name}"));
        assert_eq!(
            doc.contains("publishNotReadyAddresses: true"),
            publishes,
            "{name}"
        );
    }
}
