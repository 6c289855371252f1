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

#[tokio::test]
async fn access_policies_rbac_forbids_reading_open_nothing_and_say_why_until_it_is_granted() {
    let mut h = Harness::start_stopped("tr-access-rbac", &["example.com"]).await;
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
    bind(&h, &user, &user, &user).await;
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

    let bindings: Api<ClusterRoleBinding> = Api::all(h.admin.clone());
    for name in [user.clone(), format!("{user}-full")] {
        let _ = bindings.delete(&name, &DeleteParams::default()).await;
    }
    let _ = Api::<ClusterRole>::all(h.admin.clone())
        .delete(&user, &DeleteParams::default())
        .await;
}
