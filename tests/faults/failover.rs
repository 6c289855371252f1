//! Two replicas; the leader is killed with SIGKILL while its DNS batches are in flight. The
//! other takes the lease once it expired (the lease duration after the last renewal, plus the
//! retry period it polls at) and converges: no duplicate tunnel, no orphaned tunnel or record.
use std::time::Duration;

use cftunnel::leader::{LeaseRecord, record_of};
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};

use super::harness::{
    Cloudflare, Operator, POLL, WAIT, Workload, apply_workload, operator_user, plane,
    wait_converged,
};
use crate::install_support::{documents, find, kubectl_ok, repo_path};

const LEASE: &str = "cftunnel-leader";
/// What `cftunnel run` renews its lease with (docs/design.md §7.1).
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RETRY_PERIOD: Duration = Duration::from_secs(2);
const WORKLOAD: Workload = Workload {
    tunnels: 8,
    routes: 4,
};

/// The shipped leader-election Role and its binding, in `ns` instead of cftunnel-system, so
/// each test elects on a lease of its own.
fn grant_lease(plane: &ControlPlane, ns: &str) {
    let rbac = std::fs::read_to_string(repo_path("manifests/rbac.yaml")).expect("rbac.yaml");
    let docs = documents(&rbac);
    for kind in ["Role", "RoleBinding"] {
        for doc in find(&docs, kind, Some("cftunnel-leader-election")) {
            let mut doc = doc.clone();
            doc["metadata"]["namespace"] = serde_json::json!(ns);
            kubectl_ok(plane, &["apply", "-f", "-"], &doc.to_string());
        }
    }
}

async fn record(client: &Client, ns: &str) -> Option<LeaseRecord> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .map(|l| record_of(&l))
}

async fn failover(prefix: &str, kill: bool) {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin");
    let ns = plane.create_namespace(prefix).await.expect("namespace");
    grant_lease(plane, &ns);
    let cf = Cloudflare::start();
    // DNS batches take a while, so that the leader has some in flight when it is killed.
    cf.sim.inject(
        Operation::BatchDnsRecords,
        Fault::latency(Duration::from_millis(1500)),
    );
    let user = operator_user(plane);
    let election = ["--leader-election-namespace", ns.as_str()];
    let mut replicas = [
        Operator::start(
            plane,
            user.kubeconfig(),
            &ns,
            &cf,
            &format!("{prefix}-a"),
            &election,
        ),
        Operator::start(
            plane,
            user.kubeconfig(),
            &ns,
            &cf,
            &format!("{prefix}-b"),
            &election,
        ),
    ];
    let first = poll_until("a leader", WAIT, POLL, || async {
        record(&admin, &ns).await.filter(|r| !r.holder.is_empty())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let leader = replicas
        .iter()
        .position(|r| first.holder.starts_with(&format!("{}_", r.name)))
        .expect("the holder is one of the replicas");
    apply_workload(&admin, &ns, &cf.sim.account_id(), WORKLOAD).await;
    if kill {
        poll_until(
            "DNS batches in flight",
            WAIT,
            Duration::from_millis(50),
            || async { (cf.sim.calls(Operation::BatchDnsRecords) >= 1).then_some(()) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        replicas[leader].kill9();
        // Read after the kill: a renewal between a read before it and the kill would make
        // the dead leader's last renewal look older than it was.
        let before = record(&admin, &ns).await.expect("lease");
        let other = &replicas[1 - leader];
        let taken = poll_until("the other replica leads", WAIT, POLL, || async {
            record(&admin, &ns)
                .await
                .filter(|r| r.holder.starts_with(&format!("{}_", other.name)))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", other.log()));
        // Taken over by expiry, measured on the lease itself: from the dead leader's last
        // renewal to the new holder's acquisition.
        let last_renewal = before.renew_time.expect("renewed before the kill");
        let acquired = taken.acquire_time.expect("acquire time");
        let gap = Duration::try_from(acquired.duration_since(last_renewal)).unwrap_or_default();
        println!(
            "failover {prefix}: lease taken {:.1}s after the dead leader's last renewal",
            gap.as_secs_f64()
        );
        // The other replica sees the last renewal at its next poll and takes the lease at
        // its first poll after the duration: two retry periods (each jittered up to 20 %)
        // after the duration at most, and a few seconds for its calls on a busy machine.
        assert!(
            gap >= LEASE_DURATION,
            "taken over {gap:?} after the last renewal, before it expired"
        );
        assert!(
            gap <= LEASE_DURATION + RETRY_PERIOD.mul_f64(2.4) + Duration::from_secs(3),
            "taken over {gap:?} after the last renewal"
        );
        assert_eq!(taken.transitions, before.transitions + 1);
    }
    wait_converged(&admin, &ns, &cf, WORKLOAD).await;
    let survivor = if kill { 1 - leader } else { leader };
    assert!(
        replicas[survivor].is_running(),
        "{}",
        replicas[survivor].log()
    );
}

#[tokio::test]
async fn a_leader_killed_mid_write_is_replaced_within_the_lease_and_the_other_replica_converges() {
    failover("failover", true).await;
}

#[tokio::test]
async fn control_two_replicas_converge_under_one_leader() {
    failover("one-leader", false).await;
}
