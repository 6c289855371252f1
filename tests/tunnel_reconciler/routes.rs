//! Routes end to end (docs/design.md §3.2, §3.3): TunnelBindings and labelled Services become ingress
//! rules in the tunnel's config.yaml and DNS records on the simulated Cloudflare, bindings get
//! their status and finalizer, and every removal takes its records with it.
use std::collections::BTreeMap;

use cftunnel_sim::{Operation, SimDnsRecord};
use cftunnel_testenv::poll_until;
use cftunnel_types::TunnelBinding;
use cftunnel_types::names::FINALIZER;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, TOKEN, WAIT};

pub(crate) const API_SECRET: &str = "cloudflare-api";
pub(crate) const ZONE: &str = "example.com";

pub(crate) fn bindings(h: &Harness) -> Api<TunnelBinding> {
    Api::namespaced(h.admin.clone(), &h.ns)
}

pub(crate) fn services(h: &Harness) -> Api<Service> {
    Api::namespaced(h.admin.clone(), &h.ns)
}

pub(crate) async fn create_service(
    h: &Harness,
    name: &str,
    port: i32,
    labels: Value,
    annotations: Value,
) {
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"ports": [{"name": "http", "port": port}]},
    }))
    .expect("service json");
    services(h)
        .create(&PostParams::default(), &service)
        .await
        .expect("create service");
}

pub(crate) async fn create_binding(h: &Harness, name: &str, subjects: Value) {
    let binding: TunnelBinding = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": name, "labels": {"cftunnel-test/run": h.ns}},
        "subjects": subjects,
        "tunnelRef": {"kind": "Tunnel", "name": "edge"},
    }))
    .expect("binding json");
    bindings(h)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

/// The ingress rules of the tunnel's config.yaml: hostname → service (catch-all under "*").
async fn ingress(h: &Harness) -> BTreeMap<String, String> {
    let cms: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    let Ok(cm) = cms.get("edge").await else {
        return BTreeMap::new();
    };
    let text = cm
        .data
        .and_then(|d| d.get("config.yaml").cloned())
        .unwrap_or_default();
    let config: Value = serde_yaml_ng::from_str(&text).unwrap_or(Value::Null);
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rule| {
            let host = rule["hostname"].as_str().unwrap_or("*").to_string();
            (host, rule["service"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

pub(crate) async fn wait_ingress(
    h: &Harness,
    what: &str,
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) {
    let waited = poll_until(what, WAIT, POLL, || async {
        let rules = ingress(h).await;
        check(&rules).then_some(())
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}; ingress now {:?}", ingress(h).await);
    }
}

/// A CNAME at `name` that is not cftunnel's (it points elsewhere); returns its id.
pub(crate) fn insert_foreign_cname(h: &Harness, name: &str) -> String {
    h.sim
        .insert_dns_record(
            ZONE,
            json!({"type": "CNAME", "name": name, "content": "elsewhere.example.net", "proxied": true, "ttl": 1}),
        )
        .expect("foreign record")
}

pub(crate) fn records(h: &Harness, name: &str) -> Vec<SimDnsRecord> {
    h.sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.name == name)
        .collect()
}

pub(crate) async fn wait_records(h: &Harness, name: &str, count: usize) -> Vec<SimDnsRecord> {
    poll_until(
        &format!("{count} record(s) at {name}"),
        WAIT,
        POLL,
        || async {
            let found = records(h, name);
            (found.len() == count).then_some(found)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; zone holds {:?}", h.sim.dns_records(ZONE)))
}

pub(crate) async fn binding_ready(h: &Harness, name: &str) -> (String, String, String) {
    let b = bindings(h).get(name).await.expect("binding");
    let status = b.status.unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status, c.reason, c.message))
        .unwrap_or_default();
    (
        ready.0,
        ready.1,
        status.hostnames.unwrap_or_default() + "|" + &ready.2,
    )
}

pub(crate) async fn wait_binding_reason(
    h: &Harness,
    name: &str,
    reason: &str,
) -> (String, String, String) {
    let waited = poll_until(&format!("binding {name} {reason}"), WAIT, POLL, || async {
        let ready = binding_ready(h, name).await;
        (ready.1 == reason).then_some(ready)
    })
    .await;
    match waited {
        Ok(ready) => ready,
        Err(e) => panic!("{e}; binding now {:?}", binding_ready(h, name).await),
    }
}

fn dns_writes(h: &Harness) -> u64 {
    [
        Operation::CreateDnsRecord,
        Operation::UpdateDnsRecord,
        Operation::PatchDnsRecord,
        Operation::DeleteDnsRecord,
    ]
    .iter()
    .map(|op| h.sim.calls(*op))
    .sum()
}

/// A Tunnel created after its binding was seen renders its routes in its first Deployment: one
/// pod template, not a first one without routes that a second rollout replaces at once.
#[tokio::test]
async fn a_tunnel_created_after_its_binding_starts_with_its_routes_in_one_rollout() {
    let h = Harness::start("tr-first-render").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_binding(&h, "web", json!([{"name": "web"}])).await;
    poll_until(
        "the binding to report its missing tunnel",
        WAIT,
        POLL,
        || async { (binding_ready(&h, "web").await.1 == "TunnelNotFound").then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let ns = h.ns.clone();
    wait_ingress(&h, "the route rendered", |rules| {
        rules.get("web.example.com") == Some(&format!("http://web.{ns}.svc:80"))
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let deployment = deployments.get("edge").await.expect("deployment");
    assert_eq!(
        deployment.metadata.generation,
        Some(1),
        "the Deployment's spec changed after its creation: {:?}",
        deployment.spec.template.metadata
    );
}

#[tokio::test]
async fn bindings_and_labelled_services_are_routed_recorded_and_removed_without_leftovers() {
    let mut h = Harness::start("tr-routes").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_service(
        &h,
        "api",
        8080,
        json!({"cfargotunnel.com/expose-tunnel": "edge"}),
        json!({"cfargotunnel.com/hostname": "api.example.com"}),
    )
    .await;
    create_binding(&h, "web", json!([{"name": "web"}])).await;
    let tunnel = h
        .create_tunnel(
            "edge",
            h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
        )
        .await;
    let ns = h.ns.clone();
    wait_ingress(&h, "both routes rendered", |rules| {
        rules.get("web.example.com") == Some(&format!("http://web.{ns}.svc:80"))
            && rules.get("api.example.com") == Some(&format!("http://api.{ns}.svc:8080"))
    })
    .await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let cname = wait_records(&h, "web.example.com", 1).await;
    assert_eq!(cname[0].record_type, "CNAME");
    assert_eq!(cname[0].content, format!("{id}.cfargotunnel.com"));
    assert!(cname[0].proxied);
    let marker = format!("cftunnel Tunnel {ns}/edge");
    assert!(
        cname[0]
            .comment
            .as_deref()
            .is_some_and(|c| c.starts_with(&marker)),
        "{:?}",
        cname[0].comment
    );
    let txt = wait_records(&h, "_managed.web.example.com", 1).await;
    assert!(txt[0].content.contains(&id), "{}", txt[0].content);
    wait_records(&h, "api.example.com", 1).await;
    wait_records(&h, "_managed.api.example.com", 1).await;
    let (status, reason, hostnames) = wait_binding_reason(&h, "web", "Routed").await;
    assert_eq!(status, "True");
    assert!(hostnames.starts_with("web.example.com|"), "{hostnames}");
    let b = bindings(&h).get("web").await.expect("binding");
    assert!(b.finalizers().contains(&FINALIZER.to_string()));
    assert_eq!(reason, "Routed");
    // Stored without the webhook: the reconciler writes the Go operator's binding labels.
    assert_eq!(
        b.labels(),
        &BTreeMap::from([
            ("cftunnel-test/run".to_string(), ns.clone()),
            ("cfargotunnel.com/name".to_string(), "edge".to_string()),
            (
                "cfargotunnel.com/kind".to_string(),
                "TunnelBinding".to_string()
            ),
        ])
    );

    // A Service port change reaches the config without any edit of the binding.
    services(&h)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ports": [{"name": "http", "port": 81}]}})),
        )
        .await
        .expect("patch service");
    wait_ingress(&h, "new port rendered", |rules| {
        rules.get("web.example.com") == Some(&format!("http://web.{ns}.svc:81"))
    })
    .await;

    // A later binding claiming the same hostname loses: no rule, no record.
    h.sim.reset_counters();
    create_binding(
        &h,
        "late",
        json!([{"name": "web", "spec": {"fqdn": "web.example.com"}}]),
    )
    .await;
    let (_, _, message) = wait_binding_reason(&h, "late", "HostnameConflict").await;
    assert!(message.contains("web"), "{message}");
    assert_eq!(records(&h, "web.example.com").len(), 1);
    let late_source = format!("TunnelBinding {ns}/late");
    poll_until(
        "status.routes lists the winner and the loser",
        WAIT,
        POLL,
        || async {
            let t = h.tunnels().get("edge").await.ok()?;
            let routes = t.status?.routes?;
            let state = |source: &str| {
                routes
                    .iter()
                    .find(|r| r.hostname == "web.example.com" && r.source == source)
                    .map(|r| r.state.clone())
            };
            (state(&format!("TunnelBinding {ns}/web")).as_deref() == Some("Active")
                && state(&late_source).as_deref() == Some("Conflict"))
            .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // A new hostname costs at most two writes (CNAME + TXT).
    h.sim.reset_counters();
    create_binding(
        &h,
        "shop",
        json!([{"name": "web", "spec": {"fqdn": "shop.example.com"}}]),
    )
    .await;
    wait_records(&h, "_managed.shop.example.com", 1).await;
    wait_binding_reason(&h, "shop", "Routed").await;
    // The TXT's `DnsId` patch may ride with a later sync's batch: counted here, not after the
    // restart.
    crate::dns_reads::wait_dns_id(&h, "shop.example.com").await;
    assert!(
        dns_writes(&h) <= 2,
        "{} DNS writes for one route",
        dns_writes(&h)
    );

    // A restart re-reads candidates in pages and writes nothing.
    h.stop_operator();
    h.sim.reset_counters();
    h.start_operator();
    let restarted = tokio::time::Instant::now();
    poll_until("the restarted operator's DNS read", WAIT, POLL, || async {
        (h.sim.calls(Operation::ListDnsRecords) > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep_until(restarted + std::time::Duration::from_secs(5)).await;
    assert_eq!(dns_writes(&h), 0, "a restart rewrote DNS records");
    assert!(
        h.sim.calls(Operation::ListDnsRecords) <= 6,
        "{} list calls for a handful of hostnames",
        h.sim.calls(Operation::ListDnsRecords)
    );

    // Deleting a binding removes its records, then releases it.
    bindings(&h)
        .delete("shop", &DeleteParams::default())
        .await
        .expect("delete binding");
    h.wait_gone(&bindings(&h), "shop").await;
    wait_records(&h, "shop.example.com", 0).await;
    wait_records(&h, "_managed.shop.example.com", 0).await;
    wait_ingress(&h, "shop route gone", |rules| {
        !rules.contains_key("shop.example.com")
    })
    .await;

    // Deleting the tunnel removes every record it owns before the tunnel goes.
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete tunnel");
    h.wait_gone(&h.tunnels(), "edge").await;
    let left: Vec<SimDnsRecord> = h
        .sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.content.contains(&id) || r.name.starts_with("_managed."))
        .collect();
    assert!(left.is_empty(), "records left behind: {left:?}");
    assert_eq!(h.live_tunnels().len(), 0);
    assert!(tunnel.uid().is_some());
}

#[tokio::test]
async fn a_record_cftunnel_does_not_own_is_never_touched_and_reported() {
    let h = Harness::start("tr-dnsconflict").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let foreign = insert_foreign_cname(&h, "taken.example.com");
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_binding(
        &h,
        "web",
        json!([{"name": "web", "spec": {"fqdn": "taken.example.com"}}]),
    )
    .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let (status, _, message) = wait_binding_reason(&h, "web", "DNSConflict").await;
    assert_eq!(status, "False");
    assert!(message.contains("taken.example.com"), "{message}");
    assert!(message.contains("--overwrite-unmanaged-dns"), "{message}");
    let kept = records(&h, "taken.example.com");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].id, foreign);
    assert_eq!(kept[0].content, "elsewhere.example.net");
    assert!(records(&h, "_managed.taken.example.com").is_empty());
    crate::metrics::wait_counted("cftunnel_dns_problems", &["reason=\"DNSConflict\""]).await;
}
