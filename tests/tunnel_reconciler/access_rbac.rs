//! AccessPolicies that cftunnel may not read (docs/design.md §3.7): with RBAC that forbids
//! listing them, a routed hostname a policy protects is never served in the open. The tunnel's
//! `Ready` says why, no DNS record is published, a metric counts it; once the permission is
//! granted the policy is found and the hostname is served behind its application.
use cftunnel_testenv::poll_until;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::access_policy::{
    TEAM, apps_for, binding_target, closed, create_policy, route, rule, setup, wait_rule,
};
use crate::harness::{Harness, POLL, WAIT, ready_message};
use crate::install_support::{documents, find, repo_path};
use crate::routes::records;

/// The shipped ClusterRole's rules without those on AccessPolicies.
fn rules_without_access_policies() -> Value {
    let text = std::fs::read_to_string(repo_path("manifests/rbac.yaml")).expect("rbac.yaml");
    let docs = documents(&text);
    let role = find(&docs, "ClusterRole", Some("cftunnel"));
    let rules: Vec<Value> = role[0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| {
            !r["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x.as_str().is_some_and(|x| x.starts_with("accesspolicies")))
        })
        .cloned()
        .collect();
    assert!(
        rules.len() + 2 <= role[0]["rules"].as_array().map_or(0, Vec::len),
        "the shipped role has its AccessPolicy rules"
    );
    Value::Array(rules)
}

async fn bind(h: &Harness, name: &str, role: &str, user: &str) {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .expect("binding json");
    Api::<ClusterRoleBinding>::all(h.admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create ClusterRoleBinding");
}

/// A user bound to the shipped ClusterRole without its AccessPolicy rules (named after the test
/// namespace, so tests do not share it), and a client of it once the role is in effect.
async fn user_without_access_policies(h: &Harness) -> (String, kube::Client) {
    let user = format!("cftunnel-without-access-{}", h.ns);
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": user},
        "rules": rules_without_access_policies(),
    }))
    .expect("role json");
    Api::<ClusterRole>::all(h.admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("create ClusterRole");
    bind(h, &user, &user, &user).await;
    let client = h
        .plane
        .user(&user, &[])
        .expect("user")
        .client()
        .expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &h.ns);
    poll_until("the role in effect", WAIT, POLL, || async {
        secrets.list(&Default::default()).await.ok().map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    (user, client)
}

#[tokio::test]
async fn access_policies_rbac_forbids_reading_open_nothing_and_say_why_until_it_is_granted() {
    let mut h = Harness::start_stopped("tr-access-rbac", &["example.com"]).await;
    let (user, client) = user_without_access_policies(&h).await;
    let watch = crate::access_invariant::RenderWatch::start(&h);
    // Created before anything of it can be read: never open until its application exists.
    watch.protect_from("a.example.com", 0);
    h.start_operator_with(client);
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-a")])).await;

    let tunnel = h
        .wait_reason(&h.tunnels(), "edge", "AccessPoliciesUnknown")
        .await;
    let message = ready_message(tunnel.status.as_ref());
    for part in [
        "a.example.com",
        "accesspolicies.networking.cfargotunnel.com",
        "apply the ClusterRole",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    let now = rule(&h, "a.example.com").await;
    assert!(
        closed(&now),
        "served before its policy could be read: {now}"
    );
    assert!(
        records(&h, "a.example.com").is_empty(),
        "a record published for a hostname that may be protected"
    );
    assert!(apps_for(&h, "a.example.com").is_empty());
    let metrics = cftunnel::metrics::Metrics::process().render();
    assert!(
        metrics.contains("cftunnel_access_policies_unknown_total{cause=\"forbidden\"}"),
        "{metrics}"
    );

    // Granted: the probe finds the kind served, the policy protects the hostname.
    bind(&h, &format!("{user}-full"), "cftunnel", &user).await;
    let open = wait_rule(&h, "a.example.com", "the rule behind Access", |r| {
        !r["originRequest"]["access"].is_null()
    })
    .await;
    assert_eq!(open["originRequest"]["access"]["teamName"], TEAM);
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    crate::routes::wait_records(&h, "a.example.com", 1).await;
    watch.assert_held();

    remove_user(&h, &user).await;
}

/// Removes the user's role and both its bindings.
async fn remove_user(h: &Harness, user: &str) {
    let bindings: Api<ClusterRoleBinding> = Api::all(h.admin.clone());
    for name in [user.to_string(), format!("{user}-full")] {
        let _ = bindings.delete(&name, &DeleteParams::default()).await;
    }
    let _ = Api::<ClusterRole>::all(h.admin.clone())
        .delete(user, &DeleteParams::default())
        .await;
}

/// Revoked while running: an open watch outlives the revocation, but kube ends each watch
/// after at most 290 s and the next is refused. From then on the policies are unknown: the
/// hostname protected before keeps its protection, a hostname routed after it is not served
/// (its tunnel's Ready says why). Granted again, the next list finds the cache current (no
/// policy changed, so no watch event would say so) and the new hostname is served.
#[tokio::test]
async fn access_policies_rbac_revoked_while_running_opens_nothing_new_and_recovers_once_granted() {
    let (_logs, log) = crate::harness::capture_logs();
    let mut h = Harness::start_stopped("tr-access-revoked", &["example.com"]).await;
    let (user, client) = user_without_access_policies(&h).await;
    let full = format!("{user}-full");
    bind(&h, &full, "cftunnel", &user).await;
    let watch = crate::access_invariant::RenderWatch::start(&h);
    h.start_operator_with(client);
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-a")])).await;
    let behind = wait_rule(&h, "a.example.com", "the rule behind Access", |r| {
        !r["originRequest"]["access"].is_null()
    })
    .await;
    watch.protect("a.example.com").await;
    let aud = behind["originRequest"]["access"]["audTag"].clone();

    let bindings: Api<ClusterRoleBinding> = Api::all(h.admin.clone());
    bindings
        .delete(&full, &DeleteParams::default())
        .await
        .expect("revoke");
    // kube's watch timeout (290 s) and its backoff, with room for a loaded machine.
    let refused = format!(
        "may not list and watch accesspolicies.networking.cfargotunnel.com in namespace {}",
        h.ns
    );
    poll_until(
        "the AccessPolicy watch refused",
        std::time::Duration::from_secs(480),
        POLL,
        || async {
            crate::harness::captured(&log)
                .contains(&refused)
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // A public route made now could be one a policy made meanwhile protects.
    watch.protect("b.example.com").await;
    route(&h, "web-b", "b.example.com").await;
    let tunnel = h
        .wait_reason(&h.tunnels(), "edge", "AccessPoliciesUnknown")
        .await;
    let message = ready_message(tunnel.status.as_ref());
    for part in [
        "b.example.com",
        "accesspolicies.networking.cfargotunnel.com",
        "apply the ClusterRole",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    assert!(!message.contains("a.example.com"), "{message}");
    let b = rule(&h, "b.example.com").await;
    assert!(
        closed(&b),
        "routed while the policies are unknown, served: {b}"
    );
    let a = rule(&h, "a.example.com").await;
    assert_eq!(a["originRequest"]["access"]["audTag"], aud, "{a}");
    assert!(records(&h, "b.example.com").is_empty());

    // Granted again: nothing about the policies changed, and the new hostname is served.
    watch.release("b.example.com").await;
    bind(&h, &full, "cftunnel", &user).await;
    wait_rule(
        &h,
        "b.example.com",
        "the public rule",
        crate::access_policy::public,
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let a = rule(&h, "a.example.com").await;
    assert_eq!(a["originRequest"]["access"]["audTag"], aud, "{a}");
    watch.assert_held();
    remove_user(&h, &user).await;
}
