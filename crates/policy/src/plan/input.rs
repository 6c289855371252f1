//! What [`super::plan`] reads: the world and the facts cftunnel learned about it.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::dns::{AccountZone, ClusterId};
use crate::routes::RouteWorld;
use crate::routes::gateway::status::DnsNote;
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::{TunnelIdentity, TunnelSpec};

/// One Tunnel or ClusterTunnel as the plan renders it: its spec and what its status records.
#[derive(Clone, Debug)]
pub struct PlanTunnel {
    pub identity: TunnelIdentity,
    /// The v1alpha2 spec (v1alpha1 objects converted first).
    pub spec: TunnelSpec,
    /// `status.tunnelId`: without one a tunnel has no DNS records and no Ingress address.
    pub tunnel_id: Option<String>,
    /// `status.tunnelName` (the `_managed` TXT names it).
    pub tunnel_name: String,
    /// `status.previousTunnelIds`: records pointing at them are still ours.
    pub previous_tunnel_ids: Vec<String>,
}

/// Everything the plan is computed from. Equal inputs give equal plans.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// The objects routes are computed from (`world.tunnels` are the facts of `tunnels`).
    pub world: RouteWorld,
    /// Every AccessPolicy, with its status (which records the applications that open
    /// hostnames).
    pub access_policies: Vec<Arc<AccessPolicy>>,
    /// The tunnels to render, with their specs and recorded ids.
    pub tunnels: Vec<PlanTunnel>,
    /// The zones of the Cloudflare account, as its zone list names them. A tunnel's own zone
    /// (`spec.cloudflare.domain`) counts even when the list leaves it out.
    pub zones: Vec<AccountZone>,
    /// What the DNS sync found, per tunnel (conflicts, errors, full zones).
    pub dns_notes: BTreeMap<TunnelIdentity, Vec<DnsNote>>,
    /// This cluster's identity: DNS markers and Access names carry it.
    pub cluster_id: ClusterId,
    /// Write the `_managed` TXT records (`--no-dns-txt-records` turns them off).
    pub txt_records: bool,
    /// The time a condition that changes now records.
    pub now: Time,
}
