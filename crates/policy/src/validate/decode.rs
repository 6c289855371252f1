//! From raw documents to typed objects, with the defaulting the API server applies (serde
//! defaults mirror the schema defaults) and v1alpha1 tunnels converted to v1alpha2 first.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::input::Document;
use super::report::ObjectRef;
use crate::rules::Violation;
use cftunnel_types::TunnelKind;
use cftunnel_types::access_policy::AccessPolicySpec;
use cftunnel_types::access_tunnel::AccessTunnelFields;
use cftunnel_types::binding::{TunnelBindingFields, TunnelBindingSubject, TunnelRef};
use cftunnel_types::conversion::{self, V1ALPHA1, V1ALPHA2};
use cftunnel_types::gateway::{
    GATEWAY_GROUP, GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant,
};
use cftunnel_types::names::{LABEL_EXPOSE_CLUSTER_TUNNEL, LABEL_EXPOSE_TUNNEL};
use cftunnel_types::{
    NetworkRoute, NetworkRouteSpec, TunnelBinding, TunnelSpec, TunnelStatus, VirtualNetwork,
    VirtualNetworkSpec,
};

/// The label the API server puts on every Namespace, which selectors commonly use.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A Tunnel or ClusterTunnel as the v1alpha2 rules see it (both kinds share the spec's shape).
#[derive(Clone, Debug)]
pub struct TunnelObject {
    pub kind: TunnelKind,
    /// Empty for a ClusterTunnel.
    pub namespace: String,
    pub name: String,
    pub spec: TunnelSpec,
    pub status: Option<TunnelStatus>,
}

/// An input object the command judges or learns from.
#[derive(Clone, Debug)]
pub enum Decoded {
    Tunnel(TunnelObject),
    Binding {
        namespace: String,
        binding: TunnelBinding,
    },
    /// A Service carrying at least one expose label.
    Service {
        namespace: String,
        service: Service,
    },
    /// An AccessTunnel: judged on its own fields only.
    Access(AccessTunnelFields),
    /// An AccessPolicy: judged on its spec and namespace only.
    AccessPolicy {
        namespace: String,
        name: String,
        spec: AccessPolicySpec,
    },
    /// A NetworkRoute: judged on its spec and against the NetworkRoutes before it.
    NetworkRoute {
        namespace: String,
        route: NetworkRoute,
    },
    /// A VirtualNetwork: judged on its spec and against the VirtualNetworks before it.
    VirtualNetwork(VirtualNetwork),
    /// An Ingress (a route source when its class is cftunnel's).
    Ingress {
        namespace: String,
        ingress: Ingress,
    },
    /// An IngressClass: whose Ingresses are whose, and their tunnel.
    IngressClass(IngressClass),
    /// A Gateway API object (`gateway.networking.k8s.io/v1`).
    Gateway(GatewayObject),
    /// Labels for `allowedRoutes` selectors.
    Namespace {
        name: String,
        labels: BTreeMap<String, String>,
    },
}

/// The Gateway API kinds the route model reads.
#[derive(Clone, Debug)]
pub enum GatewayObject {
    Class(GatewayClass),
    Gateway(Gateway),
    HTTPRoute(HTTPRoute),
    GRPCRoute(GRPCRoute),
    ReferenceGrant(ReferenceGrant),
}

/// What became of one document.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Not an object the admission rules look at (Deployments, plain Services, …).
    Ignored,
    Decoded(ObjectRef, Box<Decoded>),
    /// One of our objects that cannot be read as its schema says.
    Unreadable(ObjectRef, Violation),
}

/// The required fields of an AccessTunnel, named as the API server names them (`Required
/// value`), with what to give.
fn access_required(value: &Value) -> Result<(), Violation> {
    let Some(target) = value.get("target").filter(|t| t.is_object()) else {
        return Err(Violation::new(
            "target",
            "Required value; give target.fqdn, the hostname of the Access application",
        ));
    };
    if target.get("fqdn").is_none_or(Value::is_null) {
        return Err(Violation::new(
            "target.fqdn",
            "Required value; give the hostname of the Access application, e.g. ssh.example.com",
        ));
    }
    Ok(())
}

/// The spec of an AccessPolicy; its required fields named as the API server names them.
fn access_policy(value: &Value) -> Result<AccessPolicySpec, Violation> {
    let Some(spec) = value.get("spec").filter(|s| s.is_object()) else {
        return Err(Violation::new(
            "spec",
            "Required value; give spec.targetRefs and who may enter in spec.allow or spec.policies",
        ));
    };
    if spec.get("targetRefs").is_none_or(Value::is_null) {
        return Err(Violation::new(
            "spec.targetRefs",
            "Required value; name the TunnelBinding, HTTPRoute, Ingress or Service to protect",
        ));
    }
    AccessPolicySpec::deserialize(spec).map_err(|e| {
        Violation::new(
            "spec",
            format!("does not match the AccessPolicy v1alpha2 schema ({e}); fix the manifest"),
        )
    })
}

/// Decodes one document; `default_namespace` stands in for a missing `metadata.namespace`.
pub fn decode(document: &Document, default_namespace: &str) -> Outcome {
    let value = &document.value;
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(default_namespace)
        .to_string();
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
    let result = match (group, kind) {
        (cftunnel_types::names::GROUP, "Tunnel") => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            tunnel(value, TunnelKind::Tunnel, &namespace).map(|t| (object, Decoded::Tunnel(t)))
        }
        (cftunnel_types::names::GROUP, "ClusterTunnel") => {
            let object = ObjectRef::cluster(kind, &name);
            tunnel(value, TunnelKind::ClusterTunnel, "").map(|t| (object, Decoded::Tunnel(t)))
        }
        (cftunnel_types::names::GROUP, "TunnelBinding") => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            binding(value, api_version).map(|binding| {
                (
                    object,
                    Decoded::Binding {
                        namespace: namespace.clone(),
                        binding,
                    },
                )
            })
        }
        (cftunnel_types::names::GROUP, "AccessTunnel") => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            access_required(value)
                .and_then(|()| {
                    serde_json::from_value::<AccessTunnelFields>(value.clone()).map_err(|e| {
                        Violation::new(
                            "object",
                            format!("does not match the AccessTunnel v1alpha1 schema ({e}); fix the manifest"),
                        )
                    })
                })
                .map(|fields| (object, Decoded::Access(fields)))
        }
        (cftunnel_types::names::GROUP, "AccessPolicy") => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            access_policy(value).map(|spec| {
                (
                    object,
                    Decoded::AccessPolicy {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        spec,
                    },
                )
            })
        }
        (cftunnel_types::names::GROUP, "NetworkRoute") => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            network_route(value, api_version, &namespace).map(|route| {
                (
                    object,
                    Decoded::NetworkRoute {
                        namespace: namespace.clone(),
                        route,
                    },
                )
            })
        }
        (cftunnel_types::names::GROUP, "VirtualNetwork") => {
            let object = ObjectRef::cluster(kind, &name);
            virtual_network(value, api_version)
                .map(|network| (object, Decoded::VirtualNetwork(network)))
        }
        ("", "Service") if api_version == "v1" && has_expose_label(value) => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            service(value).map(|service| {
                (
                    object,
                    Decoded::Service {
                        namespace: namespace.clone(),
                        service,
                    },
                )
            })
        }
        ("networking.k8s.io", "Ingress") if api_version == "networking.k8s.io/v1" => {
            let object = ObjectRef::namespaced(kind, &namespace, &name);
            let schema = "Ingress networking.k8s.io/v1";
            metadata(value, schema)
                .and_then(|mut metadata| {
                    metadata.namespace = Some(namespace.clone());
                    Ok(Ingress {
                        metadata,
                        spec: part(value, "spec", schema)?,
                        status: None,
                    })
                })
                .map(|ingress| {
                    (
                        object,
                        Decoded::Ingress {
                            namespace: namespace.clone(),
                            ingress,
                        },
                    )
                })
        }
        ("networking.k8s.io", "IngressClass") if api_version == "networking.k8s.io/v1" => {
            let object = ObjectRef::cluster(kind, &name);
            let schema = "IngressClass networking.k8s.io/v1";
            metadata(value, schema)
                .and_then(|metadata| {
                    Ok(IngressClass {
                        metadata,
                        spec: part(value, "spec", schema)?,
                    })
                })
                .map(|class| (object, Decoded::IngressClass(class)))
        }
        (GATEWAY_GROUP, _) if api_version == "gateway.networking.k8s.io/v1" => {
            let object = if kind == "GatewayClass" {
                ObjectRef::cluster(kind, &name)
            } else {
                ObjectRef::namespaced(kind, &namespace, &name)
            };
            let mut value = value.clone();
            if kind != "GatewayClass" {
                value["metadata"]["namespace"] = Value::String(namespace.clone());
            }
            let schema = format!("{kind} gateway.networking.k8s.io/v1");
            let decoded = match kind {
                "GatewayClass" => gateway_part(&value, &schema).map(GatewayObject::Class),
                "Gateway" => gateway_part(&value, &schema).map(GatewayObject::Gateway),
                "HTTPRoute" => gateway_part(&value, &schema).map(GatewayObject::HTTPRoute),
                "GRPCRoute" => gateway_part(&value, &schema).map(GatewayObject::GRPCRoute),
                "ReferenceGrant" => {
                    gateway_part(&value, &schema).map(GatewayObject::ReferenceGrant)
                }
                _ => return Outcome::Ignored,
            };
            decoded.map(|g| (object, Decoded::Gateway(g)))
        }
        ("", "Namespace") if api_version == "v1" => {
            let mut labels: BTreeMap<String, String> = part(value, "metadata.labels", "Namespace")
                .ok()
                .flatten()
                .unwrap_or_default();
            labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
            let object = ObjectRef::cluster(kind, &name);
            Ok((
                object,
                Decoded::Namespace {
                    name: name.clone(),
                    labels,
                },
            ))
        }
        _ => return Outcome::Ignored,
    };
    match result {
        Ok((object, decoded)) => Outcome::Decoded(object, Box::new(decoded)),
        Err(violation) => {
            let object = match kind {
                "ClusterTunnel" | "VirtualNetwork" | "Namespace" | "IngressClass"
                | "GatewayClass" => ObjectRef::cluster(kind, &name),
                _ => ObjectRef::namespaced(kind, &namespace, &name),
            };
            Outcome::Unreadable(object, violation)
        }
    }
}

/// A Service without expose labels, which the rules ignore but `cftunnel render` routes binding
/// subjects to: `None` when the document is not a `v1` Service.
pub fn plain_service(
    document: &Document,
    default_namespace: &str,
) -> Option<Result<Service, Violation>> {
    let value = &document.value;
    let is_service = value.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && value.get("kind").and_then(Value::as_str) == Some("Service");
    if !is_service {
        return None;
    }
    Some(service(value).map(|mut svc| {
        if svc.metadata.namespace.as_deref().is_none_or(str::is_empty) {
            svc.metadata.namespace = Some(default_namespace.to_string());
        }
        svc
    }))
}

/// A Gateway API object as its own type; a name is required, as the API server requires it.
fn gateway_part<T: DeserializeOwned>(value: &Value, schema: &str) -> Result<T, Violation> {
    metadata(value, schema)?;
    serde_json::from_value(value.clone()).map_err(|e| {
        Violation::new(
            "object",
            format!("does not match the {schema} schema ({e}); fix the manifest"),
        )
    })
}

fn has_expose_label(value: &Value) -> bool {
    [LABEL_EXPOSE_TUNNEL, LABEL_EXPOSE_CLUSTER_TUNNEL]
        .iter()
        .any(|label| {
            value
                .pointer("/metadata/labels")
                .and_then(|l| l.get(label))
                .is_some()
        })
}

fn tunnel(value: &Value, kind: TunnelKind, namespace: &str) -> Result<TunnelObject, Violation> {
    let schema = format!("{} v1alpha2", kind.as_str());
    let converted = conversion::convert(value.clone(), V1ALPHA2)
        .map_err(|e| Violation::new("apiVersion", format!("{e}; use {V1ALPHA2}")))?;
    let metadata = metadata(&converted, &schema)?;
    let spec: TunnelSpec =
        part(&converted, "spec", &schema)?.ok_or_else(|| required("spec", &schema))?;
    let status: Option<TunnelStatus> = part(&converted, "status", &schema)?;
    Ok(TunnelObject {
        kind,
        namespace: namespace.to_string(),
        name: metadata.name.unwrap_or_default(),
        spec,
        status,
    })
}

fn binding(value: &Value, api_version: &str) -> Result<TunnelBinding, Violation> {
    if api_version != V1ALPHA1 {
        return Err(Violation::new(
            "apiVersion",
            format!("{api_version:?} is not served for TunnelBinding; use {V1ALPHA1}"),
        ));
    }
    let schema = "TunnelBinding v1alpha1";
    let metadata = metadata(value, schema)?;
    let subjects: Vec<TunnelBindingSubject> =
        part(value, "subjects", schema)?.ok_or_else(|| required("subjects", schema))?;
    let tunnel_ref: TunnelRef =
        part(value, "tunnelRef", schema)?.ok_or_else(|| required("tunnelRef", schema))?;
    let name = metadata.name.clone().unwrap_or_default();
    let mut binding = TunnelBinding::new(
        &name,
        TunnelBindingFields {
            subjects,
            tunnel_ref,
        },
    );
    binding.metadata = metadata;
    Ok(binding)
}

/// The private-network kinds are served in v1alpha2 only.
fn private_version(kind: &str, api_version: &str) -> Result<(), Violation> {
    if api_version == V1ALPHA2 {
        return Ok(());
    }
    Err(Violation::new(
        "apiVersion",
        format!("{api_version:?} is not served for {kind}; use {V1ALPHA2}"),
    ))
}

fn network_route(
    value: &Value,
    api_version: &str,
    namespace: &str,
) -> Result<NetworkRoute, Violation> {
    private_version("NetworkRoute", api_version)?;
    let schema = "NetworkRoute v1alpha2";
    let mut metadata = metadata(value, schema)?;
    metadata.namespace = Some(namespace.to_string());
    let spec: NetworkRouteSpec =
        part(value, "spec", schema)?.ok_or_else(|| required("spec", schema))?;
    let mut route = NetworkRoute::new(metadata.name.as_deref().unwrap_or_default(), spec);
    route.metadata = metadata;
    Ok(route)
}

fn virtual_network(value: &Value, api_version: &str) -> Result<VirtualNetwork, Violation> {
    private_version("VirtualNetwork", api_version)?;
    let schema = "VirtualNetwork v1alpha2";
    let metadata = metadata(value, schema)?;
    let spec: VirtualNetworkSpec =
        part(value, "spec", schema)?.ok_or_else(|| required("spec", schema))?;
    let mut network = VirtualNetwork::new(metadata.name.as_deref().unwrap_or_default(), spec);
    network.metadata = metadata;
    Ok(network)
}

fn service(value: &Value) -> Result<Service, Violation> {
    let schema = "Service v1";
    Ok(Service {
        metadata: metadata(value, schema)?,
        spec: part(value, "spec", schema)?,
        status: None,
    })
}

/// The object's metadata; a missing name is refused as the API server would.
fn metadata(value: &Value, schema: &str) -> Result<ObjectMeta, Violation> {
    let metadata: ObjectMeta = part(value, "metadata", schema)?.unwrap_or_default();
    if metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(Violation::new(
            "metadata.name",
            "is required; give the object a name",
        ));
    }
    Ok(metadata)
}

/// Reads the field at `path` (dotted), `None` when absent or null; the error quotes serde.
fn part<T: DeserializeOwned>(
    value: &Value,
    path: &str,
    schema: &str,
) -> Result<Option<T>, Violation> {
    let pointer = format!("/{}", path.replace('.', "/"));
    match value.pointer(&pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(found) => serde_json::from_value(found.clone())
            .map(Some)
            .map_err(|e| {
                Violation::new(
                    path,
                    format!("does not match the {schema} schema ({e}); fix the manifest"),
                )
            }),
    }
}

fn required(path: &str, schema: &str) -> Violation {
    Violation::new(path, format!("is required by the {schema} schema; add it"))
}
