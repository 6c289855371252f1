//! What cftunnel keeps of a core/v1 Service: its metadata, its ports and its cluster IPs
//! (NetworkRoutes route them), nothing else.
//!
//! Watches decode Services straight into [`ServicePorts`]: the rest of the object (selector,
//! cluster IPs, status, …) is skipped while decoding, never allocated. A `k8s_openapi`
//! `Service` is 824 bytes before any of its strings (on 64-bit targets), most of it fields no
//! route reads; this is 408 (the metadata is most of it), and a cluster has a Service per route
//! or more.
use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::{Deserialize, Serialize};

/// A Service as routes read it: identity, labels and annotations, ports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ServicePorts {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PortsSpec,
}

/// The part of a Service's spec that is kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PortsSpec {
    #[serde(default)]
    pub ports: Vec<Port>,
    /// `spec.clusterIPs`; a headless Service's is `None`, which is no address.
    #[serde(rename = "clusterIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_ips: Vec<String>,
}

/// A Service port: the fields of `ServicePort` that choose a port and its protocol.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub port: i32,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

impl ServicePorts {
    /// The Service's ports, in order.
    pub fn ports(&self) -> &[Port] {
        &self.spec.ports
    }

    /// The Service's cluster IPs that are addresses (not `None`, as a headless Service says).
    pub fn cluster_ips(&self) -> impl Iterator<Item = &str> {
        self.spec
            .cluster_ips
            .iter()
            .map(String::as_str)
            .filter(|ip| !ip.eq_ignore_ascii_case("none") && !ip.is_empty())
    }
}

impl From<&ServicePort> for Port {
    fn from(port: &ServicePort) -> Port {
        Port {
            name: port.name.clone(),
            port: port.port,
            protocol: port.protocol.clone(),
            app_protocol: port.app_protocol.clone(),
        }
    }
}

impl From<Service> for ServicePorts {
    fn from(service: Service) -> ServicePorts {
        let spec = service.spec.unwrap_or_default();
        let ports = spec
            .ports
            .unwrap_or_default()
            .iter()
            .map(Port::from)
            .collect();
        ServicePorts {
            metadata: service.metadata,
            spec: PortsSpec {
                ports,
                cluster_ips: spec.cluster_ips.unwrap_or_default(),
            },
        }
    }
}

impl kube::Resource for ServicePorts {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Service")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("services")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn a_service_decodes_to_its_metadata_and_ports_only() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {
                "selector": {"app": "web"}, "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "type": "ClusterIP",
                "ports": [
                    {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                    {"name": "dns", "port": 53, "protocol": "UDP", "appProtocol": "dns"}
                ]
            },
            "status": {"loadBalancer": {}}
        });
        let decoded: ServicePorts =
            serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}"));
        let full: Service = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decoded, ServicePorts::from(full));
        assert_eq!(decoded.metadata.name.as_deref(), Some("web"));
        assert_eq!(decoded.cluster_ips().collect::<Vec<_>>(), ["10.0.0.1"]);
        assert_eq!(
            decoded.ports(),
            [
                Port {
                    name: Some("http".into()),
                    port: 80,
                    protocol: Some("TCP".into()),
                    app_protocol: None,
                },
                Port {
                    name: Some("dns".into()),
                    port: 53,
                    protocol: Some("UDP".into()),
                    app_protocol: Some("dns".into()),
                },
            ]
        );
        let headless: ServicePorts = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db"}, "spec": {"clusterIP": "None"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(headless.ports().is_empty());
        assert!(std::mem::size_of::<ServicePorts>() * 2 < std::mem::size_of::<Service>());
    }

    #[test]
    fn it_is_watched_as_core_v1_services() {
        assert_eq!(ServicePorts::api_version(&()), "v1");
        assert_eq!(ServicePorts::kind(&()), "Service");
        assert_eq!(
            ServicePorts::url_path(&(), Some("shop")),
            "/api/v1/namespaces/shop/services"
        );
    }
}
