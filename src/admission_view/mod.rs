//! The admission view over the process-wide watch caches ([`crate::caches`]): Tunnels,
//! ClusterTunnels, TunnelBindings, Services (stripped; only labelled ones claim hostnames),
//! namespace labels, IngressClasses, the hostnames Ingresses and Gateway API routes claim
//! (as the route model gives them), AccessPolicies, NetworkRoutes and VirtualNetworks. A snapshot is rebuilt only after a watch event. [`serve`] answers admission
//! from it.
pub mod serve;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;

use crate::caches::ProcessCaches;
use crate::term::TunnelKindAdapter;
use std::collections::BTreeMap;

use cftunnel_policy::routes::{RouteWorld, model_claims};
use cftunnel_policy::rules::AdmissionView;
use cftunnel_policy::rules::facts::{binding_claims, service_claims, tunnel_facts};
use cftunnel_types::TunnelKind;

/// A view is rebuilt at most once per this many times its last build took: during a bulk
/// create (every request sees a newer generation) building spends at most a quarter of the
/// time, and the view lags the caches by at most three builds (well under a millisecond with
/// a few hundred objects, tens of milliseconds with ten thousand: the order of the watch's own
/// lag behind the API server).
const REBUILD_SPACING: u32 = 4;

/// A view no request asked for in this long is dropped, and rebuilt by the next request that
/// judges: between bursts of admission (a bulk create, a deploy) the view of ten thousand
/// objects is megabytes held for nothing (every claim of every hostname), and rebuilding it
/// takes tens of milliseconds.
pub(crate) const IDLE_RELEASE: Duration = Duration::from_secs(30);

/// The caches' generation no view was built for.
const NONE_BUILT: u64 = u64::MAX;

/// The last view built: the caches' generation it saw, the view, when the next may be built,
/// when a request last asked for it.
struct Built {
    generation: u64,
    view: Arc<AdmissionView>,
    next: Instant,
    used: Instant,
}

impl Built {
    fn none(now: Instant) -> Built {
        Built {
            generation: NONE_BUILT,
            view: Arc::new(AdmissionView::default()),
            next: now,
            used: now,
        }
    }

    /// Holds a view no request asked for in [`IDLE_RELEASE`].
    fn idle(&self, now: Instant) -> bool {
        self.generation != NONE_BUILT && now.saturating_duration_since(self.used) >= IDLE_RELEASE
    }
}

/// The admission view, built from the process-wide caches.
pub(crate) struct ViewCache {
    caches: ProcessCaches,
    built: Mutex<Built>,
}

impl ViewCache {
    /// A view over `caches`; admission waits for [`ProcessCaches::synced`] before it answers.
    pub fn new(caches: ProcessCaches) -> Arc<ViewCache> {
        Arc::new(ViewCache {
            caches,
            built: Mutex::new(Built::none(Instant::now())),
        })
    }

    /// Drops the view if no request asked for it in [`IDLE_RELEASE`]; `true` if it did.
    pub(crate) fn release_if_idle(&self) -> bool {
        let mut built = self.lock();
        let now = Instant::now();
        let idle = built.idle(now);
        if idle {
            *built = Built::none(now);
        }
        idle
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Built> {
        self.built
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current view; rebuilt from the stores only when a watch event arrived since, and
    /// not sooner than [`REBUILD_SPACING`] allows.
    pub fn snapshot(&self) -> Arc<AdmissionView> {
        let generation = self.caches.generation();
        let mut built = self.lock();
        let now = Instant::now();
        // A view released while idle is rebuilt at once, whatever the spacing said.
        if built.generation == NONE_BUILT || (built.generation != generation && now >= built.next) {
            let view = Arc::new(self.build());
            let took = now.elapsed();
            *built = Built {
                generation,
                view,
                next: Instant::now() + took * (REBUILD_SPACING - 1),
                used: now,
            };
        }
        built.used = now;
        built.view.clone()
    }

    fn build(&self) -> AdmissionView {
        let s = &self.caches;
        let mut tunnels = Vec::new();
        for t in s.tunnels.store().state() {
            let ns = t.meta().namespace.as_deref().unwrap_or("");
            tunnels.push(tunnel_facts(
                TunnelKind::Tunnel,
                ns,
                &name_of(t.as_ref()),
                &t.spec,
            ));
        }
        for t in s.cluster_tunnels.store().state() {
            tunnels.push(tunnel_facts(
                TunnelKind::ClusterTunnel,
                "",
                &name_of(t.as_ref()),
                &t.tunnel_spec(),
            ));
        }
        cftunnel_policy::rules::facts::link_account_zones(&mut tunnels);
        let mut claims = Vec::new();
        for b in s.bindings.store().state() {
            claims.extend(binding_claims(
                &b,
                b.meta().namespace.as_deref().unwrap_or(""),
                &tunnels,
            ));
        }
        for svc in s.services.store().state() {
            claims.extend(service_claims(
                &svc.metadata,
                svc.meta().namespace.as_deref().unwrap_or(""),
                &tunnels,
            ));
        }
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = s
            .namespaces
            .store()
            .state()
            .iter()
            .map(|n| {
                (
                    name_of(n.as_ref()),
                    n.metadata.labels.clone().unwrap_or_default(),
                )
            })
            .collect();
        // Ingresses and Gateway API routes claim what the route model gives them.
        let mut world = RouteWorld {
            tunnels: tunnels.clone(),
            namespace_labels: BTreeMap::clone(&namespace_labels),
            ingresses: s.ingresses.store().state(),
            ingress_classes: s.ingress_classes.store().state(),
            ..RouteWorld::default()
        };
        if let Some(gateway) = s.gateway_api.caches() {
            world.gateway_classes = gateway.classes.store().state();
            world.gateways = gateway.gateways.store().state();
            world.http_routes = gateway.http_routes.store().state();
            if let Some(grpc) = &gateway.grpc_routes {
                world.grpc_routes = grpc.store().state();
            }
        }
        if !(world.ingresses.is_empty()
            && world.http_routes.is_empty()
            && world.grpc_routes.is_empty())
        {
            claims.extend(model_claims(&world));
        }
        let mut view = AdmissionView::new(tunnels, namespace_labels, claims);
        view.ingress_classes = world.ingress_classes;
        view.access_policies = s.access_policies.all();
        view.network_routes = s.private_networks.routes.all();
        view.virtual_networks = s.private_networks.networks.all();
        view
    }
}

fn name_of<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_idle_once_no_request_asked_for_it_in_the_release_time() {
        let start = Instant::now();
        let mut built = Built::none(start);
        assert!(
            !built.idle(start + IDLE_RELEASE * 2),
            "nothing built, nothing to drop"
        );
        built.generation = 7;
        assert!(!built.idle(start + IDLE_RELEASE / 2));
        assert!(built.idle(start + IDLE_RELEASE));
        built.used = start + IDLE_RELEASE;
        assert!(!built.idle(start + IDLE_RELEASE + IDLE_RELEASE / 2));
    }
}
