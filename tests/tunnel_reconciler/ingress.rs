//! Ingresses of cftunnel's IngressClass end to end: rules in config.yaml, DNS records on the
//! simulated Cloudflare, `status.loadBalancer`, one owner per hostname across an Ingress and a
//! binding (each told the outcome), the TLS Event, and deletion taking the records with it.
use cftunnel_testenv::poll_until;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{
    API_SECRET, create_binding, create_service, records, wait_binding_reason, wait_ingress,
    wait_records,
};

async fn load_balancer(api: &Api<Ingress>, name: &str) -> Vec<String> {
    api.get(name)
        .await
        .ok()
        .and_then(|i| i.status)
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.hostname)
        .collect()
}

#[tokio::test]
async fn an_ingress_is_routed_shares_one_owner_per_hostname_and_leaves_nothing_behind() {
    let h = Harness::start("tr-ingress").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let ns = h.ns.clone();
    let class_name = h.create_ingress_class("edge").await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_service(&h, "api", 8080, json!({}), json!({})).await;
    // The binding is older: it owns shared.example.com.
    create_binding(
        &h,
        "shared",
        json!([{"name": "web", "spec": {"fqdn": "shared.example.com"}}]),
    )
    .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    wait_binding_reason(&h, "shared", "Routed").await;

    let ingresses: Api<Ingress> = Api::namespaced(h.admin.clone(), &ns);
    let ingress: Ingress = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "shop"},
        "spec": {
            "ingressClassName": class_name,
            "tls": [{"hosts": ["app.example.com"], "secretName": "app-tls"}],
            "rules": [
                {"host": "app.example.com", "http": {"paths": [
                    {"path": "/api", "pathType": "Prefix",
                     "backend": {"service": {"name": "api", "port": {"number": 8080}}}},
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}},
                {"host": "shared.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "api", "port": {"number": 8080}}}}]}}]
        }
    }))
    .expect("ingress json");
    ingresses
        .create(&PostParams::default(), &ingress)
        .await
        .expect("create Ingress");

    wait_ingress(&h, "the Ingress's rules rendered", |rules| {
        rules.get("app.example.com") == Some(&format!("http://web.{ns}.svc:80"))
    })
    .await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(h.admin.clone(), &ns);
    let config = cms
        .get("edge")
        .await
        .ok()
        .and_then(|c| c.data)
        .and_then(|d| d.get("config.yaml").cloned())
        .unwrap_or_default();
    assert!(
        config.contains("path: ^/api(/|$)")
            && config.contains(&format!("service: http://api.{ns}.svc:8080")),
        "the Prefix path is an anchored, element-wise rule before the host's catch-all:\n{config}"
    );
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let cname = wait_records(&h, "app.example.com", 1).await;
    assert_eq!(cname[0].content, format!("{id}.cfargotunnel.com"));
    wait_records(&h, "_managed.app.example.com", 1).await;
    let hostname = format!("{id}.cfargotunnel.com");
    poll_until("status.loadBalancer of the Ingress", WAIT, POLL, || async {
        (load_balancer(&ingresses, "shop").await == vec![hostname.clone()]).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // The older binding keeps shared.example.com; the Ingress is told, the binding is Routed.
    h.wait_event("shop", "HostnameConflict").await;
    h.wait_event("shop", "TLSAtEdge").await;
    let (status, _, hostnames) = wait_binding_reason(&h, "shared", "Routed").await;
    assert_eq!(status, "True");
    assert!(hostnames.starts_with("shared.example.com|"), "{hostnames}");
    let shared = records(&h, "shared.example.com");
    assert_eq!(shared.len(), 1, "{shared:?}");

    // Deleting the Ingress removes its rules and its records; the binding's stay.
    ingresses
        .delete("shop", &DeleteParams::default())
        .await
        .expect("delete Ingress");
    wait_records(&h, "app.example.com", 0).await;
    wait_records(&h, "_managed.app.example.com", 0).await;
    wait_ingress(&h, "the Ingress's rules gone", |rules| {
        !rules.contains_key("app.example.com") && rules.contains_key("shared.example.com")
    })
    .await;
    assert_eq!(records(&h, "shared.example.com").len(), 1);
    Api::<IngressClass>::all(h.admin.clone())
        .delete(&class_name, &DeleteParams::default())
        .await
        .expect("delete IngressClass");
}

#[tokio::test]
async fn an_ingress_moved_to_another_class_loses_the_load_balancer_cftunnel_wrote() {
    let h = Harness::start("tr-ingress-move").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let ns = h.ns.clone();
    let class_name = h.create_ingress_class("edge").await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let ingresses: Api<Ingress> = Api::namespaced(h.admin.clone(), &ns);
    let ingress: Ingress = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "wild"},
        "spec": {
            "ingressClassName": class_name,
            "rules": [{"host": "*.wild.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
        }
    }))
    .expect("ingress json");
    ingresses
        .create(&PostParams::default(), &ingress)
        .await
        .expect("create Ingress");
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let hostname = format!("{id}.cfargotunnel.com");
    poll_until("status.loadBalancer of the Ingress", WAIT, POLL, || async {
        (load_balancer(&ingresses, "wild").await == vec![hostname.clone()]).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // The Ingress specification's wildcard is one label deep; cloudflared's and DNS's are not.
    h.wait_event("wild", "WildcardMatchesEveryDepth").await;
    wait_records(&h, "*.wild.example.com", 1).await;

    ingresses
        .patch(
            "wild",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"ingressClassName": "someone-else"}})),
        )
        .await
        .expect("move the Ingress");
    poll_until("the load balancer cleared", WAIT, POLL, || async {
        load_balancer(&ingresses, "wild")
            .await
            .is_empty()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_records(&h, "*.wild.example.com", 0).await;
    Api::<IngressClass>::all(h.admin.clone())
        .delete(&class_name, &DeleteParams::default())
        .await
        .expect("delete IngressClass");
}
