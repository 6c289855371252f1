//! Cloudflare down while tunnels and bindings are deleted: every object keeps its finalizer
//! (nothing is forgotten), and once Cloudflare answers again the tunnels are deleted at
//! Cloudflare, not merely disconnected, and their records removed.
use std::time::{Duration, Instant};

use cftunnel_sim::{Fault, FaultTarget};
use cftunnel_testenv::poll_until;
use cftunnel_types::names::FINALIZER;
use cftunnel_types::{Tunnel, TunnelBinding};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};

use super::harness::{
    Cloudflare, Operator, POLL, WAIT, Workload, apply_workload, operator_user, plane,
    wait_converged,
};

const WORKLOAD: Workload = Workload {
    tunnels: 5,
    routes: 2,
};
/// How long Cloudflare stays down after the deletions.
const OUTAGE: Duration = Duration::from_secs(30);

async fn delete_all(prefix: &str, cloudflare_down: bool) {
    let plane = plane().await;
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
    apply_workload(&admin, &ns, &cf.sim.account_id(), WORKLOAD).await;
    wait_converged(&admin, &ns, &cf, WORKLOAD).await;
    let ids = cf.live_tunnel_ids();
    assert_eq!(ids.len(), WORKLOAD.tunnels);

    if cloudflare_down {
        cf.sim
            .inject_on(FaultTarget::All, Fault::error_rate(1.0, 503));
    }
    let tunnels: Api<Tunnel> = Api::namespaced(admin.clone(), &ns);
    let bindings: Api<TunnelBinding> = Api::namespaced(admin.clone(), &ns);
    let all = ListParams::default();
    // Every binding goes, and every tunnel but the last: the last tunnel's binding must keep
    // its finalizer until its records are removed; the other bindings hand their records to
    // their tunnel's deletion, whose finalizer keeps them until the tunnel is cleaned up.
    let kept = format!("t{}", WORKLOAD.tunnels - 1);
    let kept_binding = format!("b{}", WORKLOAD.tunnels - 1);
    let kept_id = tunnels
        .get(&kept)
        .await
        .expect("kept tunnel")
        .status
        .and_then(|s| s.tunnel_id)
        .expect("id");
    bindings
        .delete_collection(&DeleteParams::default(), &all)
        .await
        .expect("delete bindings");
    for t in 0..WORKLOAD.tunnels - 1 {
        tunnels
            .delete(&format!("t{t}"), &DeleteParams::default())
            .await
            .expect("delete tunnel");
    }
    let records_before = cf.records().len();

    if cloudflare_down {
        let until = Instant::now() + OUTAGE;
        while Instant::now() < until {
            let left = tunnels.list(&all).await.expect("list").items;
            assert_eq!(
                left.len(),
                WORKLOAD.tunnels,
                "a tunnel went while Cloudflare was down"
            );
            for t in left.iter().filter(|t| t.name_any() != kept) {
                assert!(
                    t.finalizers().iter().any(|f| f == FINALIZER),
                    "{}",
                    t.name_any()
                );
                assert!(t.metadata.deletion_timestamp.is_some());
            }
            let binding = bindings.get(&kept_binding).await.expect("kept binding");
            assert!(binding.finalizers().iter().any(|f| f == FINALIZER));
            assert_eq!(
                cf.live_tunnel_ids(),
                ids,
                "a tunnel was deleted through a 503"
            );
            assert_eq!(
                cf.records().len(),
                records_before,
                "a record went through a 503"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let message = tunnels.get("t0").await.expect("t0").status.and_then(|s| {
            s.conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.message)
        });
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("deletion is blocked")),
            "{message:?}"
        );
        cf.sim.clear_faults();
    }
    poll_until(
        "the deleted tunnels and every binding gone",
        WAIT,
        POLL,
        || async {
            let left = tunnels.list(&all).await.ok()?.items.len()
                + bindings.list(&all).await.ok()?.items.len();
            (left == 1).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log()));
    poll_until("every record gone", WAIT, POLL, || async {
        cf.records().is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", cf.records()));
    assert_eq!(
        cf.live_tunnel_ids(),
        [kept_id].into_iter().collect(),
        "only the kept tunnel is live on Cloudflare"
    );
    let deleted = cf
        .sim
        .tunnels()
        .into_iter()
        .filter(|t| ids.contains(&t.id) && t.deleted_at.is_some())
        .count();
    assert_eq!(
        deleted,
        ids.len() - 1,
        "deleted at Cloudflare, not only disconnected"
    );
    assert!(operator.is_running());
}

#[tokio::test]
async fn tunnels_deleted_while_cloudflare_is_down_keep_their_finalizers_and_are_cleaned_up_once_it_answers()
 {
    delete_all("down-delete", true).await;
}

#[tokio::test]
async fn control_tunnels_deleted_while_cloudflare_answers_are_cleaned_up() {
    delete_all("calm-delete", false).await;
}
