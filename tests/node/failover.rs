//! Losing the leader pod, and draining a replica through the Eviction API.

use std::time::{Duration, Instant};

use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams};

use super::common::{apply, kubectl};
use super::install::{SELECTOR, assert_two_replicas_one_leader, two_ready_replicas};
use super::install_support::NAMESPACE;
use super::pods::{POLL, WAIT};
use super::tunnel::{route_manifests, tunnel_manifest};

/// Lease 15 s + retry 2 s (docs/operations.md, "Leader election"); the margin is for 2 busy cores.
const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// Deleting the leader pod: the other replica takes the Lease, and a Tunnel created afterwards
/// is reconciled (its cloudflared Deployment appears).
pub async fn leader_pod_deletion_fails_over(plane: &ControlPlane, account_id: &str) {
    let old_leader = assert_two_replicas_one_leader(plane).await;
    let api: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(plane.admin_client().expect("client"), NAMESPACE);
    let began = Instant::now();
    api.delete(&old_leader, &DeleteParams::default())
        .await
        .expect("delete leader pod");
    // The other replica usually wins, but the Deployment's replacement pod starts at once and
    // competes for the released Lease too: either is a correct hand-over.
    let new_leader = tokio::time::timeout(FAILOVER_WAIT, async {
        loop {
            let live: Vec<String> = api
                .list(&ListParams::default().labels(SELECTOR))
                .await
                .map(|list| list.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .filter(|name| *name != old_leader)
                .collect();
            let holder = leases
                .get_opt("cftunnel-leader")
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
                .unwrap_or_default();
            // The holder identity is `<pod>_<random>`.
            if let Some(name) = live.into_iter().find(|name| {
                holder
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('_'))
            }) {
                return name;
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!("no replica but {old_leader} took the Lease within {FAILOVER_WAIT:?}")
    });
    assert_ne!(new_leader, old_leader);
    eprintln!(
        "leader {old_leader} deleted; {new_leader} led after {:.1?}",
        began.elapsed()
    );

    let ns = plane
        .create_namespace("node-failover")
        .await
        .expect("namespace");
    let both = format!(
        "{}---\n{}",
        route_manifests("after", "late"),
        tunnel_manifest("after", account_id)
    );
    let (ok, printed) = apply(plane, &ns, &both);
    assert!(ok, "{printed}");
    let deployments: Api<Deployment> = Api::namespaced(plane.admin_client().expect("client"), &ns);
    poll_until(
        "Tunnel after reconciled by the new leader",
        WAIT,
        POLL,
        || async {
            deployments
                .get_opt("after")
                .await
                .ok()
                .flatten()
                .map(|_| ())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    two_ready_replicas(plane).await;
}

/// With the node cordoned, the replacement of a deleted replica stays Pending: evicting the
/// other (Ready) replica is refused by the PodDisruptionBudget (429). Uncordoned, the
/// replacement becomes Ready and the same eviction is allowed.
pub async fn eviction_respects_the_disruption_budget(plane: &ControlPlane) {
    let began = Instant::now();
    let pods = two_ready_replicas(plane).await;
    eprintln!("eviction: two replicas Ready after {:.1?}", began.elapsed());
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let node = cftunnel_testenv::node::NODE_NAME;
    let (ok, printed) = kubectl(plane, &["cordon", node], "");
    assert!(ok, "{printed}");
    // A refused eviction is a 429, which kube's client retries by default (15 times, honouring
    // Retry-After: minutes); this step must see the refusal itself.
    let mut config = plane.admin_config();
    config.default_retry = false;
    let api: Api<Pod> = Api::namespaced(kube::Client::try_from(config).expect("client"), NAMESPACE);
    api.delete(&names[0], &DeleteParams::default())
        .await
        .expect("delete one replica");
    let budgets: Api<PodDisruptionBudget> =
        Api::namespaced(plane.admin_client().expect("client"), NAMESPACE);
    poll_until("the budget to allow no disruption", WAIT, POLL, || async {
        let status = budgets.get("cftunnel").await.ok()?.status?;
        (status.disruptions_allowed == Some(0) && status.current_healthy == Some(1)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "eviction: the budget allows none after {:.1?}",
        began.elapsed()
    );
    let refused = api.evict(&names[1], &EvictParams::default()).await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 429, "{status:?}");
            assert!(status.message.contains("disruption budget"), "{status:?}");
        }
        other => panic!("eviction of the last Ready replica not refused: {other:?}"),
    }
    eprintln!("eviction: refused after {:.1?}", began.elapsed());
    let (ok, printed) = kubectl(plane, &["uncordon", node], "");
    assert!(ok, "{printed}");
    // The scheduler may hold a pod it found unschedulable for minutes before trying again
    // (its unschedulable queue); a fresh replacement is scheduled at once.
    let pending = ListParams::default().fields("status.phase=Pending");
    for pod in api.list(&pending).await.expect("pending pods") {
        let name = pod.metadata.name.unwrap_or_default();
        api.delete(&name, &DeleteParams::default())
            .await
            .expect("delete the pending replacement");
    }
    let began = Instant::now();
    two_ready_replicas(plane).await;
    eprintln!(
        "two replicas Ready {:.1?} after the uncordon",
        began.elapsed()
    );
    let began = Instant::now();
    let seen = std::sync::Mutex::new(None::<String>);
    poll_until("the budget to allow one disruption", WAIT, POLL, || async {
        let status = budgets.get("cftunnel").await.ok()?.status?;
        // Each new status once, with when it was seen: where this wait spends its time.
        let shown = format!(
            "allowed {:?}, healthy {:?}/{:?} desired, expected {:?}, observed generation {:?}, disrupted {:?}",
            status.disruptions_allowed,
            status.current_healthy,
            status.desired_healthy,
            status.expected_pods,
            status.observed_generation,
            status.disrupted_pods.as_ref().map(|d| d.keys().cloned().collect::<Vec<_>>()),
        );
        let mut last = seen.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_deref() != Some(shown.as_str()) {
            eprintln!("eviction: budget at {:.1?}: {shown}", began.elapsed());
            *last = Some(shown);
        }
        (status.disruptions_allowed == Some(1)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "eviction: the budget allows one {:.1?} after both were Ready",
        began.elapsed()
    );
    api.evict(&names[1], &EvictParams::default())
        .await
        .expect("eviction allowed once both are Ready");
    let began = Instant::now();
    two_ready_replicas(plane).await;
    eprintln!(
        "two replicas Ready {:.1?} after the eviction",
        began.elapsed()
    );
}
