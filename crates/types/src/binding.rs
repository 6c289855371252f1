//! TunnelBinding v1alpha1: routes Services through a Tunnel or ClusterTunnel (docs/design.md §1.3).
//! Its fields sit at the top level of the object (no `spec`), as the Go operator defined it.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Routes one or more Services of this namespace through a tunnel.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "networking.cfargotunnel.com",
    version = "v1alpha1",
    kind = "TunnelBinding",
    namespaced,
    no_spec,
    status = "TunnelBindingStatus",
    derive = "PartialEq",
    doc = "Routes Services of its namespace through a Tunnel or ClusterTunnel.",
    printcolumn = r#"{"name":"FQDNs","type":"string","jsonPath":".status.hostnames"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TunnelBindingFields {
    /// The Services to expose (at least one).
    #[schemars(length(max = 100))]
    pub subjects: Vec<TunnelBindingSubject>,
    /// The tunnel that serves these routes.
    pub tunnel_ref: TunnelRef,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct TunnelBindingSubject {
    /// Kind of the subject; only `Service` is supported.
    #[serde(default = "crate::defaults::subject_kind")]
    pub kind: String,
    /// Name of a Service in the binding's namespace.
    pub name: String,
    /// How the Service is exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SubjectSpec>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubjectSpec {
    /// Public hostname. Default `<subject name>.<tunnel domain>` (computed, never written back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqdn: Option<String>,
    /// `http`, `https`, `tcp`, `udp`, `ssh`, `rdp` or `smb`. Default inferred from the Service port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Path regular expression this route matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// cloudflared service URL overriding the generated `<proto>://<svc>.<ns>.svc:<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Key of the tunnel's `originCaPool` Secret holding the CA for this origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pool: Option<String>,
    /// Skip TLS verification of this origin.
    #[serde(default)]
    pub no_tls_verify: bool,
    /// Speak HTTP/2 to the origin (TLS origins only).
    #[serde(default)]
    pub http2_origin: bool,
    /// Listen address of cloudflared's local proxy for non-HTTP protocols.
    #[serde(default = "crate::defaults::proxy_address")]
    pub proxy_address: String,
    /// Listen port of cloudflared's local proxy (0 = random).
    #[serde(default)]
    pub proxy_port: i64,
    /// `""` or `socks`.
    #[serde(default)]
    pub proxy_type: String,
    /// Service port, by name or number. Default: the Service's first port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<IntOrString>,
    /// Host header sent to the origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_host_header: Option<String>,
    /// Server name expected in the origin's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_server_name: Option<String>,
    /// Origin connect timeout, e.g. `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<String>,
    /// Origin TLS handshake timeout, e.g. `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_timeout: Option<String>,
    /// Idle keep-alive timeout of origin connections, e.g. `90s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive_timeout: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TunnelRef {
    /// `Tunnel` (in the binding's namespace) or `ClusterTunnel`; any case on input.
    pub kind: String,
    /// Name of the tunnel object.
    pub name: String,
    /// Leave DNS records alone for these routes.
    #[serde(default, rename = "disableDNSUpdates")]
    pub disable_dns_updates: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ServiceInfo {
    pub hostname: String,
    pub target: String,
}

/// Observed state of a TunnelBinding. Every field is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TunnelBindingStatus {
    /// Comma-joined hostnames served for this binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<ServiceInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
}
