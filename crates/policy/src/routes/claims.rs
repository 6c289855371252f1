//! The hostnames Ingresses and Gateway API routes claim, as the admission view holds them: so
//! a binding, a labelled Service or an Ingress applied later is refused at admission when one
//! of them already owns its hostname, as the route model would make it lose.
use std::sync::Arc;

use super::model::walk;
use super::route::ANY_HOST;
use super::table::RouteReason;
use super::world::{RouteWorld, SourceKind, SourceRef};
use crate::rules::HostnameClaim;

/// Every hostname (and path) an Ingress, HTTPRoute or GRPCRoute of `world` declares through a
/// tunnel that takes it, valid or not yet owned: what a newer object must not take.
///
/// The route model's walk without its table: each source's entries are read and dropped as
/// the walk goes, so admission holds the claims and never a second route table of every
/// object (tens of megabytes with ten thousand routes, built at every rebuild of the view).
/// In the order the table's sources would give them: by object, then as declared.
pub fn model_claims(world: &RouteWorld) -> Vec<HostnameClaim> {
    let mut keyed: Vec<(Arc<SourceRef>, HostnameClaim)> = Vec::new();
    walk(world, |source, _, routed| {
        let reference = &source.reference;
        if !matches!(
            reference.kind,
            SourceKind::Ingress | SourceKind::HTTPRoute | SourceKind::GRPCRoute
        ) {
            return;
        }
        let Some(tunnel) = &source.tunnel else {
            return;
        };
        let mut object = None;
        for entry in &routed.status.routes {
            let claims = entry.reason.is_served() || entry.reason == RouteReason::HostnameConflict;
            if !claims || entry.hostname == ANY_HOST {
                continue;
            }
            let name = object.get_or_insert_with(|| reference.to_string());
            keyed.push((
                reference.clone(),
                HostnameClaim {
                    fqdn: entry.hostname.clone(),
                    path: entry.path.clone().unwrap_or_default(),
                    tunnel: tunnel.clone(),
                    owner: name.clone(),
                    object: name.clone(),
                },
            ));
        }
    });
    // Stable: one object's claims stay in declaration order.
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, claim)| claim).collect()
}
