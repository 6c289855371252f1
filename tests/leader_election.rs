//! Leader election of the reconcilers against a real kube-apiserver: one leader at a time,
//! hand-over on release, the leader stopping at once when it loses the lease, the Go operator's
//! lease respected, and Lease fields as Kubernetes' own leader election writes them.
#[path = "leader_election/binary.rs"]
mod binary;
mod common;
#[path = "leader_election/deposed.rs"]
mod deposed;
#[path = "leader_election/go_lease.rs"]
mod go_lease;
#[path = "leader_election/harness.rs"]
mod harness;
mod install_support;
#[path = "leader_election/proxy.rs"]
mod proxy;
#[path = "leader_election/terms.rs"]
mod terms;

use std::time::Duration;

use cftunnel::leader::LeaderState;
use harness::{Candidate, Ledger, fast_config, plane, read_record, wait_record};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use proxy::CuttableProxy;
use serde_json::json;

const LEASE: &str = "leader";

#[tokio::test]
async fn exactly_one_of_two_candidates_leads_and_its_release_hands_over() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-one")
        .await
        .expect("namespace");
    // A lease longer than any wait: only a release (not expiry) can hand over. A missing Go
    // operator namespace must not block either candidate.
    let config = |identity: &str| {
        let mut config = fast_config(&ns, LEASE, identity);
        config.lease_duration = Duration::from_secs(3600);
        config.renew_deadline = Duration::from_secs(10);
        config.go_operator_lease_namespace = Some("no-go-operator-here".into());
        config
    };
    let ledger = Ledger::default();
    let a = Candidate::start(admin.clone(), config("candidate-a"), &ledger);
    let b = Candidate::start(admin.clone(), config("candidate-b"), &ledger);

    let first = wait_record(&admin, &ns, LEASE, "a holder", |r| !r.holder.is_empty()).await;
    let (leader, other) = if first.holder == a.identity {
        (a, b)
    } else {
        (b, a)
    };
    leader
        .wait_for(LeaderState::Leading, "the holder leads")
        .await;
    // Three renewals later the other is still waiting and has never run.
    let mut renew_time = first.renew_time;
    for _ in 0..3 {
        let renewed = wait_record(&admin, &ns, LEASE, "a renewal", |r| {
            r.renew_time > renew_time
        })
        .await;
        assert_eq!(renewed.holder, leader.identity);
        renew_time = renewed.renew_time;
    }
    assert_eq!(other.status.state(), LeaderState::Candidate);
    assert!(!other.is_running());
    assert!(leader.is_running());

    leader.shutdown().await;
    other
        .wait_for(
            LeaderState::Leading,
            "the other takes over after the release",
        )
        .await;
    let record = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert_eq!(record.holder, other.identity);
    assert_eq!(record.transitions, 1);
    assert!(other.is_running());
    assert_eq!(ledger.starts(), 2);
    assert_eq!(ledger.max_concurrent(), 1, "two candidates ran at once");
    other.shutdown().await;
}

#[tokio::test]
async fn lease_fields_are_written_as_kubernetes_leader_election_writes_them() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-fields")
        .await
        .expect("namespace");
    let ledger = Ledger::default();
    let a = Candidate::start(admin.clone(), fast_config(&ns, LEASE, "a_1234"), &ledger);

    // Created: both times now, no transition yet, the duration in whole seconds.
    let created = wait_record(&admin, &ns, LEASE, "created", |r| r.holder == "a_1234").await;
    assert_eq!(created.duration_seconds, 4);
    assert_eq!(created.transitions, 0);
    // (acquireTime equals renewTime at creation; a renewal may already have moved renewTime.)
    assert!(created.acquire_time.is_some());
    assert!(created.acquire_time <= created.renew_time);
    let wire = raw_spec(&admin, &ns).await;
    for field in ["acquireTime", "renewTime"] {
        let text = wire[field].as_str().unwrap_or_default();
        assert!(is_micro_time(text), "{field} = {text:?}");
    }
    // Renewed: only renewTime moves.
    let renewed = wait_record(&admin, &ns, LEASE, "renewed", |r| {
        r.renew_time > created.renew_time
    })
    .await;
    assert_eq!(renewed.acquire_time, created.acquire_time);
    assert_eq!(
        (renewed.holder.as_str(), renewed.transitions),
        ("a_1234", 0)
    );

    // Released: empty holder, a one-second duration, both times now, transitions kept.
    a.shutdown().await;
    let released = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert_eq!(released.holder, "");
    assert_eq!(raw_spec(&admin, &ns).await["holderIdentity"], "");
    assert_eq!(released.duration_seconds, 1);
    assert_eq!(released.transitions, 0);
    assert_eq!(released.acquire_time, released.renew_time);
    assert!(released.renew_time > renewed.renew_time);

    // Taken over: one transition, a new acquireTime.
    let b = Candidate::start(admin.clone(), fast_config(&ns, LEASE, "b_5678"), &ledger);
    let taken = wait_record(&admin, &ns, LEASE, "taken over", |r| r.holder == "b_5678").await;
    assert_eq!(taken.transitions, 1);
    assert_eq!(taken.duration_seconds, 4);
    assert!(taken.acquire_time > released.acquire_time);
    b.shutdown().await;
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_before_the_other_takes_over() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-cut")
        .await
        .expect("namespace");
    let upstream = plane
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .expect("API server address");
    let proxy = CuttableProxy::start(upstream).await;
    let through_proxy =
        Client::try_from(proxy.config(plane.admin_config())).expect("proxied client");
    let ledger = Ledger::default();
    let a = Candidate::start(through_proxy, fast_config(&ns, LEASE, "cut-a"), &ledger);
    a.wait_for(LeaderState::Leading, "a leads").await;
    let b = Candidate::start(admin.clone(), fast_config(&ns, LEASE, "direct-b"), &ledger);
    b.wait_for(LeaderState::Candidate, "b competes").await;

    proxy.cut();
    a.wait_stopped_leading("a stops once its renew deadline passes")
        .await;
    b.wait_for(LeaderState::Leading, "b takes over the expired lease")
        .await;
    assert!(b.is_running());
    assert_eq!(ledger.max_concurrent(), 1, "a still ran when b started");
    let record = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert_eq!(record.holder, "direct-b");
    b.shutdown().await;
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_at_once_and_waits() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-taken")
        .await
        .expect("namespace");
    let ledger = Ledger::default();
    let a = Candidate::start(admin.clone(), fast_config(&ns, LEASE, "taken-a"), &ledger);
    a.wait_for(LeaderState::Leading, "a leads").await;

    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    // A merge patch carries no resourceVersion: a replace of what the test read would conflict
    // with a's renewal (every 250 ms) whenever one landed between the read and the write.
    let steal = json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}});
    leases
        .patch(LEASE, &PatchParams::default(), &Patch::Merge(&steal))
        .await
        .expect("steal the lease");
    a.wait_stopped_leading("a stops when the lease names another holder")
        .await;
    a.wait_for(LeaderState::Candidate, "a waits").await;
    let record = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert_eq!(record.holder, "intruder", "a overwrote a live holder");
    assert_eq!(ledger.starts(), 1);
    a.shutdown().await;
    let record = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert_eq!(
        record.holder, "intruder",
        "a released a lease it did not hold"
    );
}

#[tokio::test]
async fn a_deleted_lease_stops_the_leader_which_then_competes_again() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-deleted")
        .await
        .expect("namespace");
    let ledger = Ledger::default();
    let a = Candidate::start(admin.clone(), fast_config(&ns, LEASE, "deleted-a"), &ledger);
    a.wait_for(LeaderState::Leading, "a leads").await;
    let first = read_record(&admin, &ns, LEASE).await.expect("lease");

    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    leases
        .delete(LEASE, &DeleteParams::default())
        .await
        .expect("delete the lease");
    let record = wait_record(&admin, &ns, LEASE, "a new lease", |r| {
        r.acquire_time > first.acquire_time
    })
    .await;
    assert_eq!(
        (record.holder.as_str(), record.transitions),
        ("deleted-a", 0)
    );
    harness::wait_until("a restarts its work", || {
        ledger.starts() >= 2 && a.is_running()
    })
    .await;
    assert_eq!(ledger.max_concurrent(), 1);
    a.shutdown().await;
}

#[tokio::test]
async fn a_live_go_operator_lease_blocks_leadership_and_an_expired_one_does_not() {
    go_lease::live_lease_blocks_and_expired_one_does_not().await;
}

#[tokio::test]
async fn an_unreadable_go_operator_lease_does_not_block_leadership() {
    go_lease::unreadable_lease_does_not_block().await;
}

#[tokio::test]
async fn cftunnel_run_leads_under_its_pod_name_and_releases_on_sigterm() {
    binary::run_leads_and_releases_on_sigterm().await;
}

/// The lease's `spec` as the API server serializes it.
async fn raw_spec(client: &Client, ns: &str) -> serde_json::Value {
    let resource = ApiResource::erase::<Lease>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let object = api.get(LEASE).await.expect("raw lease");
    object.data["spec"].clone()
}

/// Kubernetes' MicroTime: `2006-01-02T15:04:05.000000Z`.
fn is_micro_time(text: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
    text.len() == shape.len()
        && text.chars().zip(shape.chars()).all(|(c, s)| match s {
            'd' => c.is_ascii_digit(),
            other => c == other,
        })
}

#[tokio::test]
async fn a_deposed_leader_sends_no_cloudflare_write_after_it_lost_the_lease() {
    deposed::a_deposed_leader_sends_no_cloudflare_write_after_it_lost_the_lease().await;
}
