//! Writes that Cloudflare applied but whose answers were lost (a dropped connection, a 500
//! after the commit): tunnel creates and DNS batches are tried again and find what the lost
//! write did, so there is no second tunnel and exactly one CNAME and one TXT per hostname.
use cftunnel_sim::{Fault, Operation};

use super::harness::{
    Cloudflare, Operator, Workload, add_tunnel, apply_workload, operator_user, plane,
    wait_converged,
};

const WORKLOAD: Workload = Workload {
    tunnels: 4,
    routes: 3,
};

async fn lose_answers(prefix: &str, lost: bool) {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin");
    let ns = plane.create_namespace(prefix).await.expect("namespace");
    let cf = Cloudflare::start();
    if lost {
        // The first two tunnel creates are applied and their answers lost: one to a dropped
        // connection, one to a 500. So is the first DNS write (a dropped connection); the
        // second wave below loses its DNS write to a 500.
        cf.sim
            .inject(Operation::CreateTunnel, Fault::drop_after_apply(1));
        cf.sim
            .inject(Operation::CreateTunnel, Fault::fail_after_apply(1, 500));
        for op in [Operation::BatchDnsRecords, Operation::CreateDnsRecord] {
            cf.sim.inject(op, Fault::drop_after_apply(1));
        }
    }
    let user = operator_user(plane);
    let mut operator = Operator::start(
        plane,
        user.kubeconfig(),
        &ns,
        &cf,
        prefix,
        &["--leader-elect=false"],
    );
    apply_workload(&admin, &ns, &cf.sim.account_id(), WORKLOAD).await;
    wait_converged(&admin, &ns, &cf, WORKLOAD).await;
    if lost {
        cf.sim.clear_faults();
        for op in [Operation::BatchDnsRecords, Operation::CreateDnsRecord] {
            cf.sim.inject(op, Fault::fail_after_apply(1, 500));
        }
    }
    add_tunnel(
        &admin,
        &ns,
        &cf.sim.account_id(),
        WORKLOAD.tunnels,
        WORKLOAD.routes,
    )
    .await;
    let grown = Workload {
        tunnels: WORKLOAD.tunnels + 1,
        ..WORKLOAD
    };
    wait_converged(&admin, &ns, &cf, grown).await;
    assert!(operator.is_running(), "{}", operator.log());
    let log = cf.sim.request_log();
    let writes: Vec<_> = log
        .iter()
        .filter(|r| r.operation.is_some_and(|o| o.method() != http::Method::GET))
        .map(|r| (r.operation, r.status))
        .collect();
    let lost_of = |op: Operation, status: u16| {
        log.iter()
            .filter(|r| r.operation == Some(op) && r.status == status)
            .count()
    };
    let dns_lost = |status| {
        lost_of(Operation::BatchDnsRecords, status) + lost_of(Operation::CreateDnsRecord, status)
    };
    let served = [
        lost_of(Operation::CreateTunnel, 0),
        lost_of(Operation::CreateTunnel, 500),
        dns_lost(0),
        dns_lost(500),
    ];
    match lost {
        true => assert_eq!(
            served,
            [1, 1, 1, 1],
            "every lost answer was served: {writes:?}"
        ),
        false => assert_eq!(served, [0, 0, 0, 0], "{writes:?}"),
    }
    // Every tunnel ever created is live: a lost create was adopted, never created again.
    assert_eq!(cf.sim.tunnels().len(), grown.tunnels);
}

#[tokio::test]
async fn tunnel_creates_and_dns_writes_whose_answers_are_lost_leave_no_duplicate() {
    lose_answers("lost", true).await;
}

#[tokio::test]
async fn control_tunnel_creates_and_dns_writes_answered_leave_no_duplicate() {
    lose_answers("answered", false).await;
}
