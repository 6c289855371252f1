//! kube-apiserver stops for 30 s and comes back. `cftunnel run` survives it (same process, it
//! never exits), says not ready on `/readyz` while it cannot reach the API server and ready
//! again after, and its watches and reconcilers carry on without a restart: a tunnel and a
//! binding created after the outage converge.
use std::time::{Duration, Instant};

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use cftunnel_types::crds::{self, ConversionService};

use super::harness::{
    Cloudflare, Operator, POLL, WAIT, Workload, add_tunnel, apply_workload, operator_user, plane,
    wait_converged,
};
use crate::install_support::install_namespaces_and_rbac;

const OUTAGE: Duration = Duration::from_secs(30);
const BEFORE: Workload = Workload {
    tunnels: 2,
    routes: 2,
};
const AFTER: Workload = Workload {
    tunnels: 3,
    routes: 2,
};

async fn wait_readyz(operator: &Operator, status: u16, body: &str) {
    let result = poll_until(&format!("/readyz {status}"), WAIT, POLL, || async {
        let (got, text) = operator.readyz().await?;
        (got == status && text.contains(body)).then_some(())
    })
    .await;
    if let Err(e) = result {
        panic!("{e}: {:?}\n{}", operator.readyz().await, operator.log());
    }
}

/// Runs the workload across an outage of the API server when `plane` is given (a plane of the
/// test's own: the shared one must not stop), else on the shared plane without one.
async fn across(prefix: &str, mut own: Option<ControlPlane>) {
    let shared = plane().await;
    let plane = own.as_ref().unwrap_or(shared);
    let admin = plane.admin_client().expect("admin");
    let ns = plane.create_namespace(prefix).await.expect("namespace");
    let cf = Cloudflare::start();
    let user = operator_user(plane);
    let mut operator = Operator::start(
        plane,
        user.kubeconfig(),
        &ns,
        &cf,
        prefix,
        &["--leader-elect=false"],
    );
    let pid = operator.pid();
    apply_workload(&admin, &ns, &cf.sim.account_id(), BEFORE).await;
    wait_converged(&admin, &ns, &cf, BEFORE).await;
    wait_readyz(&operator, 200, "ready").await;

    if let Some(plane) = own.as_mut() {
        let stopped = Instant::now();
        plane.stop_apiserver().await;
        wait_readyz(&operator, 503, "the API server does not answer").await;
        while stopped.elapsed() < OUTAGE {
            assert!(
                operator.is_running(),
                "cftunnel exited during the outage:\n{}",
                operator.log()
            );
            let health = operator.readyz().await.map(|(status, _)| status);
            assert_eq!(health, Some(503), "ready while the API server is gone");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        plane.start_apiserver().await.expect("kube-apiserver back");
        wait_readyz(&operator, 200, "ready").await;
    }
    let plane = own.as_ref().unwrap_or(shared);
    let admin = plane.admin_client().expect("admin");
    for t in BEFORE.tunnels..AFTER.tunnels {
        add_tunnel(&admin, &ns, &cf.sim.account_id(), t, AFTER.routes).await;
    }
    wait_converged(&admin, &ns, &cf, AFTER).await;
    assert!(operator.is_running(), "{}", operator.log());
    assert_eq!(operator.pid(), pid, "the same process throughout");
    if let Some(plane) = own {
        plane.stop().await;
    }
}

#[tokio::test]
async fn cftunnel_survives_a_thirty_second_api_server_outage_not_ready_during_it_and_converges_after()
 {
    let plane = ControlPlane::start(ControlPlaneOptions {
        crds: crds::all(&ConversionService::default()),
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    install_namespaces_and_rbac(&plane).await;
    across("outage", Some(plane)).await;
}

#[tokio::test]
async fn control_cftunnel_without_an_api_server_outage_stays_ready_and_converges() {
    across("no-outage", None).await;
}
