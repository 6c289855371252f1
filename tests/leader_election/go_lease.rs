//! The Go operator's lease `9f193cf8.cfargotunnel.com`: a live holder keeps cftunnel from
//! leading (and makes a leader step down); an expired or unreadable lease does not.
use std::time::Duration;

use cftunnel::leader::{DEFAULT_LEASE_NAME, GO_OPERATOR_LEASE, LeaderState};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::task::JoinHandle;

use super::harness::{
    Candidate, Ledger, OPERATOR_NAMESPACE, fast_config, operator_client, plane, read_record,
};

/// Creates the Go operator's lease in `ns`, held by `holder` for `seconds`.
async fn create_go_lease(admin: &Client, ns: &str, holder: &str, seconds: i32) {
    let now = MicroTime(jiff::Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(GO_OPERATOR_LEASE.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &lease)
        .await
        .expect("create the Go operator's lease");
}

/// Renews the Go operator's lease as its holder every 300 ms until aborted.
fn keep_renewing(admin: &Client, ns: &str, holder: &str) -> JoinHandle<()> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
    let holder = holder.to_string();
    tokio::spawn(async move {
        loop {
            let now = MicroTime(jiff::Timestamp::now());
            let patch = json!({"spec": {"holderIdentity": holder, "renewTime": now}});
            let _ = leases
                .patch(
                    GO_OPERATOR_LEASE,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// Runs as the operator's own user with the shipped RBAC, on its real lease name.
pub async fn live_lease_blocks_and_expired_one_does_not() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let go_ns = plane
        .create_namespace("go-operator")
        .await
        .expect("namespace");
    create_go_lease(&admin, &go_ns, "go-pod-1_0a1b", 6).await;
    let renewer = keep_renewing(&admin, &go_ns, "go-pod-1_0a1b");

    let mut config = fast_config(OPERATOR_NAMESPACE, DEFAULT_LEASE_NAME, "operator-a");
    config.go_operator_lease_namespace = Some(go_ns.clone());
    let ledger = Ledger::default();
    let a = Candidate::start(operator_client(plane), config, &ledger);
    a.wait_for(
        LeaderState::BlockedByGoOperator,
        "blocked by the live Go lease",
    )
    .await;
    // Still blocked some renewals later, never having touched its own lease.
    let go_record = || read_record(&admin, &go_ns, GO_OPERATOR_LEASE);
    let seen = go_record().await.expect("Go lease");
    super::harness::wait_record(&admin, &go_ns, GO_OPERATOR_LEASE, "Go renewals", |r| {
        r.renew_time > seen.renew_time
    })
    .await;
    assert_eq!(a.status.state(), LeaderState::BlockedByGoOperator);
    assert_eq!(ledger.starts(), 0);
    let own = read_record(&admin, OPERATOR_NAMESPACE, DEFAULT_LEASE_NAME).await;
    assert!(
        own.as_ref().is_none_or(|r| r.holder != "operator-a"),
        "{own:?}"
    );

    // The Go operator stops renewing (scaled to 0 without releasing): its lease expires.
    renewer.abort();
    let _ = renewer.await;
    a.wait_for(LeaderState::Leading, "leads once the Go lease expired")
        .await;
    let own = read_record(&admin, OPERATOR_NAMESPACE, DEFAULT_LEASE_NAME).await;
    assert_eq!(own.map(|r| r.holder), Some("operator-a".to_string()));

    // The Go operator comes back: cftunnel steps down, releases its lease and waits.
    let renewer = keep_renewing(&admin, &go_ns, "go-pod-2_9f8e");
    a.wait_for(
        LeaderState::BlockedByGoOperator,
        "steps down for the Go operator",
    )
    .await;
    assert!(!a.is_running());
    let own = read_record(&admin, OPERATOR_NAMESPACE, DEFAULT_LEASE_NAME).await;
    assert_eq!(own.map(|r| r.holder), Some(String::new()));
    renewer.abort();
    assert_eq!(ledger.max_concurrent(), 1);
    a.shutdown().await;
}

/// A candidate allowed to use leases only in its own namespace gets 403 on the Go lease.
pub async fn unreadable_lease_does_not_block() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let go_ns = plane
        .create_namespace("go-hidden")
        .await
        .expect("namespace");
    create_go_lease(&admin, &go_ns, "go-pod_live", 3600).await;
    let own_ns = plane
        .create_namespace("leader-own")
        .await
        .expect("namespace");
    grant_leases(&admin, &own_ns, "leader-test-user").await;
    let user = plane
        .user("leader-test-user", &[])
        .expect("user")
        .client()
        .expect("user client");
    let forbidden = Api::<Lease>::namespaced(user.clone(), &go_ns)
        .get(GO_OPERATOR_LEASE)
        .await;
    assert!(
        matches!(&forbidden, Err(kube::Error::Api(status)) if status.code == 403),
        "{forbidden:?}"
    );

    let mut config = fast_config(&own_ns, "leader", "unprivileged-a");
    config.go_operator_lease_namespace = Some(go_ns);
    let ledger = Ledger::default();
    let a = Candidate::start(user, config, &ledger);
    a.wait_for(
        LeaderState::Leading,
        "leads despite the unreadable Go lease",
    )
    .await;
    a.shutdown().await;
}

/// A Role for leases in `ns` only, bound to `user`.
async fn grant_leases(admin: &Client, ns: &str, user: &str) {
    let role = Role {
        metadata: ObjectMeta {
            name: Some("leases".into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            verbs: vec!["get".into(), "create".into(), "update".into()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("leases".into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "leases".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("role binding");
}
