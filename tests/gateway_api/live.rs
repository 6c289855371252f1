//! Gateway API on a real API server: cftunnel starts without the CRDs, the v1.6.3 standard CRDs
//! (the chart's copy) are installed while it runs, and within a minute it serves them; a header
//! match is refused on the route's status, a missing backend is `BackendNotFound` and answers
//! 500, `attachedRoutes` counts what attached, one hostname claimed by a binding, an Ingress and
//! an HTTPRoute has one owner and each is told, deleting a route deletes its DNS records, each
//! parent of a route is judged on its own and gRPC backends must speak TLS (`parents.rs`), a
//! TCPRoute on a TCP listener is accepted and counted (`l4.rs`); then the conformance suite's
//! cases are applied and their statuses asserted as the suite asserts.
use std::time::Duration;

use cftunnel_policy::routes::SourceKind;
use cftunnel_policy::routes::gateway::status::GatewayApiStatus;
use cftunnel_testenv::poll_until;
use cftunnel_types::TunnelBinding;
use cftunnel_types::gateway::{Gateway, GatewayClass, HTTPRoute};
use cftunnel_types::names::CONTROLLER_NAME;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::cases::{CLASS, cases, documents, status_problems};
use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::install_support::{install_gateway_api_crds, kubectl_ok};

pub(crate) const API_SECRET: &str = "cloudflare-api";
/// How soon after the CRDs are installed cftunnel must serve them.
const SERVED_WITHIN: Duration = Duration::from_secs(60);

pub(crate) async fn create<K>(api: &Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).expect("object json");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create")
}

/// The Gateway API statuses as stored: classes, Gateways, cftunnel's route parents.
async fn live_statuses(h: &Harness) -> GatewayApiStatus {
    let mut out = GatewayApiStatus::default();
    let lp = ListParams::default();
    for class in Api::<GatewayClass>::all(h.admin.clone())
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.classes
            .insert(class.name_any(), class.status.unwrap_or_default());
    }
    for gateway in Api::<Gateway>::all(h.admin.clone())
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.gateways.insert(
            (gateway.namespace().unwrap_or_default(), gateway.name_any()),
            gateway.status.clone().unwrap_or_default(),
        );
    }
    for route in Api::<HTTPRoute>::all(h.admin.clone())
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let parents = route
            .status
            .clone()
            .unwrap_or_default()
            .parents
            .into_iter()
            .filter(|p| p.controller_name == CONTROLLER_NAME)
            .collect();
        out.routes.insert(
            (
                SourceKind::HTTPRoute,
                route.namespace().unwrap_or_default(),
                route.name_any(),
            ),
            parents,
        );
    }
    out
}

pub(crate) fn condition<'c>(
    conditions: &'c [Condition],
    type_: &str,
) -> (&'c str, &'c str, &'c str) {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
        .unwrap_or(("", "", ""))
}

/// The conditions of cftunnel's first parent entry of HTTPRoute `ns/name`.
async fn parent(h: &Harness, ns: &str, name: &str) -> Vec<Condition> {
    Api::<HTTPRoute>::namespaced(h.admin.clone(), ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|r| r.status)
        .and_then(|s| {
            s.parents
                .into_iter()
                .find(|p| p.controller_name == CONTROLLER_NAME)
        })
        .map(|p| p.conditions)
        .unwrap_or_default()
}

async fn wait_parent(h: &Harness, name: &str, type_: &str, status: &str, reason: &str) -> String {
    let ns = h.ns.clone();
    let found = poll_until(
        &format!("HTTPRoute {name} {type_}={status} {reason}"),
        WAIT,
        POLL,
        || async {
            let conditions = parent(h, &ns, name).await;
            let (s, r, m) = condition(&conditions, type_);
            (s == status && r == reason).then(|| m.to_string())
        },
    )
    .await;
    match found {
        Ok(message) => message,
        Err(e) => panic!("{e}; now {:?}", parent(h, &ns, name).await),
    }
}

/// The tunnel's config.yaml rules: (hostname, service).
pub(crate) async fn rules(h: &Harness) -> Vec<(String, String)> {
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
        .map(|r| {
            (
                r["hostname"].as_str().unwrap_or("*").to_string(),
                r["service"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

async fn wait_rules(h: &Harness, what: &str, check: impl Fn(&[(String, String)]) -> bool) {
    let waited = poll_until(what, WAIT, POLL, || async {
        check(&rules(h).await).then_some(())
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}; rules now {:?}", rules(h).await);
    }
}

fn records(h: &Harness, name: &str) -> usize {
    h.sim
        .dns_records("example.com")
        .into_iter()
        .filter(|r| r.name == name)
        .count()
}

pub(crate) async fn wait_records(h: &Harness, name: &str, count: usize) {
    poll_until(
        &format!("{count} record(s) at {name}"),
        WAIT,
        POLL,
        || async { (records(h, name) == count).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; zone holds {:?}", h.sim.dns_records("example.com")));
}

fn route(name: &str, hostname: &str, rule: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [hostname], "rules": [rule]},
    })
}

#[tokio::test]
async fn gateway_api_installed_while_cftunnel_runs_is_served_and_the_conformance_cases_pass() {
    let mut h = Harness::start_stopped("gw-live", &["example.com"]).await;
    h.start_operator_in_all_namespaces();
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let ns = h.ns.clone();
    let services: Api<Service> = Api::namespaced(h.admin.clone(), &ns);
    for name in ["web", "api"] {
        create(
            &services,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                                  "spec": {"ports": [{"name": "http", "port": 80}]}}),
        )
        .await;
    }
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = tunnel.status.and_then(|s| s.tunnel_id).expect("tunnel id");

    // The CRDs arrive while cftunnel runs: it serves them within a minute.
    install_gateway_api_crds(h.plane);
    let classes: Api<GatewayClass> = Api::all(h.admin.clone());
    let class = format!("cftunnel-{ns}");
    create(&classes, json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": class},
        "spec": {"controllerName": CONTROLLER_NAME,
                 "parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": "edge", "namespace": ns}},
    })).await;
    poll_until("the GatewayClass Accepted", SERVED_WITHIN, POLL, || async {
        let status = classes.get(&class).await.ok()?.status?;
        (condition(&status.conditions, "Accepted").0 == "True"
            && status
                .supported_features
                .iter()
                .any(|f| f.name == "HTTPRoute"))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: Gateway API not served within a minute of its CRDs"));

    let gateways: Api<Gateway> = Api::namespaced(h.admin.clone(), &ns);
    create(&gateways, json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw"},
        "spec": {"gatewayClassName": class, "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    })).await;
    let routes: Api<HTTPRoute> = Api::namespaced(h.admin.clone(), &ns);
    let web_backend = json!({"backendRefs": [{"name": "web", "port": 80}]});
    create(&routes, route("web", "gw.example.com", web_backend.clone())).await;
    create(
        &routes,
        route(
            "headers",
            "hdr.example.com",
            json!({
        "matches": [{"headers": [{"name": "x-canary", "value": "1"}]}],
        "backendRefs": [{"name": "web", "port": 80}]}),
        ),
    )
    .await;
    create(
        &routes,
        route(
            "missing",
            "missing.example.com",
            json!({"backendRefs": [{"name": "nothing", "port": 80}]}),
        ),
    )
    .await;

    wait_parent(&h, "web", "Accepted", "True", "Accepted").await;
    wait_parent(&h, "web", "ResolvedRefs", "True", "ResolvedRefs").await;
    let refused = wait_parent(&h, "headers", "Accepted", "False", "UnsupportedValue").await;
    assert!(
        refused.starts_with("spec.rules[0].matches[0].headers: "),
        "{refused}"
    );
    let missing = wait_parent(&h, "missing", "ResolvedRefs", "False", "BackendNotFound").await;
    assert!(missing.contains("Service "), "{missing}");
    let svc = format!("http://web.{ns}.svc:80");
    wait_rules(&h, "the routes rendered", |rules| {
        rules.contains(&("gw.example.com".into(), svc.clone()))
            && rules.contains(&("missing.example.com".into(), "http_status:500".into()))
            && !rules.iter().any(|(host, _)| host == "hdr.example.com")
    })
    .await;
    let programmed = poll_until(
        "the Gateway programmed with its address and attached routes",
        WAIT,
        POLL,
        || async {
            let status = gateways.get("gw").await.ok()?.status?;
            let programmed = condition(&status.conditions, "Programmed").0 == "True";
            let address = status.addresses.first().map(|a| a.value.clone());
            let attached = status.listeners.first().map(|l| l.attached_routes);
            (programmed && address == Some(format!("{id}.cfargotunnel.com")) && attached == Some(2))
                .then_some(())
        },
    )
    .await;
    if let Err(e) = programmed {
        let now = gateways.get("gw").await.ok().and_then(|g| g.status);
        panic!("{e}; now {now:?}");
    }
    wait_records(&h, "gw.example.com", 1).await;

    // One hostname, three claimants: the binding is oldest, the Ingress and the route are told.
    let bindings: Api<TunnelBinding> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &bindings,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
            "metadata": {"name": "shared", "labels": {"cftunnel-test/run": ns}},
            "subjects": [{"name": "web", "spec": {"fqdn": "shared.example.com"}}],
            "tunnelRef": {"kind": "Tunnel", "name": "edge"},
        }),
    )
    .await;
    wait_records(&h, "shared.example.com", 1).await;
    let ingress_classes: Api<IngressClass> = Api::all(h.admin.clone());
    create(&ingress_classes, json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": class},
        "spec": {"controller": CONTROLLER_NAME, "parameters": {"apiGroup": "networking.cfargotunnel.com",
                 "kind": "Tunnel", "name": "edge", "scope": "Namespace", "namespace": ns}},
    })).await;
    let ingresses: Api<Ingress> = Api::namespaced(h.admin.clone(), &ns);
    create(&ingresses, json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "shared"},
        "spec": {"ingressClassName": class, "rules": [{"host": "shared.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "api", "port": {"number": 80}}}}]}}]},
    })).await;
    create(
        &routes,
        route(
            "shared",
            "shared.example.com",
            json!({"backendRefs": [{"name": "api", "port": 80}]}),
        ),
    )
    .await;
    let lost = wait_parent(&h, "shared", "Accepted", "False", "HostnameConflict").await;
    assert!(lost.contains("TunnelBinding"), "{lost}");
    h.wait_event("shared", "HostnameConflict").await;
    let binding = bindings.get("shared").await.expect("binding");
    let ready = binding
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert_eq!(condition(&ready, "Ready").1, "Routed");
    assert!(
        rules(&h)
            .await
            .contains(&("shared.example.com".into(), svc.clone()))
    );

    // Statuses are written once: nothing rewrites them while nothing changes (the API server's
    // defaults are in what is compared, so no write ever undoes another).
    let before = (
        gateways
            .get("gw")
            .await
            .expect("gateway")
            .resource_version(),
        routes
            .get("missing")
            .await
            .expect("route")
            .resource_version(),
        classes.get(&class).await.expect("class").resource_version(),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = (
        gateways
            .get("gw")
            .await
            .expect("gateway")
            .resource_version(),
        routes
            .get("missing")
            .await
            .expect("route")
            .resource_version(),
        classes.get(&class).await.expect("class").resource_version(),
    );
    assert_eq!(
        before, after,
        "a status was written again with nothing changed"
    );

    // Deleting a route deletes its DNS records.
    routes
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete route");
    wait_records(&h, "gw.example.com", 0).await;
    wait_records(&h, "_managed.gw.example.com", 0).await;

    // Each parent judged on its own, and gRPC backends as a tunnel can carry them.
    crate::parents::each_parent_is_judged_on_its_own(&h, &class).await;
    crate::parents::grpc_backends_must_speak_tls(&h).await;
    // An HTTPRoute behind Zero Trust Access.
    crate::access::an_httproute_target_is_protected_like_a_binding(&h).await;
    crate::access::a_route_on_two_tunnels_is_protected_on_both(&h, &class).await;
    // TCPRoutes and UDPRoutes on TCP and UDP listeners.
    crate::l4::a_tcp_route_on_a_tcp_listener_is_accepted_and_attached(&h, &class).await;

    // The conformance suite's cases: base manifests, a tunnel per Gateway, then each case.
    let base = documents("base/manifests.yaml");
    apply(&h, &base);
    let infra = "gateway-conformance-infra";
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": API_SECRET},
        "stringData": {"CLOUDFLARE_API_TOKEN": TOKEN},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(h.admin.clone(), infra)
        .create(&PostParams::default(), &secret)
        .await
        .expect("API secret");
    create(
        &classes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": CLASS}, "spec": {"controllerName": CONTROLLER_NAME},
        }),
    )
    .await;
    tunnels_for(&h, &base).await;
    for case in &cases() {
        let docs: Vec<Value> = case.manifests.iter().flat_map(|m| documents(m)).collect();
        apply(&h, &docs);
        tunnels_for(&h, &docs).await;
        let waited = poll_until(
            &format!("{} statuses", case.short_name),
            WAIT,
            POLL,
            || async {
                status_problems(case, &live_statuses(&h).await)
                    .is_empty()
                    .then_some(())
            },
        )
        .await;
        if let Err(e) = waited {
            panic!(
                "{e}:\n{}",
                status_problems(case, &live_statuses(&h).await).join("\n")
            );
        }
        delete(&h, &docs);
    }
}

fn yaml_of(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn apply(h: &Harness, docs: &[Value]) {
    kubectl_ok(h.plane, &["apply", "-f", "-"], &yaml_of(docs));
}

fn delete(h: &Harness, docs: &[Value]) {
    let kept: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] != "Namespace")
        .cloned()
        .collect();
    kubectl_ok(
        h.plane,
        &["delete", "--wait=false", "--ignore-not-found", "-f", "-"],
        &yaml_of(&kept),
    );
}

/// A Tunnel named after each Gateway of `docs`, in its namespace.
async fn tunnels_for(h: &Harness, docs: &[Value]) {
    for doc in docs.iter().filter(|d| d["kind"] == "Gateway") {
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or("");
        let name = doc["metadata"]["name"].as_str().unwrap_or("");
        h.create_tunnel_in(
            namespace,
            name,
            h.spec(API_SECRET, json!({"newTunnel": {"name": name}})),
        )
        .await;
    }
}
