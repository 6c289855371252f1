//! The hostnames Ingresses and Gateway API routes claim, as the admission view holds them: so
//! a binding, a labelled Service or an Ingress applied later is refused at admission when one
//! of them already owns its hostname, as the route model would make it lose.
use super::model::compute_routes;
use super::route::ANY_HOST;
use super::table::RouteReason;
use super::world::{RouteWorld, SourceKind};
use crate::rules::HostnameClaim;

/// Every hostname (and path) an Ingress, HTTPRoute or GRPCRoute of `world` declares through a
/// tunnel that takes it, valid or not yet owned: what a newer object must not take.
pub fn model_claims(world: &RouteWorld) -> Vec<HostnameClaim> {
    let table = compute_routes(world);
    let mut out = Vec::new();
    for (source, status) in &table.sources {
        if !matches!(
            source.kind,
            SourceKind::Ingress | SourceKind::HTTPRoute | SourceKind::GRPCRoute
        ) {
            continue;
        }
        let Some(tunnel) = &status.tunnel else {
            continue;
        };
        for entry in &status.routes {
            let claims = entry.reason.is_served() || entry.reason == RouteReason::HostnameConflict;
            if !claims || entry.hostname == ANY_HOST {
                continue;
            }
            out.push(HostnameClaim {
                fqdn: entry.hostname.clone(),
                path: entry.path.clone().unwrap_or_default(),
                tunnel: tunnel.clone(),
                owner: source.to_string(),
                object: source.to_string(),
            });
        }
    }
    out
}
