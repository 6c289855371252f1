//! An HTTPRoute targeted by an AccessPolicy is protected like a TunnelBinding (docs/design.md
//! §3.7): its hostname's application is made, its rule carries `originRequest.access` with the
//! team and that application's AUD, and its DNS record is published; a GRPCRoute target of the
//! same policy is refused with the reason; a route with parents on two tunnels is protected on
//! both. Run inside the live Gateway API test, on its Gateways.
use cftunnel_testenv::poll_until;
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::gateway::{Gateway, HTTPRoute};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, WAIT};
use crate::live::{create, wait_records};

const HOST: &str = "guarded.example.com";

async fn rule(h: &Harness) -> Value {
    rule_on(h, "edge", HOST).await
}

/// The rule of `host` in the config.yaml of the Tunnel `tunnel` (`Null` when it has none).
async fn rule_on(h: &Harness, tunnel: &str, host: &str) -> Value {
    let text = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get_opt(tunnel)
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
        .find(|r| r["hostname"] == host)
        .cloned()
        .unwrap_or(Value::Null)
}

/// A rule that serves its Service without Access checking the caller: a hole when its
/// hostname is protected.
fn open_without_access(rule: &Value) -> bool {
    rule["service"]
        .as_str()
        .is_some_and(|s| !s.starts_with("http_status:"))
        && rule["originRequest"]["access"].is_null()
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

/// An HTTPRoute with parents on two Gateways of two tunnels (each listener admitting one of its
/// two hostnames), targeted by an AccessPolicy: each tunnel renders its hostname closed, then
/// behind that hostname's application; neither is ever served in the open. Runs after
/// `each_parent_is_judged_on_its_own` (the Tunnel `open` exists).
pub(crate) async fn a_route_on_two_tunnels_is_protected_on_both(h: &Harness, class: &str) {
    let (a, b) = ("split-a.example.com", "split-b.example.com");
    h.sim.set_access_team(Some("acme".into()));
    let gateways: Api<Gateway> = Api::namespaced(h.admin.clone(), &h.ns);
    for (name, tunnel, host) in [("gw-a", "edge", a), ("gw-b", "open", b)] {
        create(
            &gateways,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": name},
                "spec": {"gatewayClassName": class,
                         "infrastructure": {"parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": tunnel}},
                         "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": host}]},
            }),
        )
        .await;
    }
    // The policy first: the route is protected from its first render.
    let policies: Api<AccessPolicy> = Api::namespaced(h.admin.clone(), &h.ns);
    create(
        &policies,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "AccessPolicy",
            "metadata": {"name": "split", "labels": {"cftunnel-test/run": h.ns}},
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "split"}],
                "allow": {"emailDomains": ["example.com"]},
            },
        }),
    )
    .await;
    let routes: Api<HTTPRoute> = Api::namespaced(h.admin.clone(), &h.ns);
    create(
        &routes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "split"},
            "spec": {"parentRefs": [{"name": "gw-a"}, {"name": "gw-b"}], "hostnames": [a, b],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    )
    .await;
    // Every look at both tunnels, until both rules check their application's AUD.
    let behind = poll_until(
        "both hostnames behind their applications",
        WAIT,
        POLL,
        || async {
            let (on_a, on_b) = (rule_on(h, "edge", a).await, rule_on(h, "open", b).await);
            for (tunnel, host, r) in [("edge", a, &on_a), ("open", b, &on_b)] {
                assert!(
                    !open_without_access(r),
                    "{tunnel} serves the protected {host} in the open: {r}"
                );
            }
            let aud = |r: &Value| {
                r["originRequest"]["access"]["audTag"][0]
                    .as_str()
                    .map(str::to_string)
            };
            Some((aud(&on_a)?, aud(&on_b)?))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    for (host, aud) in [(a, &behind.0), (b, &behind.1)] {
        let app = h.sim.access_apps().into_iter().find(|x| x.domain == host);
        assert_eq!(
            app.map(|x| x.aud).as_ref(),
            Some(aud),
            "{host}'s rule checks its own application's AUD"
        );
    }
    assert!(
        rule_on(h, "open", a).await.is_null() && rule_on(h, "edge", b).await.is_null(),
        "each tunnel serves only the hostname its listener admits"
    );
    wait_records(h, b, 1).await;
    // Leave the namespace as it was for the cases that follow.
    policies
        .delete("split", &DeleteParams::default())
        .await
        .expect("delete policy");
    poll_until("the applications gone", WAIT, POLL, || async {
        h.sim.access_apps().is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    routes
        .delete("split", &DeleteParams::default())
        .await
        .expect("delete route");
    for name in ["gw-a", "gw-b"] {
        gateways
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete gateway");
    }
    wait_records(h, a, 0).await;
    wait_records(h, b, 0).await;
}
