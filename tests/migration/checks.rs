//! What the migration test waits for and asserts after cftunnel took over.
use std::collections::BTreeMap;

use cftunnel_policy::dns::ManagedTxt;
use cftunnel_testenv::poll_until;
use cftunnel_types::TunnelBinding;
use cftunnel_types::access_tunnel::AccessTunnel;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, WAIT};

/// A route as cloudflared serves it: the hostname and the origin's host:port (the scheme of a
/// Go-era protocol is inferred again, the origin is what must not change).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    host: String,
    origin: String,
}

impl Route {
    pub fn new(host: &str, service: &str) -> Route {
        let origin = service.split_once("://").map_or(service, |(_, o)| o);
        Route {
            host: host.to_string(),
            origin: origin.to_string(),
        }
    }
}

/// (status, message) of the binding's Ready condition once its reason is `reason`.
pub async fn wait_binding(h: &Harness, name: &str, reason: &str) -> (String, String) {
    let api: Api<TunnelBinding> = Api::namespaced(h.admin.clone(), &h.ns);
    let ready = |b: TunnelBinding| {
        b.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")
    };
    let waited = poll_until(&format!("binding {name} {reason}"), WAIT, POLL, || async {
        let ready = ready(api.get(name).await.ok()?)?;
        (ready.reason == reason).then_some((ready.status, ready.message))
    })
    .await;
    match waited {
        Ok(found) => found,
        Err(e) => panic!(
            "{e}; Ready now {:?}",
            api.get(name).await.ok().and_then(ready)
        ),
    }
}

/// hostname → origin of the ConfigMap's config.yaml, once cftunnel applied it (its field
/// manager owns config.yaml: the Go operator's ConfigMap of a Tunnel has the same name).
async fn cftunnel_ingress(h: &Harness, name: &str) -> Option<BTreeMap<String, String>> {
    let cm = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get(name)
        .await
        .ok()?;
    let ours = cm.managed_fields().iter().any(|m| {
        m.manager.as_deref() == Some("cftunnel")
            && m.operation.as_deref() == Some("Apply")
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("f:config.yaml"))
    });
    if !ours {
        return None;
    }
    let text = cm.data?.get("config.yaml")?.clone();
    let config: Value = serde_yaml_ng::from_str(&text).ok()?;
    Some(
        config["ingress"]
            .as_array()?
            .iter()
            .filter_map(|rule| {
                let route = Route::new(rule["hostname"].as_str()?, rule["service"].as_str()?);
                Some((route.host, route.origin))
            })
            .collect(),
    )
}

/// Waits until cftunnel's config of `name` serves every route of `wanted`.
pub async fn wait_cftunnel_ingress(h: &Harness, name: &str, wanted: &[Route]) {
    let waited = poll_until(&format!("{name}: every Go route"), WAIT, POLL, || async {
        let rules = cftunnel_ingress(h, name).await?;
        wanted
            .iter()
            .all(|r| rules.get(&r.host) == Some(&r.origin))
            .then_some(())
    })
    .await;
    if let Err(e) = waited {
        panic!(
            "{e}; wanted {wanted:?}, cftunnel's ingress now {:?}",
            cftunnel_ingress(h, name).await
        );
    }
}

/// The Deployments now cftunnel's: a Tunnel's re-created under its name with cftunnel's
/// selector (the Go one had spec-dependent labels), a ClusterTunnel's `clustertunnel-<name>`
/// beside the Go one (retired once ours has an available replica: no kubelet here); all of
/// them on cftunnel's pinned image, whatever the Go era pinned. `shared_replicas` is the
/// v1alpha1 `size` of the ClusterTunnel `shared-<ns>`.
pub async fn assert_cftunnel_workloads(
    h: &Harness,
    go: &[(String, String, bool)],
    image: &str,
    shared_replicas: i32,
) {
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    for (name, go_uid, cluster) in go {
        let ours = if *cluster {
            format!("clustertunnel-{name}")
        } else {
            name.clone()
        };
        let d = poll_until(
            &format!("cftunnel's Deployment {ours}"),
            WAIT,
            POLL,
            || async {
                let d = deployments.get_opt(&ours).await.ok()??;
                let selector = d.spec.selector.match_labels.clone().unwrap_or_default();
                let taken = d.uid().as_deref() != Some(go_uid.as_str())
                    && !selector.contains_key("cfargotunnel.com/id");
                taken.then_some(d)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let spec = d.spec.clone();
        let container = &spec.template.spec.as_ref().expect("pod").containers[0];
        assert_eq!(container.image.as_deref(), Some(image), "{ours}");
        if name.starts_with("shared-") {
            assert_eq!(
                spec.replicas,
                Some(shared_replicas),
                "{ours}: v1alpha1 size"
            );
        }
    }
}

/// Waits for cftunnel's CNAME of `host` to `tunnel_id` and its `_managed` TXT.
pub async fn wait_cname(h: &Harness, host: &str, tunnel_id: &str) {
    let target = format!("{tunnel_id}.cfargotunnel.com");
    poll_until(&format!("records of {host}"), WAIT, POLL, || async {
        let records = h.sim.dns_records("example.com");
        let cname = records
            .iter()
            .find(|r| r.record_type == "CNAME" && r.name == host && r.content == target)?;
        let txt = records
            .iter()
            .find(|r| r.record_type == "TXT" && r.name == format!("_managed.{host}"))?;
        let parsed = ManagedTxt::parse(&txt.content)?;
        (parsed.dns_id == cname.id && parsed.tunnel_id == tunnel_id).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; zone holds {:?}", h.sim.dns_records("example.com")));
}

/// The Go operator's records of `host` are still the only ones, the CNAME the same record.
pub fn assert_go_records_kept(h: &Harness, host: &str, cname_id: &str, tunnel_id: &str) {
    let records = h.sim.dns_records("example.com");
    let cnames: Vec<_> = records.iter().filter(|r| r.name == host).collect();
    assert_eq!(cnames.len(), 1, "{host}: {records:?}");
    assert_eq!(cnames[0].id, cname_id, "{host}: the Go CNAME was replaced");
    assert_eq!(cnames[0].content, format!("{tunnel_id}.cfargotunnel.com"));
    let txts: Vec<_> = records
        .iter()
        .filter(|r| r.name == format!("_managed.{host}"))
        .collect();
    assert_eq!(txts.len(), 1, "{host}: {records:?}");
    let parsed = ManagedTxt::parse(&txts[0].content).expect("a TXT the Go operator reads");
    assert_eq!(
        (parsed.dns_id.as_str(), parsed.tunnel_id.as_str()),
        (cname_id, tunnel_id)
    );
}

/// Waits until the AccessTunnel is Ready with `message`.
pub async fn wait_access_ready(h: &Harness, name: &str, message: &str) {
    let api: Api<AccessTunnel> = Api::namespaced(h.admin.clone(), &h.ns);
    poll_until(
        &format!("AccessTunnel {name} Ready"),
        WAIT,
        POLL,
        || async {
            let ready = api
                .get(name)
                .await
                .ok()?
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready")?;
            (ready.status == "True" && ready.message == message).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The Go operator's AccessTunnel Deployment and Service, taken over in place (same objects):
/// cftunnel's hardened pod, the token only as env valueFrom, never in the object. Fields
/// cftunnel does not set stay as the Go operator left them (its CPU limit, its container
/// `runAsUser`); fields both set carry cftunnel's value.
pub async fn assert_access_taken_over(
    h: &Harness,
    go_deployment: &Deployment,
    go_service: &Service,
    image: &str,
    tokens: &[&str],
) {
    let name = go_deployment.name_any();
    let d = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .get(&name)
        .await
        .expect("deployment");
    assert_eq!(
        d.uid(),
        go_deployment.uid(),
        "taken over in place, not re-created"
    );
    let text = serde_json::to_string(&d).expect("json");
    for token in tokens {
        assert!(
            !text.contains(token),
            "a token value is still in the Deployment"
        );
    }
    let spec = d.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = serde_json::to_value(spec.template.spec.expect("pod")).expect("json");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["automountServiceAccountToken"], false);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], image);
    assert_eq!(
        container["args"],
        json!([
            "access",
            "tcp",
            "--hostname",
            "db.example.com",
            "--listener",
            "0.0.0.0:8000"
        ])
    );
    assert_eq!(
        container["env"],
        json!([
            {"name": "TUNNEL_SERVICE_TOKEN_ID", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID"}}},
            {"name": "TUNNEL_SERVICE_TOKEN_SECRET", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN"}}},
        ])
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    // Left by the Go operator, set by no one else.
    assert_eq!(security["runAsUser"], 1002);
    assert_eq!(container["resources"]["limits"]["cpu"], "500m");

    let s = Api::<Service>::namespaced(h.admin.clone(), &h.ns)
        .get(&go_service.name_any())
        .await
        .expect("service");
    assert_eq!(
        s.uid(),
        go_service.uid(),
        "taken over in place, not re-created"
    );
    let spec = serde_json::to_value(s.spec.expect("spec")).expect("json");
    assert_eq!(
        spec["selector"],
        json!({"app": "cloudflared", "name": name})
    );
    assert_eq!(
        spec["ports"],
        json!([{"name": "tcp", "port": 8000, "protocol": "TCP", "targetPort": 8000}])
    );
    Api::<PodDisruptionBudget>::namespaced(h.admin.clone(), &h.ns)
        .get(&name)
        .await
        .expect("cftunnel's PDB for the AccessTunnel");
}

/// Every `_managed` TXT of `zone` is a JSON object (not a JSON string) whose `DnsId`,
/// `TunnelName` and `TunnelId` are strings: the content the Go operator's `json.Unmarshal` into
/// its `DnsManagedRecordTxt` decodes. At least one such record must exist.
pub fn assert_every_txt_reads_as_the_go_operators(h: &Harness, zone: &str) {
    let txts: Vec<_> = h
        .sim
        .dns_records(zone)
        .into_iter()
        .filter(|r| r.record_type == "TXT" && r.name.starts_with("_managed."))
        .collect();
    assert!(!txts.is_empty(), "no _managed TXT in {zone}");
    for txt in txts {
        let decoded: serde_json::Value = serde_json::from_str(&txt.content)
            .unwrap_or_else(|e| panic!("{}: {:?} is not JSON: {e}", txt.name, txt.content));
        for field in ["DnsId", "TunnelName", "TunnelId"] {
            assert!(
                decoded.get(field).is_some_and(serde_json::Value::is_string),
                "{}: {:?} has no string {field}",
                txt.name,
                txt.content
            );
        }
    }
}
