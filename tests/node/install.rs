//! Installing cftunnel as users do — `kubectl apply -k` of an overlay on manifests/, or
//! `helm install charts/cftunnel` — with the images mirrored to a private name, and what the
//! install must then do on a real node: two Ready replicas, one leader, the webhook answering
//! through its Service.

use std::path::Path;
use std::time::Duration;

use cftunnel_sim::{RunningSim, SimConfig, Simulator};
use cftunnel_testenv::node::forward::{Forwarder, forward_to_loopback};
use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::common::kubectl;
use super::images::{Images, UPSTREAM_CFTUNNEL};
use super::install_support::{NAMESPACE, repo_path};
use super::pods::{POLL, WAIT};

/// The registry name the images are "mirrored" to, as an air-gapped user does; the upstream
/// names are removed from the node, so only a working image override can start the pods.
pub const MIRROR: &str = "mirror.local/cftunnel/cftunnel";
pub const API_TOKEN: &str = "node-test-api-token";
pub const ZONE: &str = "example.com";
pub const SELECTOR: &str = "app.kubernetes.io/name=cftunnel,app.kubernetes.io/component=operator";
/// Pods pulling nothing and passing their startup probes take a while on 2 busy cores.
pub const INSTALL_WAIT: Duration = Duration::from_secs(300);

/// The simulated Cloudflare the in-cluster operator talks to, reached at the node address.
pub struct Cloudflare {
    pub sim: Simulator,
    _running: RunningSim,
    _forwarder: Forwarder,
    /// `http://10.78.0.1:<port>/client/v4`, for `--cloudflare-api-url`.
    pub url: String,
}

pub async fn cloudflare() -> Cloudflare {
    let sim = Simulator::new(SimConfig {
        zones: vec![ZONE.to_string()],
        tokens: vec![API_TOKEN.to_string()],
        ..SimConfig::default()
    });
    let running = sim
        .serve(([127, 0, 0, 1], 0).into())
        .await
        .expect("simulator");
    let forwarder = forward_to_loopback(running.addr).await.expect("forwarder");
    let url = format!("http://{}/client/v4", forwarder.addr);
    Cloudflare {
        sim,
        _running: running,
        _forwarder: forwarder,
        url,
    }
}

/// The cftunnel version the manifests deploy (the image tag).
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Imports both images, re-tags cftunnel's to [`MIRROR`] and drops the upstream name.
pub fn import_images(plane: &ControlPlane, images: &Images) {
    let node = plane.node().expect("node");
    node.import_image(&images.cftunnel_archive)
        .expect("import cftunnel image");
    node.import_image(&images.cloudflared_archive)
        .expect("import cloudflared image");
    let upstream = format!("{UPSTREAM_CFTUNNEL}:{}", version());
    let mirrored = format!("{MIRROR}:{}", version());
    for args in [
        vec![
            "images",
            "tag",
            "--force",
            upstream.as_str(),
            mirrored.as_str(),
        ],
        vec!["images", "rm", upstream.as_str()],
    ] {
        let out = node.ctr().args(&args).output().expect("ctr");
        assert!(
            out.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The overlay a user writes: manifests/ as base, the image set as `kustomize edit set image
/// ghcr.io/cftunnel/cftunnel=mirror.local/cftunnel/cftunnel:<version>` writes it, and two
/// arguments added by a JSON patch (docs/install.md's way to add arguments).
pub fn write_overlay(dir: &Path, api_url: &str, cloudflared_image: &str) {
    // A relative path: kustomize resolves bases relative to the overlay.
    let ups = dir.components().count().saturating_sub(1);
    let base = format!(
        "{}{}",
        "../".repeat(ups),
        repo_path("manifests")
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\nimages:\n  - name: {UPSTREAM_CFTUNNEL}\n    newName: {MIRROR}\n    newTag: {version}\npatches:\n  - target: {{kind: Deployment, name: cftunnel}}\n    patch: |-\n      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: --cloudflare-api-url={api_url}}}\n      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: --cloudflared-image={cloudflared_image}}}\n",
        version = version(),
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).expect("write overlay");
}

/// Waits until exactly two operator pods are Running and Ready; returns their names.
pub async fn two_ready_replicas(plane: &ControlPlane) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), NAMESPACE);
    poll_until(
        "two cftunnel pods Running and Ready",
        INSTALL_WAIT,
        POLL,
        || async {
            let list = pods
                .list(&ListParams::default().labels(SELECTOR))
                .await
                .ok()?;
            let ready: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
                .collect();
            (ready.len() == 2).then_some(ready)
        },
    )
    .await
    .unwrap_or_else(|e| {
        let (_, printed) = kubectl(
            plane,
            &["get", "pods,events", "-n", NAMESPACE, "-o", "wide"],
            "",
        );
        panic!("{e}\n{printed}")
    })
}

pub fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod named by the Lease `cftunnel-leader` (holder = `<pod name>_<suffix>`), once the
/// holder is one of `candidates`.
pub async fn leader(plane: &ControlPlane, candidates: &[String]) -> String {
    let leases: Api<Lease> = Api::namespaced(plane.admin_client().expect("client"), NAMESPACE);
    poll_until(
        "the Lease cftunnel-leader to name a running replica",
        WAIT,
        POLL,
        || async {
            let lease = leases.get_opt("cftunnel-leader").await.ok().flatten()?;
            let holder = lease.spec?.holder_identity?;
            candidates
                .iter()
                .find(|name| {
                    holder
                        .strip_prefix(name.as_str())
                        .is_some_and(|s| s.starts_with('_'))
                })
                .cloned()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `cftunnel_leader` from a pod's `/metrics`, read over the pod network from the node.
pub async fn leader_metric(pod: &Pod) -> Option<String> {
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let body = reqwest::get(format!("http://{ip}:8080/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix("cftunnel_leader "))
        .map(|v| v.trim().to_string())
}

/// Two replicas Ready, the Lease naming one of them, and exactly that one reporting
/// `cftunnel_leader 1` on its metrics.
pub async fn assert_two_replicas_one_leader(plane: &ControlPlane) -> String {
    let pods = two_ready_replicas(plane).await;
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let leader = leader(plane, &names).await;
    let pods_ref = &pods;
    let leader_ref = &leader;
    poll_until(
        "exactly the Lease holder to report cftunnel_leader 1",
        WAIT,
        POLL,
        || async move {
            for pod in pods_ref {
                let is_leader = pod.metadata.name.as_ref() == Some(leader_ref);
                let want = if is_leader { "1" } else { "0" };
                if leader_metric(pod).await.as_deref() != Some(want) {
                    return None;
                }
            }
            Some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    leader
}

/// A user's cloudflared Deployment, labelled for the workload webhook.
const USER_CLOUDFLARED: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: my-cloudflared\n  labels: {cfargotunnel.com/app: cloudflared}\nspec:\n  replicas: 0\n  selector: {matchLabels: {app: my-cloudflared}}\n  template:\n    metadata: {labels: {app: my-cloudflared, cfargotunnel.com/app: cloudflared}}\n    spec:\n      containers:\n        - name: cloudflared\n          image: cloudflare/cloudflared:2026.8.2\n          args: [tunnel, --metrics, 0.0.0.0:2000, run]\n";

/// A Tunnel only the webhook refuses (the deployPatch is a string CEL cannot read).
const BAD_TUNNEL: &str = "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata: {name: bad}\nspec:\n  newTunnel: {name: bad}\n  cloudflare: {domain: example.com, secret: cloudflare-secrets, accountId: 0123456789abcdef0123456789abcdef}\n  deployPatch: |\n    spec: {template: {spec: {hostNetwork: true}}}\n";

/// A Tunnel written for v1alpha1 (`size`), stored as v1alpha2 by the conversion webhook.
const V1ALPHA1_TUNNEL: &str = "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: Tunnel\nmetadata: {name: old-style}\nspec:\n  size: 3\n  newTunnel: {name: old-style}\n  cloudflare: {domain: example.com, secret: no-such-secret, accountId: 0123456789abcdef0123456789abcdef}\n";

/// The webhook, reached by the API server through the `cftunnel-webhook` Service: refuses a bad
/// Tunnel with its message, hardens a user's cloudflared Deployment, converts v1alpha1.
pub async fn webhook_answers_through_its_service(plane: &ControlPlane) {
    let ns = plane
        .create_namespace("node-webhook")
        .await
        .expect("namespace");
    let (ok, printed) = super::common::apply(plane, &ns, BAD_TUNNEL);
    assert!(!ok, "bad Tunnel accepted: {printed}");
    assert!(
        printed.contains("admission webhook \"tunnels.validate.cfargotunnel.com\" denied the request")
            && printed.contains("spec.deployPatch: spec.template.spec.hostNetwork: true is refused; cloudflared needs no host namespace, remove the field"),
        "{printed}"
    );

    let (ok, printed) = super::common::apply(plane, &ns, USER_CLOUDFLARED);
    assert!(ok, "{printed}");
    let (ok, json) = kubectl(
        plane,
        &["get", "deployment/my-cloudflared", "-n", &ns, "-o", "json"],
        "",
    );
    assert!(ok, "{json}");
    let deployment: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &pod["containers"][0]["securityContext"];
    assert_eq!(c["allowPrivilegeEscalation"], false);
    assert_eq!(c["readOnlyRootFilesystem"], true);
    assert_eq!(c["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(
        pod["containers"][0]["livenessProbe"]["httpGet"]["path"],
        "/healthcheck"
    );

    let (ok, printed) = super::common::apply(plane, &ns, V1ALPHA1_TUNNEL);
    assert!(ok, "{printed}");
    let (ok, json) = kubectl(
        plane,
        &[
            "get",
            "tunnels.v1alpha2.networking.cfargotunnel.com/old-style",
            "-n",
            &ns,
            "-o",
            "json",
        ],
        "",
    );
    assert!(ok, "{json}");
    let tunnel: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(tunnel["apiVersion"], "networking.cfargotunnel.com/v1alpha2");
    assert!(tunnel["spec"].get("size").is_none(), "{tunnel}");
    let patch = tunnel["spec"]["deployPatch"].as_str().unwrap_or_default();
    assert!(
        patch.contains("replicas") && patch.contains('3'),
        "size moved into deployPatch: {patch}"
    );
    let (ok, json) = kubectl(
        plane,
        &[
            "get",
            "tunnels.v1alpha1.networking.cfargotunnel.com/old-style",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.size}",
        ],
        "",
    );
    assert!(ok, "{json}");
    // kubectl prints the API server's deprecation warning (stderr) after the value (stdout).
    let (size, warning) = json.split_once("Warning:").unwrap_or((json.as_str(), ""));
    assert_eq!(size.trim(), "3", "read back as v1alpha1: {json}");
    assert!(
        warning.contains("v1alpha1 Tunnel is deprecated; use v1alpha2"),
        "deprecation warning: {json}"
    );
    let (ok, printed) = kubectl(plane, &["delete", "namespace", &ns, "--wait=false"], "");
    assert!(ok, "{printed}");
}
