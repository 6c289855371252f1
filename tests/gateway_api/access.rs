//! An HTTPRoute targeted by an AccessPolicy is protected like a TunnelBinding (docs/design.md
//! §3.7): its hostname's application is made, its rule carries `originRequest.access` with the
//! team and that application's AUD, and its DNS record is published; a GRPCRoute target of the
//! same policy is refused with the reason. Run inside the live Gateway API test, on its Gateway.
use cftunnel_testenv::poll_until;
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::gateway::HTTPRoute;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, WAIT};
use crate::live::{create, wait_records};

const HOST: &str = "guarded.example.com";

async fn rule(h: &Harness) -> Value {
    let text = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get_opt("edge")
        .await
        .ok()
        .flatten()
        .and_then(|c| c.data)
        .and_then(|d| d.get("config.yaml").cloned())
        .unwrap_or_default();
    let config: Value = serde_yaml_ng::from_str(&text).unwrap_or(Value::Null);
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["hostname"] == HOST)
        .cloned()
        .unwrap_or(Value::Null)
}

pub(crate) async fn an_httproute_target_is_protected_like_a_binding(h: &Harness) {
    h.sim.set_access_team(Some("acme".into()));
    let routes: Api<HTTPRoute> = Api::namespaced(h.admin.clone(), &h.ns);
    create(
        &routes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "guarded"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    )
    .await;
    let policies: Api<AccessPolicy> = Api::namespaced(h.admin.clone(), &h.ns);
    create(
        &policies,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "AccessPolicy",
            "metadata": {"name": "staff", "labels": {"cftunnel-test/run": h.ns}},
            "spec": {
                "targetRefs": [
                    {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "guarded"},
                    {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute", "name": "rpc"},
                ],
                "allow": {"emailDomains": ["example.com"]},
            },
        }),
    )
    .await;
    let app = poll_until("the HTTPRoute's application", WAIT, POLL, || async {
        h.sim.access_apps().into_iter().find(|a| a.domain == HOST)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    // (Our kinds are watched with the test's label, so the policy carries it.)
    let open = poll_until("its rule behind Access", WAIT, POLL, || async {
        let r = rule(h).await;
        (!r["originRequest"]["access"].is_null()).then_some(r)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        open["originRequest"]["access"],
        json!({"required": true, "teamName": "acme", "audTag": [app.aud]})
    );
    wait_records(h, HOST, 1).await;
    let grpc = poll_until("the GRPCRoute target refused", WAIT, POLL, || async {
        let p = policies.get("staff").await.ok()?;
        p.status?
            .targets?
            .into_iter()
            .find(|t| t.kind == "GRPCRoute" && t.reason.is_some())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(grpc.reason.as_deref(), Some("UnsupportedKind"));
    assert!(
        grpc.message
            .as_deref()
            .is_some_and(|m| m.contains("does not apply to gRPC")),
        "{grpc:?}"
    );
    // Leave the Gateway as it was for the cases that follow.
    policies
        .delete("staff", &DeleteParams::default())
        .await
        .expect("delete policy");
    poll_until("the application gone", WAIT, POLL, || async {
        h.sim.access_apps().is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    routes
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete route");
    wait_records(h, HOST, 0).await;
}
