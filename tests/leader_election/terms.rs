//! Leadership terms own what they start: re-election after re-election runs the real
//! reconcilers (`wiring::run_term`) and leaves exactly the same watches and tasks behind.
use std::time::Duration;

use cftunnel::caches::ProcessCaches;
use cftunnel::caches::WatchScope;
use cftunnel::leader::{LeaderState, LeaderStatus, run_while_leading};
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::term::ControllerOptions;
use cftunnel_testenv::poll_until;
use kube::api::DeleteParams;
use tokio::sync::oneshot;

use crate::harness::{POLL, WAIT, fast_config, leases, operator_client, plane, wait_record};

const LEASE: &str = "terms";
/// The process caches (Tunnels, ClusterTunnels, TunnelBindings, Services, namespaces,
/// Ingresses, IngressClasses, AccessPolicies, NetworkRoutes, VirtualNetworks; the Gateway API
/// kinds are not installed here).
const PROCESS_WATCHES: usize = 10;
/// A term's caches when the watched namespace is the cluster-resource namespace: Secrets,
/// ConfigMaps, Deployments, DaemonSets.
const TERM_WATCHES: usize = 4;

/// Waits until `scope` counts `watches` watches and a task count that stays the same for a
/// second (start-up tasks such as the Secret guard's sweep have ended); returns that count.
async fn settled(scope: &Scope, watches: usize, what: &str) -> usize {
    poll_until(what, WAIT, POLL, || async {
        let before = (scope.live_watches(), scope.live_tasks());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = (scope.live_watches(), scope.live_tasks());
        (before == after && after.0 == watches).then_some(after.1)
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e} (watches {}, tasks {})",
            scope.live_watches(),
            scope.live_tasks()
        )
    })
}

#[tokio::test]
async fn ten_re_elections_leave_the_same_watches_and_tasks() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-terms")
        .await
        .expect("namespace");
    let operator = operator_client(plane);
    let watch = WatchScope {
        namespace: Some(ns.clone()),
        label_selector: Some(format!("terms-test={ns}")),
    };
    let options = ControllerOptions {
        cloudflare_api_url: "http://127.0.0.1:9".into(),
        cluster_resource_namespace: ns.clone(),
        ..ControllerOptions::default()
    };
    let process = Scope::root("process");
    let caches = ProcessCaches::start(&process, &operator, &watch, &Metrics::process());
    tokio::time::timeout(WAIT, caches.synced())
        .await
        .expect("process caches synced");
    let status = LeaderStatus::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let elector = tokio::spawn(run_while_leading(
        admin.clone(),
        Some(fast_config(&ns, LEASE, "terms-candidate")),
        status.clone(),
        process.clone(),
        async move {
            let _ = stopped.await;
        },
        {
            let (operator, watch, caches) = (operator.clone(), watch.clone(), caches.clone());
            let limiters = cftunnel_cloudflare::RateLimiters::new();
            move |term| {
                cftunnel::wiring::run_term(
                    term,
                    operator.clone(),
                    options.clone(),
                    watch.clone(),
                    caches.clone(),
                    Metrics::process(),
                    limiters.clone(),
                )
            }
        },
    ));
    let leading = || {
        let status = status.clone();
        async move { status.is_leading().then_some(()) }
    };
    poll_until("the first term", WAIT, POLL, leading)
        .await
        .expect("leads");
    let baseline = settled(
        &process,
        PROCESS_WATCHES + TERM_WATCHES,
        "the first term settles",
    )
    .await;

    for round in 1..=10 {
        let before = wait_record(&admin, &ns, LEASE, "a holder", |r| !r.holder.is_empty()).await;
        // Deleting the lease ends the term at the next renewal; the elector then creates it
        // again and starts a new term.
        leases(&admin, &ns)
            .delete(LEASE, &DeleteParams::default())
            .await
            .expect("delete the lease");
        wait_record(&admin, &ns, LEASE, "the lease re-created", |r| {
            r.acquire_time != before.acquire_time
        })
        .await;
        poll_until("leading again", WAIT, POLL, leading)
            .await
            .expect("leads again");
        let tasks = settled(
            &process,
            PROCESS_WATCHES + TERM_WATCHES,
            "the new term settles",
        )
        .await;
        assert_eq!(
            tasks,
            baseline,
            "tasks after re-election {round} (watches {})",
            process.live_watches()
        );
    }

    let _ = stop.send(());
    tokio::time::timeout(WAIT, elector)
        .await
        .expect("elector stopped in time")
        .expect("elector task")
        .expect("valid config");
    assert_eq!(status.state(), LeaderState::Stopped);
    assert_eq!(
        process.live_watches(),
        PROCESS_WATCHES,
        "only the process caches are left once the last term ended"
    );
    assert!(process.shutdown(Duration::from_secs(10)).await);
    assert_eq!((process.live_watches(), process.live_tasks()), (0, 0));
}
