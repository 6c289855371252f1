//! A real node: containerd, runc, CNI and kubelet run pods, all inside a network namespace this
//! test creates (no interface to the outside, so no pod can send anything off the machine), and
//! nothing is left behind — after a normal end and after a SIGKILL.
//!
//! Each test re-executes this binary under `unshare --net --mount` (see
//! `testenv::node::namespace`).
//!
//! Needs: the Kubernetes binaries (`scripts/build-control-plane.sh`), the node packages
//! (`scripts/install-node-deps.sh`) and root.
#[path = "node/cleanup.rs"]
mod cleanup;
#[path = "node/pods.rs"]
mod pods;

use std::sync::Mutex;
use std::time::Instant;

use cftunnel::testenv::node::{inside_private_namespaces, rerun_in_private_namespaces};
use cftunnel::testenv::{ControlPlane, ControlPlaneOptions, NodeOptions};

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
fn node_is_cleaned_up_after_sigkill() {
    if !inside_private_namespaces() {
        let _turn = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
        return cleanup::sigkill_child_and_check();
    }
    runtime().block_on(cleanup::start_pod_and_die());
}
