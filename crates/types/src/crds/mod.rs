//! The CustomResourceDefinitions as installed: versions merged, CEL rules and conversion added.
//! `cftunnel crds` prints them; `manifests/crds.yaml` is their checked-in output.
pub mod helm;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
    JSONSchemaProps, ServiceReference, ValidationRule, WebhookClientConfig, WebhookConversion,
};
use kube::core::crd::{CustomResourceExt, merge_crds};

use super::access::AccessTunnel;
use super::binding::TunnelBinding;
use super::cel::{self, CelRule};
use super::tunnel::{v1alpha1, v1alpha2};

/// CRDs whose versions cftunnel converts.
pub const CONVERTED_CRDS: &[&str] = &[
    "tunnels.networking.cfargotunnel.com",
    "clustertunnels.networking.cfargotunnel.com",
];

/// Where the API server sends ConversionReviews: the cftunnel webhook Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionService {
    pub namespace: String,
    pub name: String,
    pub path: String,
    pub port: i32,
}

impl Default for ConversionService {
    fn default() -> Self {
        ConversionService {
            namespace: "cftunnel-system".into(),
            name: "cftunnel-webhook".into(),
            path: "/convert".into(),
            port: 443,
        }
    }
}

/// All CRDs of the group, in a stable order.
pub fn all(conversion: &ConversionService) -> Vec<CustomResourceDefinition> {
    vec![
        tunnel(conversion),
        cluster_tunnel(conversion),
        tunnel_binding(),
        access_tunnel(),
    ]
}

pub fn tunnel(conversion: &ConversionService) -> CustomResourceDefinition {
    let merged = merge_crds(
        vec![v1alpha1::Tunnel::crd(), v1alpha2::Tunnel::crd()],
        "v1alpha2",
    );
    finish_tunnel_kind(
        merged.unwrap_or_else(unreachable_merge),
        "Tunnel",
        conversion,
    )
}

pub fn cluster_tunnel(conversion: &ConversionService) -> CustomResourceDefinition {
    let merged = merge_crds(
        vec![
            v1alpha1::ClusterTunnel::crd(),
            v1alpha2::ClusterTunnel::crd(),
        ],
        "v1alpha2",
    );
    finish_tunnel_kind(
        merged.unwrap_or_else(unreachable_merge),
        "ClusterTunnel",
        conversion,
    )
}

pub fn tunnel_binding() -> CustomResourceDefinition {
    TunnelBinding::crd()
}

/// AccessTunnel v1alpha1, with CEL rules on the fields they judge, whose messages are the
/// webhook's texts (the value quoted through `messageExpression`). On the root object the API
/// server's cost estimate of `messageExpression` exceeds its budget: rules sit on the fields.
pub(crate) fn access_tunnel() -> CustomResourceDefinition {
    let mut crd = AccessTunnel::crd();
    for version in &mut crd.spec.versions {
        let Some(root) = schema_of(version) else {
            continue;
        };
        for (path, rule, message) in cel::ACCESS_RULES {
            let mut field = Some(&mut *root);
            for name in *path {
                field = field
                    .and_then(|f| f.properties.as_mut())
                    .and_then(|p| p.get_mut(*name));
            }
            if let Some(field) = field {
                field
                    .x_kubernetes_validations
                    .get_or_insert_with(Vec::new)
                    .push(ValidationRule {
                        rule: (*rule).into(),
                        message_expression: Some((*message).into()),
                        ..Default::default()
                    });
            }
        }
    }
    crd
}

/// The OpenAPI schema of one version, when it has one.
fn schema_of(version: &mut CustomResourceDefinitionVersion) -> Option<&mut JSONSchemaProps> {
    version
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
}

/// Merging fails only when the versions disagree on group, kind or scope: a bug in this file,
/// caught by the unit tests below.
fn unreachable_merge(e: kube::core::crd::MergeError) -> CustomResourceDefinition {
    panic!("CRD versions of one kind must merge: {e}")
}

fn finish_tunnel_kind(
    mut crd: CustomResourceDefinition,
    kind: &str,
    conversion: &ConversionService,
) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if version.name == "v1alpha1" {
            version.deprecated = Some(true);
            version.deprecation_warning = Some(format!(
                "networking.cfargotunnel.com/v1alpha1 {kind} is deprecated; use v1alpha2 (size, image, nodeSelectors and tolerations move into spec.deployPatch)"
            ));
        }
        let Some(root) = schema_of(version) else {
            continue;
        };
        root.x_kubernetes_validations = Some(cel::ROOT_RULES.iter().map(to_rule).collect());
        if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            add_spec_rules(spec);
        }
    }
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: conversion.namespace.clone(),
                    name: conversion.name.clone(),
                    path: Some(conversion.path.clone()),
                    port: Some(conversion.port),
                }),
                ..Default::default()
            }),
        }),
    });
    crd
}

fn to_rule(r: &CelRule) -> ValidationRule {
    ValidationRule {
        rule: r.rule.into(),
        message: Some(r.message.into()),
        ..Default::default()
    }
}

fn add_spec_rules(spec: &mut JSONSchemaProps) {
    let rules = cel::spec_rules()
        .into_iter()
        .map(|(rule, message)| ValidationRule {
            rule,
            message: Some(message.into()),
            ..Default::default()
        });
    spec.x_kubernetes_validations
        .get_or_insert_with(Vec::new)
        .extend(rules);
}

/// Multi-document YAML of all CRDs.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version<'a>(crd: &'a CustomResourceDefinition, name: &str) -> &'a JSONSchemaProps {
        crd.spec
            .versions
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("version with schema")
    }

    /// The schema of the top-level field `field` (`spec`, `status`) of a version.
    fn field<'a>(
        crd: &'a CustomResourceDefinition,
        name: &str,
        field: &str,
    ) -> &'a JSONSchemaProps {
        &version(crd, name).properties.as_ref().expect("properties")[field]
    }

    #[test]
    fn tunnel_serves_two_versions_and_stores_v1alpha2() {
        let crd = tunnel(&ConversionService::default());
        let mut served: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        served.sort();
        assert_eq!(
            served,
            vec![("v1alpha1", true, false), ("v1alpha2", true, true)]
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            cluster_tunnel(&ConversionService::default()).spec.scope,
            "Cluster"
        );
        assert_eq!(
            crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
            Some("Webhook")
        );
    }

    #[test]
    fn cel_rules_carry_the_webhook_messages() {
        let crd = tunnel(&ConversionService::default());
        let root = version(&crd, "v1alpha2");
        let root_messages: Vec<_> = root
            .x_kubernetes_validations
            .iter()
            .flatten()
            .filter_map(|r| r.message.as_deref())
            .collect();
        assert!(root_messages.contains(&cel::NAME_TOO_LONG));
        assert!(root_messages.contains(&cel::ACCOUNT_IMMUTABLE));
        let spec = &root.properties.as_ref().expect("properties")["spec"];
        let spec_messages: Vec<_> = spec
            .x_kubernetes_validations
            .iter()
            .flatten()
            .filter_map(|r| r.message.as_deref())
            .collect();
        assert_eq!(
            spec_messages,
            vec![cel::BOTH_TUNNEL_SOURCES, cel::NO_TUNNEL_SOURCE]
        );
    }

    #[test]
    fn v1alpha1_has_no_schema_defaults_for_size_and_image() {
        let crd = tunnel(&ConversionService::default());
        let spec = field(&crd, "v1alpha1", "spec");
        let props = spec.properties.as_ref().expect("spec properties");
        assert!(props["size"].default.is_none());
        assert!(props["image"].default.is_none());
        assert!(!props.contains_key("deployPatch"));
        let v2 = field(&crd, "v1alpha2", "spec");
        assert_eq!(
            v2.properties.as_ref().expect("v2 spec")["deployPatch"]
                .default
                .as_ref()
                .map(|d| &d.0),
            Some(&serde_json::json!("{}"))
        );
    }

    #[test]
    fn conditions_are_a_list_map_keyed_by_type() {
        let crd = tunnel(&ConversionService::default());
        let status = field(&crd, "v1alpha2", "status");
        let conditions = &status.properties.as_ref().expect("status properties")["conditions"];
        assert_eq!(conditions.x_kubernetes_list_type.as_deref(), Some("map"));
        assert_eq!(
            conditions.x_kubernetes_list_map_keys.as_deref(),
            Some(&["type".to_string()][..])
        );
        assert!(status.required.is_none(), "every status field is optional");
    }

    #[test]
    fn binding_fields_sit_at_the_top_level() {
        let crd = tunnel_binding();
        let root = version(&crd, "v1alpha1");
        let props = root.properties.as_ref().expect("properties");
        assert!(props.contains_key("subjects") && props.contains_key("tunnelRef"));
        assert!(!props.contains_key("spec"));
    }
}
