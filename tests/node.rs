//! cftunnel on a real node: containerd, runc, CNI and kubelet run its pods and cloudflared's,
//! all inside a network namespace this test creates (no interface to the outside, so no pod can
//! send anything off the machine), installed as users install it, and nothing is left behind —
//! after a normal end and after a SIGKILL.
//!
//! Each test re-executes this binary under `unshare --net --mount` (see
//! `cftunnel_testenv::node::namespace`). The scenarios share one node and run in order in that child:
//! the kustomize install is uninstalled before the Helm install starts.
//!
//! Needs: the Kubernetes binaries (`scripts/build-control-plane.sh`), the node packages
//! (`scripts/install-node-deps.sh`), root, and a cloudflared binary in CFTUNNEL_CLOUDFLARED;
//! the images are built (and cached) by `scripts/build-image.sh` and
//! `scripts/build-cloudflared-image.sh` (see `node/images.rs` for overrides).
#[path = "node/cleanup.rs"]
mod cleanup;
mod common;
#[path = "node/failover.rs"]
mod failover;
#[path = "node/images.rs"]
mod images;
#[path = "node/install.rs"]
mod install;
mod install_support;
#[path = "node/pods.rs"]
mod pods;
#[path = "node/remote.rs"]
mod remote;
#[path = "node/tunnel.rs"]
mod tunnel;
#[path = "node/uninstall.rs"]
mod uninstall;

use std::sync::Mutex;
use std::time::Instant;

use cftunnel_testenv::node::{inside_private_namespaces, rerun_in_private_namespaces};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, NodeOptions};

/// Two nodes at once are too heavy for a 2-core machine: the tests of this binary take turns.
static ONE_NODE: Mutex<()> = Mutex::new(());

/// Runs `test_name` in a child inside fresh namespaces and fails with the child's status.
fn in_child(test_name: &str) {
    let _turn = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
    let status = rerun_in_private_namespaces(test_name, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        status.success(),
        "{test_name} inside its namespaces: {status}"
    );
}

/// Starts the control plane with a node.
async fn start_node(options: NodeOptions) -> ControlPlane {
    let began = Instant::now();
    let plane = ControlPlane::start(ControlPlaneOptions {
        node: Some(options),
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("control plane with a node: {e}"));
    eprintln!(
        "control plane + node (containerd, kubelet, scheduler) Ready in {:.1?}",
        began.elapsed()
    );
    plane
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[test]
fn node_runs_hardened_pods_and_leaves_nothing_behind() {
    if !inside_private_namespaces() {
        return in_child("node_runs_hardened_pods_and_leaves_nothing_behind");
    }
    runtime().block_on(async {
        let plane = start_node(NodeOptions::default()).await;
        pods::hardened_pod_runs_and_is_removed(&plane).await;
        let left = cleanup::Footprint::of(&plane);
        plane.stop().await;
        left.assert_gone();
    });
}

#[test]
fn cftunnel_installs_and_runs_on_a_real_node() {
    if !inside_private_namespaces() {
        return in_child("cftunnel_installs_and_runs_on_a_real_node");
    }
    let began = Instant::now();
    let images = images::images();
    eprintln!("images ready after {:.1?}", began.elapsed());
    runtime().block_on(async {
        let plane = start_node(NodeOptions::default()).await;
        install::import_images(&plane, &images);
        let cf = install::cloudflare().await;

        let overlay = tempfile::tempdir().expect("overlay dir");
        install::write_overlay(overlay.path(), &cf.url, &images.cloudflared);
        let overlay_arg = overlay.path().display().to_string();
        let applied = Instant::now();
        let (ok, printed) = common::kubectl(&plane, &["apply", "-k", &overlay_arg], "");
        assert!(ok, "kubectl apply -k: {printed}");
        install::assert_two_replicas_one_leader(&plane).await;
        // BENCHMARKS.md: the operator's start-to-ready time on the node.
        eprintln!(
            "start-to-ready: {:.1?} from `kubectl apply -k` to two replicas Ready and one leader",
            applied.elapsed()
        );
        let step = |name: &str| eprintln!("{name} done after {:.1?}", began.elapsed());
        install::webhook_answers_through_its_service(&plane).await;
        step("webhook through its Service");
        tunnel::tunnel_runs_hardened_cloudflared(&plane, &cf).await;
        step("tunnel with hardened cloudflared");
        remote::remote_tunnel_changes_routes_without_a_restart(&plane, &cf).await;
        step("remotely-managed tunnel");
        failover::leader_pod_deletion_fails_over(&plane, &cf.sim.account_id()).await;
        step("failover");
        failover::eviction_respects_the_disruption_budget(&plane).await;
        step("eviction");
        uninstall::release_tunnels_as_the_readme_says(&plane, &cf).await;
        step("tunnels released");
        uninstall::delete_kustomize_install(&plane, overlay.path()).await;
        step("kustomize install and uninstall");

        uninstall::helm_install_serves(&plane, &cf, &images.cloudflared).await;
        step("helm install");
        uninstall::helm_uninstall(&plane, &cf).await;
        step("helm uninstall");

        let left = cleanup::Footprint::of(&plane);
        plane.stop().await;
        left.assert_gone();
    });
    eprintln!("node scenarios took {:.1?}", began.elapsed());
}

#[test]
fn node_is_cleaned_up_after_sigkill() {
    if !inside_private_namespaces() {
        let _turn = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
        return cleanup::sigkill_child_and_check();
    }
    runtime().block_on(cleanup::start_pod_and_die());
}
