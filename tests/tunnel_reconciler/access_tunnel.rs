//! AccessTunnel end to end: a hardened `cloudflared access` Deployment whose service token comes
//! from the Secret through environment variables only, a Service, Ready, a roll when the token
//! changes, and everything gone with the object (KCM's garbage collector). No value of the token
//! in the Deployment, in any Event of the namespace or in the operator's log lines.
use cftunnel_testenv::poll_until;
use cftunnel_types::access_tunnel::AccessTunnel;
use cftunnel_types::names::ANNOTATION_CHECKSUM;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::{self, Harness, POLL, WAIT};

const TOKEN_ID: &str = "0f1e2d3c.access";
const TOKEN_SECRET: &str = "s3cr3t-service-token-value";
const ROTATED: &str = "rotated-service-token-value";

fn checksum(d: &Deployment) -> String {
    d.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_CHECKSUM).cloned())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_access_tunnel_runs_with_its_token_in_env_only_rolls_on_change_and_goes_with_the_object()
{
    // Everything the in-process operator logs during the test, at debug level.
    let (_logs_guard, logs) = harness::capture_logs();
    let h = Harness::start("tr-access").await;
    h.create_api_secret(
        "access-token",
        &[
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID", TOKEN_ID),
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN", TOKEN_SECRET),
        ],
    )
    .await;
    let tunnels: Api<AccessTunnel> = Api::namespaced(h.admin.clone(), &h.ns);
    let at: AccessTunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "AccessTunnel",
        "metadata": {"name": "bastion", "labels": {"cftunnel-test/run": h.ns}},
        "target": {"fqdn": "ssh.example.com", "protocol": "ssh", "svc": {"name": "bastion-ssh", "port": 2222}},
        "serviceToken": {"secretRef": "access-token"},
    }))
    .expect("access tunnel json");
    tunnels
        .create(&PostParams::default(), &at)
        .await
        .expect("create access tunnel");
    let ready = poll_until("AccessTunnel Ready", WAIT, POLL, || async {
        let at = tunnels.get("bastion").await.ok()?;
        let ready = at
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "True").then_some(ready)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ready.message,
        "cloudflared access ssh to ssh.example.com is reachable at Service bastion-ssh:2222"
    );
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let d = deployments.get("bastion").await.expect("deployment");
    let pod = d.spec.template.spec.clone().expect("pod spec");
    let container = &pod.containers[0];
    assert_eq!(
        container.args.clone().unwrap_or_default(),
        [
            "access",
            "ssh",
            "--hostname",
            "ssh.example.com",
            "--listener",
            "0.0.0.0:8000"
        ]
    );
    let env = serde_json::to_value(&container.env).expect("env json");
    assert_eq!(
        env,
        json!([
            {"name": "TUNNEL_SERVICE_TOKEN_ID", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID"}}},
            {"name": "TUNNEL_SERVICE_TOKEN_SECRET", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN"}}},
        ])
    );
    let whole = serde_json::to_string(&d).expect("deployment json");
    assert!(
        !whole.contains(TOKEN_SECRET) && !whole.contains(TOKEN_ID),
        "the token is in the Deployment"
    );
    let security = container
        .security_context
        .clone()
        .expect("security context");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    let first = checksum(&d);
    assert_eq!(first.len(), 64);
    let services: Api<Service> = Api::namespaced(h.admin.clone(), &h.ns);
    let svc = services.get("bastion-ssh").await.expect("service");
    let spec = svc.spec.expect("service spec");
    assert_eq!(
        serde_json::to_value(&spec.ports).expect("ports"),
        json!([{"name": "ssh", "port": 2222, "protocol": "TCP", "targetPort": 8000}])
    );
    // The Go operator's labels select the pods, as dashboards did.
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    poll_until(
        "access pods by the Go operator's labels",
        WAIT,
        POLL,
        || async {
            let found = pods
                .list(&ListParams::default().labels("app=cloudflared,name=bastion"))
                .await
                .ok()?
                .items
                .len();
            (found == 2).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // A new token rolls the pods.
    let secrets: Api<Secret> = Api::namespaced(h.admin.clone(), &h.ns);
    secrets
        .patch(
            "access-token",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"stringData": {"CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN": ROTATED}}),
            ),
        )
        .await
        .expect("rotate token");
    let rolled = poll_until("the checksum follows the token", WAIT, POLL, || async {
        let d = deployments.get("bastion").await.ok()?;
        (checksum(&d) != first && checksum(&d).len() == 64).then_some(d)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let whole = serde_json::to_string(&rolled).expect("deployment json");
    assert!(
        !whole.contains(ROTATED),
        "the new token is in the Deployment"
    );
    // The new template is rolled out: KCM makes a second ReplicaSet for it.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(h.admin.clone(), &h.ns);
    poll_until("a ReplicaSet for the new checksum", WAIT, POLL, || async {
        let sets = replica_sets
            .list(&ListParams::default().labels("app=cloudflared,name=bastion"))
            .await
            .ok()?
            .items;
        let checksums: std::collections::BTreeSet<String> = sets
            .iter()
            .filter_map(|rs| {
                rs.spec
                    .template
                    .as_ref()?
                    .metadata
                    .as_ref()?
                    .annotations
                    .as_ref()?
                    .get(ANNOTATION_CHECKSUM)
                    .cloned()
            })
            .collect();
        (checksums.contains(&first) && checksums.contains(&checksum(&rolled))).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // No value of the token in any Event of the namespace (whole objects, not only notes).
    let events: Api<Event> = Api::namespaced(h.admin.clone(), &h.ns);
    let events = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    for event in &events {
        let text = serde_json::to_string(event).expect("event json");
        for value in [TOKEN_ID, TOKEN_SECRET, ROTATED] {
            assert!(!text.contains(value), "a token value in an Event: {text}");
        }
    }

    // A Service of that name that another object owns is never applied over.
    let foreign: Service = serde_json::from_value(json!({
        "metadata": {"name": "taken"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .expect("service json");
    services
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign service");
    let clash: AccessTunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "AccessTunnel",
        "metadata": {"name": "clash", "labels": {"cftunnel-test/run": h.ns}},
        "target": {"fqdn": "db.example.com", "svc": {"name": "taken"}},
    }))
    .expect("access tunnel json");
    tunnels
        .create(&PostParams::default(), &clash)
        .await
        .expect("create clash");
    let ns = h.ns.clone();
    poll_until("NameConflict on the foreign Service", WAIT, POLL, || async {
        let at = tunnels.get("clash").await.ok()?;
        let ready = at
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.reason == "NameConflict"
            && ready.message
                == format!("Service {ns}/taken already exists and is not controlled by AccessTunnel {ns}/clash; rename or remove it"))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let kept = services.get("taken").await.expect("foreign service");
    assert_eq!(kept.metadata.owner_references, None, "never applied over");

    // Deleting the object removes what it owns.
    tunnels
        .delete("bastion", &DeleteParams::default())
        .await
        .expect("delete");
    let accounts: Api<ServiceAccount> = Api::namespaced(h.admin.clone(), &h.ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(h.admin.clone(), &h.ns);
    poll_until("owned objects collected", WAIT, POLL, || async {
        let d = deployments.get_opt("bastion").await.ok()?;
        let s = services.get_opt("bastion-ssh").await.ok()?;
        let p = pdbs.get_opt("bastion").await.ok()?;
        let a = accounts.get_opt("bastion-access").await.ok()?;
        (d.is_none() && s.is_none() && p.is_none() && a.is_none()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let kept = tunnels
        .get("clash")
        .await
        .expect("the other AccessTunnel stays");
    assert!(kept.metadata.deletion_timestamp.is_none());

    // The operator's own log lines (debug level) never carry a token value.
    let logs = harness::captured(&logs);
    let ns = h.ns.as_str();
    assert!(
        logs.contains(&format!("accesstunnel={ns}/bastion"))
            && logs.contains("AccessTunnel Ready changed"),
        "the capture holds the operator's lines about the object:\n{logs}"
    );
    for value in [TOKEN_ID, TOKEN_SECRET, ROTATED] {
        assert!(!logs.contains(value), "a token value is logged");
    }
}
