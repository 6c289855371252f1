//! The Kubernetes objects of one tunnel (docs/design.md §3.4): ServiceAccount, Secret, ConfigMap,
//! Deployment (as JSON, so fields newer than our API types survive a `deployPatch`) and PDB.
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::config::{
    CERTS_DIR, CONFIG_DIR, CONFIG_KEY, CREDENTIALS_KEY, CREDS_DIR, METRICS_ADDRESS, METRICS_PORT,
    TOKEN_KEY,
};
use super::input::OwnerIdentity;
use crate::hardening::CLOUDFLARED_CONTAINER;
use cftunnel_types::TunnelKind;
use cftunnel_types::names::ANNOTATION_CHECKSUM;

/// Replicas unless `deployPatch` says otherwise.
pub(crate) const DEFAULT_REPLICAS: i64 = 2;
/// cloudflared drains for 30 s on SIGTERM; give it room.
pub(crate) const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 40;
/// Prefix of a ClusterTunnel's child objects (see [`ObjectNames::for_owner`]).
pub(crate) const CLUSTER_TUNNEL_PREFIX: &str = "clustertunnel-";

/// Names of one tunnel's managed objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectNames {
    /// Deployment, ConfigMap, Secret and PodDisruptionBudget (one name per kind).
    pub workload: String,
    pub service_account: String,
}

impl ObjectNames {
    /// A Tunnel `web` gets `web` and the ServiceAccount `web-cloudflared`. A ClusterTunnel `web`
    /// gets `clustertunnel-web` and `clustertunnel-web-cloudflared`: its children share the
    /// cluster-resource namespace with Tunnels, and the prefix keeps them apart from a Tunnel
    /// of the same name there (any other clash is a NameConflict, found by owner reference).
    pub fn for_owner(identity: &OwnerIdentity) -> ObjectNames {
        let workload = match identity.kind {
            TunnelKind::Tunnel => identity.name.clone(),
            TunnelKind::ClusterTunnel => format!("{CLUSTER_TUNNEL_PREFIX}{}", identity.name),
        };
        ObjectNames {
            service_account: format!("{workload}-cloudflared"),
            workload,
        }
    }
}

/// What every rendered object shares: where it lives, its labels and its controller.
#[derive(Clone, Debug)]
pub struct Common {
    pub names: ObjectNames,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    pub owner: OwnerReference,
}

impl Common {
    fn meta(&self, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels.clone()),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// A controller reference to the Tunnel or ClusterTunnel (garbage collection and NameConflict).
pub fn owner_reference(identity: &OwnerIdentity) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/v1alpha2", cftunnel_types::names::GROUP),
        kind: identity.kind.as_str().to_string(),
        name: identity.name.clone(),
        uid: identity.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Does the object's controller owner reference point at the object with `uid`?
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// A ServiceAccount with no token and no permissions: cloudflared never calls the API.
pub fn service_account(common: &Common) -> ServiceAccount {
    ServiceAccount {
        metadata: common.meta(&common.names.service_account),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// credentials.json, and for a remotely-managed tunnel the connector token beside it.
pub fn secret(common: &Common, credentials_json: &[u8], token: Option<&str>) -> Secret {
    let mut data = BTreeMap::from([(
        CREDENTIALS_KEY.to_string(),
        ByteString(credentials_json.to_vec()),
    )]);
    if let Some(token) = token {
        data.insert(TOKEN_KEY.to_string(), ByteString(token.as_bytes().to_vec()));
    }
    Secret {
        metadata: common.meta(&common.names.workload),
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Secret::default()
    }
}

pub fn config_map(common: &Common, config_yaml: &str) -> ConfigMap {
    ConfigMap {
        metadata: common.meta(&common.names.workload),
        data: Some(BTreeMap::from([(
            CONFIG_KEY.to_string(),
            config_yaml.to_string(),
        )])),
        ..ConfigMap::default()
    }
}

pub(crate) fn pod_disruption_budget(common: &Common) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: common.meta(&common.names.workload),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(common.selector.clone()),
                match_expressions: None,
            }),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            min_available: None,
        }),
        status: None,
    }
}

/// What the Deployment needs beyond [`Common`].
pub struct WorkloadParams<'a> {
    pub image: &'a str,
    pub protocol: &'a str,
    pub checksum: &'a str,
    /// The `originCaPool` Secret to mount, if any.
    pub origin_ca_pool: Option<&'a str>,
    /// `configSource: Cloudflare`: cloudflared runs from the connector token (env from the
    /// Secret, never an argument), with no credentials file and no config.yaml.
    pub remote: bool,
}

/// The cloudflared Deployment, before hardening and `deployPatch`.
pub fn deployment(common: &Common, params: &WorkloadParams<'_>) -> Value {
    let (mut mounts, mut volumes) = if params.remote {
        (Vec::new(), Vec::new())
    } else {
        (
            vec![
                json!({"name": "creds", "mountPath": CREDS_DIR, "readOnly": true}),
                json!({"name": "config", "mountPath": CONFIG_DIR, "readOnly": true}),
            ],
            vec![
                json!({"name": "creds", "secret": {"secretName": common.names.workload}}),
                json!({"name": "config", "configMap": {"name": common.names.workload}}),
            ],
        )
    };
    if let Some(pool) = params.origin_ca_pool {
        mounts.push(json!({"name": "certs", "mountPath": CERTS_DIR, "readOnly": true}));
        volumes.push(json!({"name": "certs", "secret": {"secretName": pool}}));
    }
    let config_file = format!("{CONFIG_DIR}/{CONFIG_KEY}");
    let args: Vec<&str> = if params.remote {
        vec![
            "tunnel",
            "--no-autoupdate",
            "--protocol",
            params.protocol,
            "--metrics",
            METRICS_ADDRESS,
            "run",
        ]
    } else {
        vec![
            "tunnel",
            "--protocol",
            params.protocol,
            "--config",
            &config_file,
            "--metrics",
            METRICS_ADDRESS,
            "run",
        ]
    };

    let metadata = serde_json::to_value(common.meta(&common.names.workload)).unwrap_or_default();
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": DEFAULT_REPLICAS,
            "selector": {"matchLabels": common.selector},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}
            },
            "template": {
                "metadata": {
                    "labels": common.labels,
                    "annotations": {ANNOTATION_CHECKSUM: params.checksum}
                },
                "spec": {
                    "serviceAccountName": common.names.service_account,
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_PERIOD_SECONDS,
                    "containers": [{
                        "name": CLOUDFLARED_CONTAINER,
                        "image": params.image,
                        "args": args,
                        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                        "volumeMounts": mounts
                    }],
                    "volumes": volumes
                }
            }
        }
    });
    // No empty lists: the API server stores none, so the live object would always differ.
    if let Some(pod) = deployment.pointer_mut("/spec/template/spec")
        && pod["volumes"].as_array().is_some_and(Vec::is_empty)
        && let Some(pod) = pod.as_object_mut()
    {
        pod.remove("volumes");
    }
    if let Some(container) = deployment.pointer_mut("/spec/template/spec/containers/0")
        && container["volumeMounts"]
            .as_array()
            .is_some_and(Vec::is_empty)
        && let Some(container) = container.as_object_mut()
    {
        container.remove("volumeMounts");
    }
    if params.remote
        && let Some(container) = deployment.pointer_mut("/spec/template/spec/containers/0")
    {
        container["env"] = json!([{"name": "TUNNEL_TOKEN", "valueFrom": {"secretKeyRef": {"name": common.names.workload, "key": TOKEN_KEY}}}]);
    }
    deployment
}
