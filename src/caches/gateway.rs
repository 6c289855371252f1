//! Gateway API watches. Its CRDs belong to the user: cftunnel runs without them, and starts
//! watching within [`PROBE_INTERVAL`] of their installation, without a restart.
//!
//! A probe (a one-item list of each kind) runs at start and then every [`PROBE_INTERVAL`]
//! until GatewayClass, Gateway and HTTPRoute are all served; then their watches start, with
//! GRPCRoute, ReferenceGrant, TCPRoute and UDPRoute when served too (otherwise probing goes on
//! until they are, and their watches join then: TCPRoute and UDPRoute are in the standard
//! channel since v1.6, and a cluster may have older CRDs). A kind answered 404 is not
//! installed; 403 is reported once (the RBAC lacks it) and counts as not installed; any other
//! error is retried at the next probe. Until the first probe has an answer the caches are not
//! [`synced`](super::ProcessCaches::synced): a first route table computed without the
//! Gateway routes that exist would take their rules and DNS records away.
//!
//! The watches decode object by object (like cftunnel's own kinds): a Gateway API object this
//! version does not read is skipped, not a watch stuck in an error loop.
use std::sync::Arc;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::watch;

use super::decode;
use super::scope::config;
use super::shared::Shared;
use super::shared::keep;
use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_policy::routes::gateway::L4Routes;
use cftunnel_types::gateway::{
    GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant, TCPRoute, UDPRoute,
};

/// How often the Gateway API CRDs are looked for while they are missing.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(20);

/// The watches of the Gateway API kinds.
#[derive(Clone)]
pub struct GatewayCaches {
    pub classes: Shared<GatewayClass>,
    pub gateways: Shared<Gateway>,
    pub http_routes: Shared<HTTPRoute>,
    pub grpc_routes: Option<Shared<GRPCRoute>>,
    pub reference_grants: Option<Shared<ReferenceGrant>>,
    pub tcp_routes: Option<Shared<TCPRoute>>,
    pub udp_routes: Option<Shared<UDPRoute>>,
}

impl GatewayCaches {
    /// Whether every optional kind is watched (nothing left to probe for).
    fn complete(&self) -> bool {
        self.grpc_routes.is_some()
            && self.reference_grants.is_some()
            && self.tcp_routes.is_some()
            && self.udp_routes.is_some()
    }

    /// Starts the watches of the optional kinds `served` says are served and not yet watched;
    /// whether any started.
    fn join(&mut self, start: &Start<'_>, served: &Served) -> bool {
        let mut joined = false;
        if self.grpc_routes.is_none() && served.grpc_routes {
            self.grpc_routes = Some(start.watch("grpcroutes", false));
            joined = true;
        }
        if self.reference_grants.is_none() && served.reference_grants {
            self.reference_grants = Some(start.watch("referencegrants", false));
            joined = true;
        }
        if self.tcp_routes.is_none() && served.tcp_routes {
            self.tcp_routes = Some(start.watch("tcproutes", false));
            joined = true;
        }
        if self.udp_routes.is_none() && served.udp_routes {
            self.udp_routes = Some(start.watch("udproutes", false));
            joined = true;
        }
        joined
    }
}

/// Where the Gateway API stands in this process.
#[derive(Clone)]
pub enum GatewayState {
    /// No answer yet.
    Probing,
    /// Not installed (yet): probed again every [`PROBE_INTERVAL`].
    Absent,
    /// Boxed: the watches are most of its size, and the other states carry nothing.
    Watching(Box<GatewayCaches>),
}

/// The Gateway API's state, shared by every reader.
#[derive(Clone)]
pub struct GatewayApi {
    state: watch::Receiver<GatewayState>,
}

impl GatewayApi {
    /// The watches, once the CRDs are installed.
    pub fn caches(&self) -> Option<GatewayCaches> {
        match &*self.state.borrow() {
            GatewayState::Watching(caches) => Some(GatewayCaches::clone(caches)),
            _ => None,
        }
    }

    /// The TCPRoutes and UDPRoutes not being deleted (as the world's routes, whose rules go at
    /// once); none while their CRDs are not served.
    pub fn l4_routes(&self) -> L4Routes {
        let Some(caches) = self.caches() else {
            return L4Routes::default();
        };
        L4Routes {
            tcp: (caches.tcp_routes.iter())
                .flat_map(|s| s.store().state())
                .filter(|r| r.metadata.deletion_timestamp.is_none())
                .collect(),
            udp: (caches.udp_routes.iter())
                .flat_map(|s| s.store().state())
                .filter(|r| r.metadata.deletion_timestamp.is_none())
                .collect(),
        }
    }

    /// Resolves once the first probe answered and, when the CRDs are there, their watches
    /// listed.
    pub async fn synced(&self) {
        let mut state = self.state.clone();
        let caches = loop {
            match &*state.borrow_and_update() {
                GatewayState::Probing => {}
                GatewayState::Absent => return,
                GatewayState::Watching(caches) => break GatewayCaches::clone(caches),
            }
            if state.changed().await.is_err() {
                return;
            }
        };
        caches.classes.listed().await;
        caches.gateways.listed().await;
        caches.http_routes.listed().await;
        if let Some(grpc) = &caches.grpc_routes {
            grpc.listed().await;
        }
        if let Some(grants) = &caches.reference_grants {
            grants.listed().await;
        }
        if let Some(tcp) = &caches.tcp_routes {
            tcp.listed().await;
        }
        if let Some(udp) = &caches.udp_routes {
            udp.listed().await;
        }
    }

    /// Starts probing on a task of `scope`; the watches it starts run there too.
    pub(super) fn start(
        scope: &Scope,
        client: &Client,
        namespace: Option<&str>,
        metrics: &Arc<Metrics>,
        generation: Arc<watch::Sender<u64>>,
    ) -> GatewayApi {
        let (tx, state) = watch::channel(GatewayState::Probing);
        let (client, namespace, metrics) = (
            client.clone(),
            namespace.map(str::to_string),
            metrics.clone(),
        );
        let watches = scope.clone();
        scope.spawn("gateway-api-probe", async move {
            let mut told_forbidden = false;
            loop {
                let found = probe(&client, &mut told_forbidden).await;
                match found {
                    Some(kinds) if kinds.required() => {
                        let ns = namespace.as_deref();
                        let start = Start {
                            scope: &watches,
                            client: &client,
                            namespace: ns,
                            metrics: &metrics,
                            generation: &generation,
                        };
                        let mut caches = start.required();
                        caches.join(&start, &kinds);
                        tracing::info!(
                            "Gateway API CRDs found: watching GatewayClasses, Gateways and routes"
                        );
                        tx.send_replace(GatewayState::Watching(Box::new(caches.clone())));
                        generation.send_modify(|n| *n = n.wrapping_add(1));
                        // The optional kinds installed later join when served.
                        while !caches.complete() {
                            tokio::time::sleep(PROBE_INTERVAL).await;
                            let Some(kinds) = probe(&client, &mut told_forbidden).await else {
                                continue;
                            };
                            if caches.join(&start, &kinds) {
                                tx.send_replace(GatewayState::Watching(Box::new(caches.clone())));
                                generation.send_modify(|n| *n = n.wrapping_add(1));
                            }
                        }
                        return;
                    }
                    Some(_) => {
                        if matches!(*tx.borrow(), GatewayState::Probing) {
                            tracing::info!(
                                "Gateway API CRDs not installed; looking again every {}s",
                                PROBE_INTERVAL.as_secs()
                            );
                            tx.send_replace(GatewayState::Absent);
                        }
                    }
                    None => {}
                }
                tokio::time::sleep(PROBE_INTERVAL).await;
            }
        });
        GatewayApi { state }
    }
}

/// Which kinds the API server serves.
#[derive(Default)]
struct Served {
    classes: bool,
    gateways: bool,
    http_routes: bool,
    grpc_routes: bool,
    reference_grants: bool,
    tcp_routes: bool,
    udp_routes: bool,
}

impl Served {
    fn required(&self) -> bool {
        self.classes && self.gateways && self.http_routes
    }
}

/// `None` when some answer was neither "served" nor "not installed" (retry later).
async fn probe(client: &Client, told_forbidden: &mut bool) -> Option<Served> {
    let mut served = Served::default();
    let mut unsure = false;
    let mut ask = |result: Result<(), kube::Error>, what: &str, slot: &mut bool| match result {
        Ok(()) => *slot = true,
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(kube::Error::Api(e)) if e.code == 403 => {
            if !*told_forbidden {
                tracing::warn!(
                    kind = what,
                    "cannot list {what}: the RBAC does not allow it; Gateway API is not served"
                );
                *told_forbidden = true;
            }
        }
        Err(error) => {
            tracing::debug!(kind = what, %error, "Gateway API probe failed; retrying");
            unsure = true;
        }
    };
    let one = ListParams::default().limit(1);
    ask(
        Api::<GatewayClass>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "gatewayclasses",
        &mut served.classes,
    );
    ask(
        Api::<Gateway>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "gateways",
        &mut served.gateways,
    );
    ask(
        Api::<HTTPRoute>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "httproutes",
        &mut served.http_routes,
    );
    ask(
        Api::<GRPCRoute>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "grpcroutes",
        &mut served.grpc_routes,
    );
    ask(
        Api::<ReferenceGrant>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "referencegrants",
        &mut served.reference_grants,
    );
    ask(
        Api::<TCPRoute>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "tcproutes",
        &mut served.tcp_routes,
    );
    ask(
        Api::<UDPRoute>::all(client.clone())
            .list(&one)
            .await
            .map(drop),
        "udproutes",
        &mut served.udp_routes,
    );
    (!unsure).then_some(served)
}

/// What starting a watch needs.
struct Start<'a> {
    scope: &'a Scope,
    client: &'a Client,
    namespace: Option<&'a str>,
    metrics: &'a Arc<Metrics>,
    generation: &'a Arc<watch::Sender<u64>>,
}

impl Start<'_> {
    /// A watch of `K` (cluster-wide when `cluster`), decoded object by object.
    fn watch<K>(&self, what: &'static str, cluster: bool) -> Shared<K>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let namespace = if cluster { None } else { self.namespace };
        Shared::start(
            self.scope,
            self.metrics,
            what,
            |store| decode::tolerant::<K, _>(self.client, namespace, config(""), store),
            keep,
            self.generation.clone(),
        )
    }

    /// GatewayClasses, Gateways and HTTPRoutes.
    fn required(&self) -> GatewayCaches {
        GatewayCaches {
            classes: self.watch("gatewayclasses", true),
            gateways: self.watch("gateways", false),
            http_routes: self.watch("httproutes", false),
            grpc_routes: None,
            reference_grants: None,
            tcp_routes: None,
            udp_routes: None,
        }
    }
}
