//! The part of Gateway API v1 (`gateway.networking.k8s.io`, standard channel) cftunnel reads and
//! writes: GatewayClass, Gateway, HTTPRoute, GRPCRoute, TCPRoute, UDPRoute and ReferenceGrant.
//!
//! These CRDs belong to the user (or to the chart, when asked); cftunnel generates none of them,
//! so the types carry no schema. Fields cftunnel does not act on are kept as raw JSON where it
//! must still see that they are set (filters, header matches): a route using them is refused on
//! its status, never served with the field silently dropped.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The API group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// On a Gateway of cftunnel's: the VirtualNetwork (by name) its TCPRoutes' and UDPRoutes'
/// private IP routes go in. Left out: the account's default network.
pub const ANNOTATION_VIRTUAL_NETWORK: &str = "cfargotunnel.com/virtual-network";

/// A reference from a class or Gateway to its parameters (here: a Tunnel or ClusterTunnel).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ParametersReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    /// For a namespaced kind on a GatewayClass; a Gateway's reference is to its own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "GatewayClass",
    status = "GatewayClassStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    pub controller_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<ParametersReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_features: Vec<SupportedFeature>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SupportedFeature {
    pub name: String,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "Gateway",
    namespaced,
    status = "GatewayStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<GatewayInfrastructure>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayInfrastructure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<ParametersReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: i32,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayStatusAddress>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatusAddress {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

/// Where a route attaches: a Gateway (and one of its listeners).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A route's backend: a Service (by default) and its port.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Backend-level filters: kept to be refused (cloudflared applies none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
}

/// The status of a route: one entry per parent this controller handles.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    #[serde(default)]
    pub parents: Vec<RouteParentStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "HTTPRoute",
    namespaced,
    status = "RouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HTTPRouteRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteRule {
    /// Empty: one match of every path (`PathPrefix /`), as the schema defaults it.
    #[serde(default)]
    pub matches: Vec<HTTPRouteMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HTTPPathMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HTTPPathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Default `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "GRPCRoute",
    namespaced,
    status = "RouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GRPCRouteRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteRule {
    #[serde(default)]
    pub matches: Vec<GRPCRouteMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<GRPCMethodMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct GRPCMethodMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// A TCPRoute: connections to its backends. Standard channel since v1.6, served at `v1` (the
/// CRD keeps `v1alpha2` unserved). cftunnel makes no ingress rule of it: its backends become
/// private routes of the Gateway's tunnel.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "TCPRoute",
    namespaced,
    status = "RouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct TCPRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    /// One rule (the CRD allows no more).
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
}

/// A UDPRoute: datagrams to its backends; as a TCPRoute otherwise.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "UDPRoute",
    namespaced,
    status = "RouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct UDPRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
}

/// A rule of a TCPRoute or UDPRoute (TCPRouteRule and UDPRouteRule have the same fields): its
/// backends, Services with their ports (a backend here has no filters).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct L4RouteRule {
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "ReferenceGrant",
    namespaced,
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<ReferenceGrantFrom>,
    #[serde(default)]
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantFrom {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantTo {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    /// The Gateway API CRDs the chart ships (`scripts/gateway-api-crds.sh`).
    const SHIPPED_CRDS: &str = include_str!("../../../charts/cftunnel/files/gateway-api-crds.yaml");

    /// The versions a shipped CRD of `kind` serves.
    fn served(kind: &str) -> Vec<String> {
        let mut out = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_str(SHIPPED_CRDS) {
            let crd = serde_json::Value::deserialize(document).unwrap_or_default();
            if crd["spec"]["names"]["kind"] != kind {
                continue;
            }
            for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
                if version["served"] == true {
                    out.push(version["name"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        out
    }

    #[test]
    fn every_kind_is_read_at_a_version_the_shipped_crds_serve() {
        let kinds = [
            (GatewayClass::kind(&()), GatewayClass::version(&())),
            (Gateway::kind(&()), Gateway::version(&())),
            (HTTPRoute::kind(&()), HTTPRoute::version(&())),
            (GRPCRoute::kind(&()), GRPCRoute::version(&())),
            (TCPRoute::kind(&()), TCPRoute::version(&())),
            (UDPRoute::kind(&()), UDPRoute::version(&())),
            (ReferenceGrant::kind(&()), ReferenceGrant::version(&())),
        ];
        for (kind, version) in kinds {
            let served = served(&kind);
            assert!(
                served.contains(&version.to_string()),
                "{kind} is read at {version}; the shipped CRD serves {served:?}"
            );
        }
    }

    #[test]
    fn a_tcp_route_keeps_its_parents_listener_and_port_and_its_backends() {
        let route: TCPRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {
                "parentRefs": [{"name": "private", "sectionName": "postgres", "port": 5432}],
                "rules": [{"name": "all", "backendRefs": [
                    {"name": "postgres", "namespace": "data", "port": 5432, "weight": 1}]}],
            },
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let parent = &route.spec.parent_refs[0];
        assert_eq!(
            (parent.section_name.as_deref(), parent.port),
            (Some("postgres"), Some(5432))
        );
        let backend = &route.spec.rules[0].backend_refs[0];
        assert_eq!(
            (
                backend.name.as_str(),
                backend.namespace.as_deref(),
                backend.port
            ),
            ("postgres", Some("data"), Some(5432))
        );
        let udp: UDPRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
            "metadata": {"name": "dns", "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "private"}],
                     "rules": [{"backendRefs": [{"name": "coredns", "port": 53}]}]},
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(udp.spec.rules[0].backend_refs[0].port, Some(53));
    }
}
