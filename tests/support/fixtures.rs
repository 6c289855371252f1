//! Kubernetes objects the integration tests create.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

pub fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let to_map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: (!labels.is_empty()).then(|| to_map(labels)),
            ..Default::default()
        },
        data: Some(to_map(data)),
        ..Default::default()
    }
}

pub fn api_error_code(result: &Result<impl std::fmt::Debug, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

pub fn deployment(name: &str, replicas: i32) -> Deployment {
    let labels = BTreeMap::from([("app".to_string(), name.to_string())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".to_string(),
                        // Never pulled: there are no nodes, the Pods stay Pending.
                        image: Some("registry.invalid/app:1".to_string()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

pub const DENY_LABEL: &str = "cftunnel.test/deny";
pub const DENY_MESSAGE: &str = "configmaps labelled cftunnel.test/deny are refused";

pub fn deny_configuration(name: &str, ns: &str) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: "deny.cftunnel.test".to_string(),
            admission_review_versions: vec!["v1".to_string()],
            client_config: WebhookClientConfig {
                service: Some(ServiceReference {
                    name: "cftunnel-webhook".to_string(),
                    namespace: "cftunnel-system".to_string(),
                    path: Some("/validate".to_string()),
                    port: Some(443),
                }),
                ..Default::default()
            },
            failure_policy: Some("Fail".to_string()),
            side_effects: "None".to_string(),
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_string(),
                    ns.to_string(),
                )])),
                ..Default::default()
            }),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".to_string()]),
                operations: Some(vec!["CREATE".to_string()]),
                resources: Some(vec!["configmaps".to_string()]),
                ..Default::default()
            }]),
            timeout_seconds: Some(10),
            ..Default::default()
        }]),
    }
}

/// Group and kind of the CRD the shared control plane installs at start.
pub const WIDGET_GROUP: &str = "testenv.cftunnel.dev";

/// A minimal namespaced CRD, installed through `ControlPlaneOptions::crds`.
pub fn widget_crd() -> CustomResourceDefinition {
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widgets.{WIDGET_GROUP}") },
        "spec": {
            "group": WIDGET_GROUP,
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "properties": { "size": { "type": "integer" } }
                    } }
                } }
            }]
        }
    });
    serde_json::from_value(crd).expect("valid CRD literal")
}

/// A role in the test namespace granting `verbs` on ConfigMaps.
pub fn config_map_role(name: &str, verbs: &[&str]) -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_string()]),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }]),
    }
}

/// Binds `role` to the group `group`.
pub fn group_binding(name: &str, role: &str, group: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_string()),
            kind: "Role".to_string(),
            name: role.to_string(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".to_string()),
            kind: "Group".to_string(),
            name: group.to_string(),
            ..Default::default()
        }]),
    }
}
