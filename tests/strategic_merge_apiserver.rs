//! The local strategic merge against the reference: a real kube-apiserver's strategic-merge PATCH
//! (`dryRun=All`) of the same patch on the same Deployment, and its published patch metadata.
use std::collections::{BTreeMap, BTreeSet};

use cftunnel_policy::render::strategic_merge::strategic_merge;
use cftunnel_policy::render::strategic_merge_keys::{DEPLOYMENT, TABLE};
use cftunnel_policy::render::{
    OwnerIdentity, RenderOptions, TunnelCredentials, TunnelInput, render_all,
};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, shared};
use cftunnel_types::TunnelKind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn plane() -> &'static ControlPlane {
    match shared(ControlPlaneOptions::default).await {
        Ok(plane) => plane,
        Err(e) => panic!("{e}"),
    }
}

/// A rendered Deployment whose lists all hold several elements, so merges have something to do.
fn rendered(namespace: &str) -> cftunnel_policy::render::Rendered {
    let spec = serde_json::from_value(json!({
        "newTunnel": {"name": "shop"},
        "cloudflare": {"domain": "example.com", "secret": "cf-api", "accountId": "0123456789abcdef0123456789abcdef"},
        "originCaPool": "origin-ca",
        "deployPatch": r#"
metadata:
  finalizers: [example.com/a, example.com/b, example.com/c]
spec:
  template:
    spec:
      nodeSelector: {disk: ssd}
      tolerations: [{key: dedicated, operator: Equal, value: edge, effect: NoSchedule}]
      hostAliases: [{ip: 10.0.0.1, hostnames: [a.internal]}]
      imagePullSecrets: [{name: pull-one}]
      topologySpreadConstraints:
      - {topologyKey: kubernetes.io/hostname, maxSkew: 1, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: x}}}
      containers:
      - name: cloudflared
        env: [{name: A, value: "1"}, {name: B, value: "2"}, {name: C, value: "3"}]
      volumes:
      - {name: scratch, emptyDir: {}}
"#
    }))
    .expect("spec");
    let input = TunnelInput {
        identity: OwnerIdentity {
            kind: TunnelKind::Tunnel,
            namespace: namespace.into(),
            name: "edge".into(),
            uid: "5d3c1a8e-0000-4000-8000-000000000001".into(),
        },
        spec,
        tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: "shop".into(),
        domain: "example.com".into(),
        credentials: TunnelCredentials {
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            secret_b64: "cGxhY2Vob2xkZXI=".into(),
            tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        },
        origin_ca_pem: Some("placeholder".into()),
        routes: vec![],
    };
    let options = RenderOptions {
        cloudflared_image: "cloudflare/cloudflared:2026.11.0".into(),
    };
    render_all(&input, &options).expect("renders")
}

/// New containers carry what the API server would default, so results compare field for field.
fn sidecar(name: &str) -> Value {
    json!({"name": name, "image": "busybox:1.37", "imagePullPolicy": "IfNotPresent",
           "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
           "resources": {}})
}

fn pod_patch(spec: Value) -> Value {
    json!({"spec": {"template": {"spec": spec}}})
}

fn cases() -> Vec<(&'static str, Value)> {
    vec![
        (
            "containers: env added to cloudflared, sidecar added",
            pod_patch(json!({"containers": [
            {"name": "cloudflared", "env": [{"name": "D", "value": "4"}]}, sidecar("sidecar")]})),
        ),
        (
            "env: one changed by name, one added",
            pod_patch(json!({"containers": [
            {"name": "cloudflared", "env": [{"name": "B", "value": "two"}, {"name": "Z", "value": "26"}]}]})),
        ),
        (
            "ports: renamed by containerPort, one added",
            pod_patch(json!({"containers": [
            {"name": "cloudflared", "ports": [{"containerPort": 2000, "name": "prom"},
                                              {"containerPort": 7844, "protocol": "UDP", "name": "quic"}]}]})),
        ),
        (
            "volumes and volumeMounts added and changed",
            pod_patch(json!({
            "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory"}}, {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "containers": [{"name": "cloudflared", "volumeMounts": [
                {"name": "tmp", "mountPath": "/tmp"}, {"name": "scratch", "mountPath": "/etc/cloudflared/config", "readOnly": true}]}]})),
        ),
        (
            "$patch: replace of a map inside a merged volume",
            pod_patch(
                json!({"volumes": [{"name": "creds", "secret": {"$patch": "replace", "secretName": "other", "defaultMode": 420}}]}),
            ),
        ),
        (
            "tolerations replaced",
            pod_patch(json!({"tolerations": [{"key": "other", "operator": "Exists"}]})),
        ),
        (
            "$patch: delete of a volume and its mount",
            pod_patch(json!({
            "volumes": [{"name": "scratch", "$patch": "delete"}],
            "containers": [{"name": "cloudflared", "volumeMounts": [{"mountPath": "/etc/cloudflared/certs", "$patch": "delete"}]}]})),
        ),
        (
            "$patch: replace of containers",
            pod_patch(json!({"containers": [
            {"name": "cloudflared", "image": "cloudflare/cloudflared:2026.11.1", "imagePullPolicy": "IfNotPresent",
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {}},
            {"$patch": "replace"}]})),
        ),
        (
            "$setElementOrder on env with one change",
            pod_patch(json!({"containers": [{"name": "cloudflared",
            "$setElementOrder/env": [{"name": "C"}, {"name": "A"}, {"name": "B"}],
            "env": [{"name": "A", "value": "one"}]}]})),
        ),
        (
            "$setElementOrder on containers with a new one",
            pod_patch(json!({
            "$setElementOrder/containers": [{"name": "first"}, {"name": "cloudflared"}],
            "containers": [sidecar("first")]})),
        ),
        (
            "null deletes keys",
            json!({"spec": {"template": {"spec": {"nodeSelector": null,
            "containers": [{"name": "cloudflared", "args": null, "env": [{"name": "A", "value": null}]}]}}}}),
        ),
        (
            "$retainKeys switches a volume source",
            pod_patch(json!({"volumes": [
            {"name": "scratch", "$retainKeys": ["name", "configMap"], "configMap": {"name": "other", "defaultMode": 420}}]})),
        ),
        (
            "replicas, strategy and map deletion",
            json!({"spec": {"replicas": 5,
            "strategy": {"rollingUpdate": {"maxSurge": 2}},
            "template": {"spec": {"affinity": {"$patch": "delete"}}}}}),
        ),
        (
            "hostAliases by ip, imagePullSecrets by name, topologySpreadConstraints by topologyKey",
            pod_patch(json!({
            "hostAliases": [{"ip": "10.0.0.2", "hostnames": ["b.internal"]}, {"ip": "10.0.0.1", "hostnames": ["c.internal"]}],
            "imagePullSecrets": [{"name": "pull-two"}],
            "topologySpreadConstraints": [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 2}]})),
        ),
        (
            "finalizers: $deleteFromPrimitiveList and a primitive merge",
            json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/b"], "finalizers": ["example.com/d", "example.com/a"]}}),
        ),
        (
            "new env list on a new container with nulls inside",
            pod_patch(json!({"initContainers": [
            {"name": "init", "image": "busybox:1.37", "imagePullPolicy": "IfNotPresent",
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": {},
             "env": [{"name": "X", "value": "1"}], "args": null}]})),
        ),
    ]
}

/// What a patch may change: the spec and the finalizers.
fn compared(deployment: &Value) -> Value {
    json!({"spec": deployment["spec"], "finalizers": deployment["metadata"]["finalizers"]})
}

#[tokio::test]
async fn local_strategic_merge_matches_the_api_server_for_every_directive() {
    let plane = plane().await;
    let client = plane.admin_client().expect("client");
    let namespace = plane.create_namespace("smp").await.expect("namespace");
    let api: Api<Deployment> = Api::namespaced(client, &namespace);
    let rendered: Deployment =
        serde_json::from_value(rendered(&namespace).deployment).expect("typed");
    let created = api
        .create(&PostParams::default(), &rendered)
        .await
        .expect("create");
    let name = created.metadata.name.clone().expect("name");
    let base = serde_json::to_value(api.get(&name).await.expect("get")).expect("json");

    let params = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let mut mismatches = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 10);
    for (label, patch) in cases {
        let server = api
            .patch(&name, &params, &Patch::Strategic(patch.clone()))
            .await
            .unwrap_or_else(|e| panic!("{label}: server refused the patch: {e}"));
        let server = serde_json::to_value(server).expect("json");
        let local = strategic_merge(&base, &patch, DEPLOYMENT)
            .unwrap_or_else(|e| panic!("{label}: local merge failed: {e}"));
        // Round-trip the local result through the API type, as the server decodes its own.
        let local: Deployment = serde_json::from_value(local).expect("typed local");
        let local = serde_json::to_value(local).expect("json");
        assert_ne!(
            compared(&server),
            compared(&base),
            "{label}: the patch changed nothing"
        );
        if compared(&server) != compared(&local) {
            mismatches.push(format!(
                "{label}:\n server {}\n local  {}",
                compared(&server),
                compared(&local)
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[tokio::test]
async fn every_rendered_object_is_accepted_by_the_api_server() {
    let plane = plane().await;
    let client = plane.admin_client().expect("client");
    let namespace = plane.create_namespace("smp").await.expect("namespace");
    let r = rendered(&namespace);
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
        .create(&pp, &r.service_account)
        .await
        .expect("sa");
    Api::<Secret>::namespaced(client.clone(), &namespace)
        .create(&pp, &r.secret)
        .await
        .expect("secret");
    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .create(
            &pp,
            r.config_map
                .as_ref()
                .expect("a local tunnel has its config.yaml"),
        )
        .await
        .expect("cm");
    Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace)
        .create(&pp, &r.pdb)
        .await
        .expect("pdb");
    let deployment: Deployment = serde_json::from_value(r.deployment.clone()).expect("typed");
    let created = Api::<Deployment>::namespaced(client, &namespace)
        .create(&pp, &deployment)
        .await
        .expect("deployment");
    let spec = created.spec;
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.selector.match_labels,
        Some(BTreeMap::from([
            (
                "cfargotunnel.com/app".to_string(),
                "cloudflared".to_string()
            ),
            (
                "cfargotunnel.com/is-cluster-tunnel".to_string(),
                "false".to_string()
            ),
            ("cfargotunnel.com/tunnel".to_string(), "edge".to_string()),
        ]))
    );
}

/// `(definition, field)` of an OpenAPI property.
type FieldId = (String, String);

/// `(definition, field) -> (strategy, merge key)` for every field with patch metadata, over the
/// definitions reachable from Deployment in the server's `/openapi/v2`.
fn published_metadata(
    openapi: &Value,
) -> (
    BTreeMap<FieldId, (String, String)>,
    BTreeMap<FieldId, String>,
) {
    let definitions = &openapi["definitions"];
    let reference = |schema: &Value| -> Option<String> {
        let r = schema
            .get("$ref")
            .or_else(|| schema.pointer("/items/$ref"))
            .or_else(|| schema.pointer("/additionalProperties/$ref"))?;
        r.as_str()
            .map(|s| s.trim_start_matches("#/definitions/").to_string())
    };
    let mut seen = BTreeSet::new();
    let mut todo = vec![DEPLOYMENT.to_string()];
    let mut strategies = BTreeMap::new();
    let mut children = BTreeMap::new();
    while let Some(def) = todo.pop() {
        if !seen.insert(def.clone()) {
            continue;
        }
        let Some(properties) = definitions[&def]["properties"].as_object() else {
            continue;
        };
        for (field, schema) in properties {
            let child = reference(schema);
            if let Some(child) = &child {
                children.insert((def.clone(), field.clone()), child.clone());
                todo.push(child.clone());
            }
            let strategy = schema
                .get("x-kubernetes-patch-strategy")
                .and_then(Value::as_str)
                .unwrap_or("");
            let key = schema
                .get("x-kubernetes-patch-merge-key")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !strategy.is_empty() || !key.is_empty() {
                strategies.insert(
                    (def.clone(), field.clone()),
                    (strategy.to_string(), key.to_string()),
                );
            }
        }
    }
    (strategies, children)
}

#[tokio::test]
async fn patch_metadata_table_matches_the_api_servers_openapi() {
    let plane = plane().await;
    let client = plane.admin_client().expect("client");
    let request = http::Request::get("/openapi/v2")
        .body(Vec::new())
        .expect("request");
    let text = client.request_text(request).await.expect("openapi");
    let openapi: Value = serde_json::from_str(&text).expect("openapi json");
    let (published, children) = published_metadata(&openapi);
    let ours: BTreeMap<(String, String), (String, String)> = TABLE
        .iter()
        .filter(|f| !f.strategy.is_empty() || !f.merge_key.is_empty())
        .map(|f| {
            (
                (f.owner.to_string(), f.field.to_string()),
                (f.strategy.to_string(), f.merge_key.to_string()),
            )
        })
        .collect();
    assert_eq!(ours, published);
    for field in TABLE {
        let published_child = children.get(&(field.owner.to_string(), field.field.to_string()));
        assert_eq!(
            published_child.map(String::as_str).unwrap_or(""),
            field.child,
            "{}.{}",
            field.owner,
            field.field
        );
    }
    // Every type holding patch metadata is reachable from Deployment through the table.
    let mut reachable = BTreeSet::from([DEPLOYMENT]);
    let mut grew = true;
    while grew {
        grew = false;
        for field in TABLE {
            if reachable.contains(field.owner)
                && !field.child.is_empty()
                && reachable.insert(field.child)
            {
                grew = true;
            }
        }
    }
    for (owner, field) in published.keys() {
        assert!(
            reachable.contains(owner.as_str()),
            "{owner}.{field} is not reachable through the table"
        );
    }
}
