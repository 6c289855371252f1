//! Uninstalling in the order of docs/install.md, then `helm install` of the chart on the same node.

use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::ListParams;

use super::common::kubectl;
use super::install::{
    Cloudflare, MIRROR, ZONE, assert_two_replicas_one_leader, version,
    webhook_answers_through_its_service,
};
use super::install_support::{NAMESPACE, repo_path};
use super::pods::{POLL, WAIT};

const SECRET_GUARD: &str = "cfargotunnel.com/secret-in-use";

fn kubectl_ok(plane: &ControlPlane, args: &[&str]) -> String {
    let (ok, printed) = kubectl(plane, args, "");
    assert!(ok, "kubectl {args:?}:\n{printed}");
    printed
}

/// The first two steps of docs/install.md's uninstall: bindings, then tunnels (kubectl waits for cftunnel's cleanup).
/// Then nothing of cftunnel's is left: no tunnel object, no Secret guard finalizer, every
/// tunnel deleted at Cloudflare, no DNS record in the zone.
pub async fn release_tunnels_as_the_readme_says(plane: &ControlPlane, cf: &Cloudflare) {
    kubectl_ok(
        plane,
        &["delete", "tunnelbindings", "--all", "-A", "--timeout=180s"],
    );
    kubectl_ok(
        plane,
        &["delete", "tunnels", "--all", "-A", "--timeout=180s"],
    );
    kubectl_ok(
        plane,
        &["delete", "clustertunnels", "--all", "--timeout=180s"],
    );
    let left = kubectl_ok(
        plane,
        &[
            "get",
            "tunnels,clustertunnels,tunnelbindings",
            "-A",
            "-o",
            "name",
        ],
    );
    assert_eq!(left.trim(), "", "tunnel objects left");
    let secrets: Api<Secret> = Api::all(plane.admin_client().expect("client"));
    poll_until("no Secret guard finalizer left", WAIT, POLL, || async {
        let list = secrets.list(&ListParams::default()).await.ok()?;
        let guarded: Vec<String> = list
            .items
            .iter()
            .filter(|s| {
                s.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == SECRET_GUARD))
            })
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        guarded.is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let live: Vec<String> = cf
        .sim
        .tunnels()
        .into_iter()
        .filter(|t| t.deleted_at.is_none())
        .map(|t| t.name)
        .collect();
    assert!(live.is_empty(), "tunnels left at Cloudflare: {live:?}");
    let records: Vec<String> = cf
        .sim
        .dns_records(ZONE)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert!(records.is_empty(), "DNS records left: {records:?}");
}

/// Waits until cftunnel's namespace is gone (its deletion finishes asynchronously).
pub async fn wait_namespace_gone(plane: &ControlPlane) {
    let namespaces: Api<Namespace> = Api::all(plane.admin_client().expect("client"));
    poll_until(
        "namespace cftunnel-system deleted",
        WAIT * 2,
        POLL,
        || async {
            namespaces
                .get_opt(NAMESPACE)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The last step for the kustomize install: `kubectl delete -k` of the overlay.
pub async fn delete_kustomize_install(plane: &ControlPlane, overlay: &std::path::Path) {
    kubectl_ok(
        plane,
        &[
            "delete",
            "-k",
            &overlay.display().to_string(),
            "--timeout=180s",
        ],
    );
    wait_namespace_gone(plane).await;
}

/// `helm install` with the mirrored image, the simulator's URL and the cloudflared image.
pub async fn helm_install_serves(plane: &ControlPlane, cf: &Cloudflare, cloudflared_image: &str) {
    let chart = repo_path("charts/cftunnel");
    let out = plane
        .helm()
        .args(["install", "cftunnel", &chart.display().to_string()])
        .args([
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--wait=false",
        ])
        .args([
            "--kubeconfig",
            &plane.admin_kubeconfig().display().to_string(),
        ])
        .args(["--set", &format!("image.repository={MIRROR}")])
        .args(["--set", &format!("image.tag={}", version())])
        .args(["--set", &format!("cloudflare.apiUrl={}", cf.url)])
        .args(["--set", &format!("cloudflared.image={cloudflared_image}")])
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_two_replicas_one_leader(plane).await;
    webhook_answers_through_its_service(plane).await;
}

/// `helm uninstall` after the tunnels are released: the release's namespace objects go.
pub async fn helm_uninstall(plane: &ControlPlane, cf: &Cloudflare) {
    release_tunnels_as_the_readme_says(plane, cf).await;
    let out = plane
        .helm()
        .args([
            "uninstall",
            "cftunnel",
            "--namespace",
            NAMESPACE,
            "--wait",
            "--timeout",
            "3m",
        ])
        .args([
            "--kubeconfig",
            &plane.admin_kubeconfig().display().to_string(),
        ])
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm uninstall: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = kubectl_ok(
        plane,
        &[
            "get",
            "deploy,pods,secrets,leases",
            "-n",
            NAMESPACE,
            "-o",
            "name",
            "--ignore-not-found",
        ],
    );
    // What cftunnel creates at run time is not part of the release; the last step of docs/install.md's
    // uninstall, deleting the namespace, removes it.
    let mut cftunnel: Vec<&str> = left
        .lines()
        .filter(|l| l.contains("cftunnel") && !l.starts_with("pod/"))
        .collect();
    cftunnel.sort_unstable();
    assert_eq!(
        cftunnel,
        vec![
            "lease.coordination.k8s.io/cftunnel-leader",
            "secret/cftunnel-webhook-ca",
            "secret/cftunnel-webhook-tls",
        ],
        "left in {NAMESPACE} after helm uninstall"
    );
    kubectl_ok(plane, &["delete", "namespace", NAMESPACE, "--wait=false"]);
    wait_namespace_gone(plane).await;
}
