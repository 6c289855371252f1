//! The CustomResourceDefinitions as installed: versions merged, CEL rules and conversion added.
//! `cftunnel crds` prints them; `manifests/crds.yaml` is their checked-in output.
pub mod helm;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
    JSONSchemaProps, JSONSchemaPropsOrArray, ServiceReference, ValidationRule, WebhookClientConfig,
    WebhookConversion,
};
use kube::core::crd::{CustomResourceExt, merge_crds};

use super::access_policy::AccessPolicy;
use super::access_tunnel::AccessTunnel;
use super::binding::TunnelBinding;
use super::cel::{self, CelRule};
use super::network::{NetworkRoute, VirtualNetwork};
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
        access_policy(),
        virtual_network(),
        network_route(),
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

/// VirtualNetwork v1alpha2 (cluster-scoped), with its one cheap rule as CEL: exactly one of
/// `name` and `existing`.
pub(crate) fn virtual_network() -> CustomResourceDefinition {
    let mut crd = VirtualNetwork::crd();
    for version in &mut crd.spec.versions {
        let Some(spec) = schema_of(version)
            .and_then(|root| root.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
        else {
            continue;
        };
        spec.x_kubernetes_validations = Some(vec![ValidationRule {
            rule: "has(self.name) != has(self.existing)".into(),
            message: Some(
                "set exactly one of spec.name (a network cftunnel creates) and spec.existing (one it adopts)".into(),
            ),
            ..Default::default()
        }]);
    }
    crd
}

/// NetworkRoute v1alpha2; its rules (CIDRs, hostnames, claims) are the webhook's.
pub(crate) fn network_route() -> CustomResourceDefinition {
    NetworkRoute::crd()
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

/// AccessPolicy v1alpha2, with the cheap rules as CEL (their messages the webhook's texts): a
/// target's group matches its kind, and the policy lets someone in. The rest (same namespace,
/// names, emails, durations) is the webhook's: CEL cannot see the object's namespace.
pub(crate) fn access_policy() -> CustomResourceDefinition {
    let mut crd = AccessPolicy::crd();
    for version in &mut crd.spec.versions {
        let Some(spec) = schema_of(version)
            .and_then(|root| root.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
        else {
            continue;
        };
        spec.x_kubernetes_validations = Some(vec![ValidationRule {
            rule: cel::access_policy_spec_rule(),
            message: Some(cel::ACCESS_POLICY_NOBODY_ALLOWED.into()),
            ..Default::default()
        }]);
        let item = spec
            .properties
            .as_mut()
            .and_then(|p| p.get_mut("targetRefs"))
            .and_then(|t| t.items.as_mut());
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = item {
            item.x_kubernetes_validations = Some(vec![ValidationRule {
                rule: cel::access_policy_target_rule(),
                message: Some(cel::ACCESS_POLICY_TARGET_KIND.into()),
                ..Default::default()
            }]);
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

    #[test]
    fn access_policy_is_namespaced_v1alpha2_with_bounded_targets_and_its_cel_rules() {
        let crd = access_policy();
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.kind, "AccessPolicy");
        let spec = field(&crd, "v1alpha2", "spec");
        let rules: Vec<_> = spec.x_kubernetes_validations.iter().flatten().collect();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].message.as_deref(),
            Some(cel::ACCESS_POLICY_NOBODY_ALLOWED)
        );
        let props = spec.properties.as_ref().expect("spec properties");
        let targets = &props["targetRefs"];
        assert_eq!((targets.min_items, targets.max_items), (Some(1), Some(16)));
        let Some(JSONSchemaPropsOrArray::Schema(item)) = targets.items.as_ref() else {
            panic!("targetRefs items");
        };
        let item_props = item.properties.as_ref().expect("targetRef properties");
        assert!(
            item_props.contains_key("namespace"),
            "accepted to be refused"
        );
        let kinds = item_props["kind"].enum_.as_ref().expect("kind enum");
        assert_eq!(kinds.len(), 5);
        assert_eq!(
            item.x_kubernetes_validations.iter().flatten().count(),
            1,
            "the group/kind pair rule"
        );
        assert_eq!(
            spec.required.as_deref(),
            Some(&["targetRefs".to_string()][..])
        );
    }

    /// Every string of the AccessPolicy schema a CEL rule could read is bounded.
    #[test]
    fn every_access_policy_string_has_a_length_bound() {
        fn walk(path: &str, schema: &JSONSchemaProps, unbounded: &mut Vec<String>) {
            if schema.type_.as_deref() == Some("string")
                && schema.max_length.is_none()
                && schema.format.as_deref() != Some("date-time")
            {
                unbounded.push(path.to_string());
            }
            for (name, child) in schema.properties.iter().flatten() {
                walk(&format!("{path}.{name}"), child, unbounded);
            }
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = schema.items.as_ref() {
                walk(&format!("{path}[]"), item, unbounded);
            }
        }
        let crd = access_policy();
        let mut unbounded = Vec::new();
        walk("spec", field(&crd, "v1alpha2", "spec"), &mut unbounded);
        assert!(unbounded.is_empty(), "unbounded strings: {unbounded:?}");
    }
}
