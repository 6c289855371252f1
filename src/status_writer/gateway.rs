//! The statuses of Gateway API objects of cftunnel's classes, written by the status writer from the route model's
//! outcome ([`cftunnel_policy::routes::gateway::status`]): GatewayClass and Gateway status
//! whole (they are cftunnel's), a route's `status.parents` entries of cftunnel's controller
//! only (other controllers' entries are kept as they are), with the DNS sync's problems of the
//! hostnames each parent serves (`cfargotunnel.com/DNSRecords`). TCPRoutes and UDPRoutes come
//! from their own watches (`GatewayApi::l4_routes`): their parents, and the listeners they attach
//! to.
//! Each object is patched only when what it should carry differs from what it carries.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::facts::tunnel_ids;
use crate::dns_sync::{DnsView, TunnelRecord};
use crate::edge_health::EdgeView;
use crate::term::Context;
use cftunnel_policy::routes::gateway::status::{
    DnsNote, GatewayApiStatus, StatusInput, gateway_statuses_with_l4, merged_parents,
};
use cftunnel_policy::routes::gateway::{L4Kind, L4Routes};
use cftunnel_policy::routes::{RouteTable, RouteWorld, SourceKind};
use cftunnel_types::TunnelIdentity;
use cftunnel_types::gateway::{
    GRPCRoute, Gateway, GatewayClass, HTTPRoute, RouteParentStatus, RouteStatus,
};

/// The DNS sync's problems of every tunnel of the table, for the routes' parent statuses.
fn dns_notes(
    table: &RouteTable,
    dns: &DnsView,
    edge: &EdgeView,
) -> BTreeMap<TunnelIdentity, Vec<DnsNote>> {
    table
        .tunnels
        .keys()
        .filter_map(|tunnel| {
            let notes: Vec<DnsNote> = super::facts::notes(dns, edge, tunnel);
            (!notes.is_empty()).then(|| (tunnel.clone(), notes))
        })
        .collect()
}

/// The Gateway API statuses to write, with the objects they are written to: computed from a
/// snapshot of the world, which is then let go (the objects it held are replaced in the stores
/// as statuses are written, and a snapshot held through the writes would keep both versions).
pub(super) struct GatewayWrites {
    statuses: GatewayApiStatus,
    classes: Vec<Arc<GatewayClass>>,
    gateways: Vec<Arc<Gateway>>,
    http_routes: Vec<Arc<HTTPRoute>>,
    grpc_routes: Vec<Arc<GRPCRoute>>,
    l4: L4Routes,
}

/// Computes what [`write_gateway_status`] writes, taking the Gateway API objects out of `world`
/// (and the TCPRoutes and UDPRoutes `l4`); `None` when cftunnel has no GatewayClass.
pub(super) fn gateway_writes(
    world: &mut RouteWorld,
    l4: L4Routes,
    table: &RouteTable,
    records: &[TunnelRecord],
    dns: &DnsView,
    edge: &EdgeView,
) -> Option<GatewayWrites> {
    if world.gateway_classes.is_empty() {
        return None;
    }
    let ids = tunnel_ids(records);
    let statuses = gateway_statuses_with_l4(
        world,
        &l4,
        table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &dns_notes(table, dns, edge),
            now: Time(jiff::Timestamp::now()),
            changed_routes_only: true,
        },
    );
    Some(GatewayWrites {
        statuses,
        classes: std::mem::take(&mut world.gateway_classes),
        gateways: std::mem::take(&mut world.gateways),
        http_routes: std::mem::take(&mut world.http_routes),
        grpc_routes: std::mem::take(&mut world.grpc_routes),
        l4,
    })
}

/// Writes what differs; each object is let go once written. Returns how many writes failed.
pub(super) async fn write_gateway_status(ctx: &Context, writes: GatewayWrites) -> usize {
    let GatewayWrites {
        statuses,
        classes,
        gateways,
        http_routes,
        grpc_routes,
        l4,
    } = writes;
    let params = PatchParams::default();
    let mut failed = 0;
    for class in classes {
        let name = class.name_any();
        let Some(wanted) = statuses.classes.get(&name) else {
            continue;
        };
        if class.status.as_ref() != Some(wanted) {
            let api: Api<GatewayClass> = Api::all(ctx.client.clone());
            let patch = Patch::Merge(json!({"status": wanted}));
            let write = api.patch_status(&name, &params, &patch);
            if let Err(error) = super::bounded(ctx, "GatewayClass", write).await {
                failed += 1;
                tracing::warn!(gatewayclass = %name, %error, "GatewayClass status not written");
            }
        }
    }
    for gateway in gateways {
        let key = (gateway.namespace().unwrap_or_default(), gateway.name_any());
        let Some(wanted) = statuses.gateways.get(&key) else {
            continue;
        };
        if gateway.status.as_ref() != Some(wanted) {
            let api: Api<Gateway> = Api::namespaced(ctx.client.clone(), &key.0);
            let patch = Patch::Merge(json!({"status": wanted}));
            let write = api.patch_status(&key.1, &params, &patch);
            if let Err(error) = super::bounded(ctx, "Gateway", write).await {
                failed += 1;
                tracing::warn!(gateway = %format!("{}/{}", key.0, key.1), %error, "Gateway status not written");
            }
        }
    }
    let ours = |kind: SourceKind, route: &ObjectMeta| {
        let (namespace, name) = (route.namespace.clone(), route.name.clone());
        let key = (
            kind,
            namespace.unwrap_or_default(),
            name.unwrap_or_default(),
        );
        statuses.routes.get(&key)
    };
    for route in http_routes {
        let wanted = ours(SourceKind::HTTPRoute, &route.metadata);
        let status = route.status.as_ref();
        failed += write_parents(ctx, wanted, "HTTPRoute", route.as_ref(), status).await;
    }
    for route in grpc_routes {
        let wanted = ours(SourceKind::GRPCRoute, &route.metadata);
        let status = route.status.as_ref();
        failed += write_parents(ctx, wanted, "GRPCRoute", route.as_ref(), status).await;
    }
    let l4_ours = |kind: L4Kind, route: &ObjectMeta| {
        let (namespace, name) = (route.namespace.clone(), route.name.clone());
        let key = (
            kind,
            namespace.unwrap_or_default(),
            name.unwrap_or_default(),
        );
        statuses.l4_routes.get(&key)
    };
    for route in l4.tcp {
        let wanted = l4_ours(L4Kind::TCPRoute, &route.metadata);
        let status = route.status.as_ref();
        failed += write_parents(ctx, wanted, "TCPRoute", route.as_ref(), status).await;
    }
    for route in l4.udp {
        let wanted = l4_ours(L4Kind::UDPRoute, &route.metadata);
        let status = route.status.as_ref();
        failed += write_parents(ctx, wanted, "UDPRoute", route.as_ref(), status).await;
    }
    failed
}

/// Patches a route's `status.parents` when cftunnel's entries in it (`ours`) are not what they
/// should be (the routes whose entries are left out of the statuses are as they should be); 1
/// when the write failed. `kind` labels the status-write metric.
async fn write_parents<K>(
    ctx: &Context,
    ours: Option<&Vec<RouteParentStatus>>,
    kind: &'static str,
    route: &K,
    status: Option<&RouteStatus>,
) -> usize
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let key = (route.namespace().unwrap_or_default(), route.name_any());
    let Some(ours) = ours else {
        return 0;
    };
    let current = status.map(|s| s.parents.as_slice()).unwrap_or_default();
    let wanted = merged_parents(current, ours);
    if current != wanted.as_slice() {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.0);
        let patch = json!({"status": {"parents": wanted}});
        let params = PatchParams::default();
        let patch = Patch::Merge(patch);
        if let Err(error) =
            super::bounded(ctx, kind, api.patch_status(&key.1, &params, &patch)).await
        {
            tracing::warn!(route = %key.1, kind, %error, "route status not written");
            return 1;
        }
    }
    0
}
