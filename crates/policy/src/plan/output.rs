//! What [`super::plan`] returns. Every map is keyed by a name as messages write it (`Tunnel
//! shop/edge`, `shop/web`, a zone's name), so the serialized plan is in a fixed order.
use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::IngressLoadBalancerStatus;
use serde::Serialize;

use crate::routes::OriginRequest;
use cftunnel_cloudflare::NewAccessPolicy;
use cftunnel_types::gateway::{GatewayClassStatus, GatewayStatus, RouteParentStatus};
use cftunnel_types::{RouteStatus, TunnelBindingStatus};

/// Everything cftunnel does for one world and its facts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Per tunnel (`Tunnel ns/name`, `ClusterTunnel name`): what it renders.
    pub tunnels: BTreeMap<String, TunnelPlan>,
    /// Per zone name: the records wanted there.
    pub dns: BTreeMap<String, ZonePlan>,
    pub access: AccessPlan,
    pub statuses: Statuses,
}

/// One tunnel's rendered ingress and its Access protection.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TunnelPlan {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_id: Option<String>,
    /// The tunnel-wide `originRequest` of config.yaml.
    #[serde(skip_serializing_if = "OriginRequest::is_empty")]
    pub origin_request: OriginRequest,
    /// config.yaml's `ingress` (and the remote configuration's), catch-all last.
    pub ingress: Vec<IngressRulePlan>,
    /// Why the tunnel cannot be rendered (its `Ready` says so); `ingress` is then empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render_error: Option<String>,
    /// Per protected hostname it serves: `closed` (503, and why) or `open` (team, AUD).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub protection: BTreeMap<String, ProtectionPlan>,
}

/// One ingress rule of config.yaml.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressRulePlan {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub service: String,
    #[serde(skip_serializing_if = "OriginRequest::is_empty")]
    pub origin_request: OriginRequest,
}

/// How Access stands for one hostname a tunnel serves.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum ProtectionPlan {
    Closed { why: String },
    Open { team: String, aud: String },
}

/// The records wanted in one zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonePlan {
    pub zone_id: String,
    /// The records to create in an empty zone, per hostname CNAME then TXT.
    pub records: Vec<RecordPlan>,
    /// Routed hostnames that get no new record: closed by an AccessPolicy until their
    /// application exists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

/// One record wanted.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordPlan {
    pub tunnel: String,
    #[serde(rename = "type")]
    pub record_type: String,
    pub name: String,
    /// A TXT's `DnsId` is the CNAME's record id, known once it exists (`<new CNAME id>`).
    pub content: String,
    pub comment: String,
}

/// What cftunnel wants at Cloudflare Access, and the targets it refuses.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessPlan {
    /// Per AccessPolicy (`ns/name`): its reusable policies.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reusable_policies: BTreeMap<String, Vec<NewAccessPolicy>>,
    /// Per protected hostname: its application.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub applications: BTreeMap<String, ApplicationPlan>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusalPlan>,
}

/// The self-hosted application of one protected hostname.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPlan {
    pub name: String,
    pub policy: String,
    /// The target the hostname is protected through (`Kind name`) and the source serving it.
    pub target: String,
    pub source: String,
    /// Every tunnel serving it: each must apply it closed before the application is made.
    pub tunnels: Vec<String>,
    /// The policies linked, in order, by name: cftunnel's reusable ones, then `spec.policies`.
    pub policies: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_duration: Option<String>,
    /// Recorded in the policy's status (the hostname is open), or not yet (closed).
    pub recorded: bool,
}

/// A target an AccessPolicy names that it does not protect.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusalPlan {
    pub policy: String,
    pub target: String,
    pub reason: String,
    pub message: String,
}

/// Every status to write.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Statuses {
    /// Each source's outcome (`Kind ns/name`), the route model's word with the DNS notes of the
    /// hostnames it serves: a binding's `Ready`, a labelled Service's or Ingress's Event.
    pub sources: BTreeMap<String, SourcePlan>,
    /// Per TunnelBinding (`ns/name`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub bindings: BTreeMap<String, BindingPlan>,
    /// Per Ingress of cftunnel's classes (`ns/name`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ingresses: BTreeMap<String, IngressLoadBalancerStatus>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gateway_classes: BTreeMap<String, GatewayClassStatus>,
    /// Per Gateway (`ns/name`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gateways: BTreeMap<String, GatewayStatus>,
    /// Per HTTPRoute or GRPCRoute (`Kind ns/name`): cftunnel's entries of `status.parents`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub route_parents: BTreeMap<String, Vec<RouteParentStatus>>,
    /// Per tunnel: `status.routes`.
    pub tunnel_routes: BTreeMap<String, Vec<RouteStatus>>,
}

/// What one source is told.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourcePlan {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// `True` or `False` (a Normal or a Warning Event).
    pub ready: String,
    pub reason: String,
    pub message: String,
}

/// What a binding gets: its status, and the labels it lacks.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingPlan {
    pub status: TunnelBindingStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<serde_json::Map<String, serde_json::Value>>,
}
