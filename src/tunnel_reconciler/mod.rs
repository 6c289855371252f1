//! The Tunnel / ClusterTunnel reconciler (docs/design.md §3.1): one generic core, one adapter per kind.
//!
//! Crash safety of `newTunnel`: before a tunnel is created, its 32 random secret bytes are stored
//! in the managed Secret under [`PENDING_SECRET_KEY`]; once the tunnel exists, the rendered
//! Secret (credentials.json, holding the same secret) replaces that key. A restart between the two
//! finds the live tunnel by name and adopts it only when its decoded secret equals the stored one.
pub mod access_tunnel;
pub mod apply;
pub mod context;
pub mod core;
pub mod deletion;
mod deletion_access;
pub(crate) mod deletion_pods;
pub(crate) mod deletion_target;
mod departures;
pub mod drift;
pub(crate) mod go_cluster_workload;
pub mod legacy;
pub(crate) mod remote;
pub(crate) mod render_input;
pub(crate) mod resolved;
pub(crate) mod secret_guard;
pub mod setup;
pub mod status;
pub mod takeover;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use tokio::sync::mpsc;

use crate::caches::{Shared, TermCaches};
use crate::term::{Context, TunnelKindAdapter, claims};
use cftunnel_types::{ClusterTunnel, Tunnel};
use cftunnel_types::{TunnelIdentity, TunnelKind};
pub use context::TunnelContext;

pub use crate::term::credentials::PENDING_SECRET_KEY;

/// Starts the Secret guard's sweeps in the context's term.
pub(crate) fn start_secret_guard(ctx: &Arc<Context>) {
    ctx.term.spawn(
        "secret-guard-sweep",
        secret_guard::sweep(ctx.clone(), ctx.scope.namespace.clone()),
    );
    if ctx.scope.namespace.is_some() {
        let cluster_ns = Some(ctx.options.cluster_resource_namespace.clone());
        ctx.term.spawn(
            "secret-guard-sweep",
            secret_guard::sweep(ctx.clone(), cluster_ns),
        );
    }
}

/// Runs the Tunnel and ClusterTunnel controllers until the term ends. `route_changes` names
/// the tunnels whose routes changed (the route reconciler sends them); each is re-run.
pub(crate) async fn run_controllers(
    ctx: Arc<TunnelContext>,
    tunnels: Shared<Tunnel, Store<Tunnel>>,
    cluster_tunnels: Shared<ClusterTunnel, Store<ClusterTunnel>>,
    children: TermCaches,
    mut route_changes: mpsc::UnboundedReceiver<TunnelIdentity>,
) {
    let (tunnel_tx, tunnel_rx) = mpsc::unbounded_channel::<ObjectRef<Tunnel>>();
    let (cluster_tx, cluster_rx) = mpsc::unbounded_channel::<ObjectRef<ClusterTunnel>>();
    // The requests already waiting when the term begins are its backlog (docs/design.md §3.8):
    // read once both stores are listed, before the first reconcile.
    futures::join!(tunnels.listed(), cluster_tunnels.listed());
    let (listed, cluster_listed) = (tunnels.store().state(), cluster_tunnels.store().state());
    ctx.asks
        .begin_term(waiting_requests(&listed).chain(waiting_requests(&cluster_listed)));
    let _ = ctx.claims.set(claims::Claims {
        tunnels: tunnels.store(),
        cluster_tunnels: cluster_tunnels.store(),
    });
    let departures = departures::follow(
        ctx.clone(),
        tunnels.changes(),
        cluster_tunnels.changes(),
        (tunnels.store(), cluster_tunnels.store()),
        departures::Rerun {
            tunnels: tunnel_tx.clone(),
            cluster_tunnels: cluster_tx.clone(),
        },
    );
    // Route changes re-run exactly the tunnels they touch.
    let dispatch = async move {
        while let Some(tunnel) = route_changes.recv().await {
            let sent = match tunnel.kind {
                TunnelKind::ClusterTunnel => cluster_tx.send(ObjectRef::new(&tunnel.name)).is_ok(),
                _ => tunnel_tx
                    .send(ObjectRef::new(&tunnel.name).within(&tunnel.namespace))
                    .is_ok(),
            };
            if !sent {
                return;
            }
        }
    };
    futures::join!(
        dispatch,
        departures,
        run_kind::<Tunnel>(ctx.clone(), tunnels, &children, receiver_stream(tunnel_rx)),
        run_kind::<ClusterTunnel>(ctx, cluster_tunnels, &children, receiver_stream(cluster_rx))
    );
}

/// `(uid, generation)` of every object in `objects` that is not converged.
fn waiting_requests<K: TunnelKindAdapter>(
    objects: &[Arc<K>],
) -> impl Iterator<Item = (String, i64)> + '_ {
    objects
        .iter()
        .filter(|o| core::spec_changed(o.as_ref()))
        .filter_map(|o| {
            Some((
                o.meta().uid.clone()?,
                o.meta().generation.unwrap_or_default(),
            ))
        })
}

/// Reconciles of one kind running at once: all that are due (`0`). Each waits for Cloudflare at
/// its credential's pacer, where a deletion goes first and a new tunnel does not queue behind a
/// first sync; the part that holds memory (render and apply) is bounded by
/// `TunnelContext::api_slots`.
const RECONCILE_CONCURRENCY: u16 = 0;

/// One controller: the custom resources of kind `K` (from the process-wide shared store),
/// triggered by their children and by every Secret of the watched namespaces (an API Secret
/// that appears, is fixed or rotates re-runs the tunnels that name it at once). The trigger
/// watches are the term's shared ones ([`TermCaches`]): Secrets and ConfigMaps metadata-only,
/// so memory never holds Secret data.
async fn run_kind<K: TunnelKindAdapter>(
    ctx: Arc<TunnelContext>,
    objects: Shared<K, Store<K>>,
    children: &TermCaches,
    route_changes: impl futures::Stream<Item = ObjectRef<K>> + Send + 'static,
) {
    let tunnels = objects.store();
    let gauge_store = tunnels.clone();
    let _tracked = ctx.metrics.track_tunnels(
        K::KIND,
        Box::new(move || {
            gauge_store
                .state()
                .iter()
                .map(|tunnel| tunnel_state(tunnel.as_ref()))
                .collect()
        }),
    );
    let secrets_ctx = ctx.clone();
    let secrets = futures::stream::select_all(children.secrets.iter().map(|s| s.changes().boxed()));
    let config_maps =
        futures::stream::select_all(children.config_maps.iter().map(|s| s.changes().boxed()));
    let deployments =
        futures::stream::select_all(children.deployments.iter().map(|s| s.changes().boxed()));
    // A term that starts after the store listed still reconciles every object once.
    Controller::for_shared_stream(objects.objects(), objects.store())
        .with_config(
            kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY),
        )
        .reconcile_on(route_changes)
        .watches_shared_stream(secrets, move |secret| {
            let mut refs: Vec<ObjectRef<K>> = K::controlling_object(&secret.metadata)
                .into_iter()
                .collect();
            refs.extend(api_secret_users(&tunnels, &secret.metadata, &secrets_ctx));
            refs
        })
        .watches_shared_stream(config_maps, |child| K::controlling_object(&child.metadata))
        .watches_shared_stream(deployments, |child| K::controlling_object(&child.metadata))
        .run(core::reconcile::<K>, core::error_policy::<K>, ctx.clone())
        .for_each(|result| {
            let ctx = ctx.clone();
            async move {
                ctx.metrics.controller_event(K::KIND.as_str(), &result);
                if let Err(error) = result {
                    tracing::debug!(%error, "tunnel controller event");
                }
            }
        })
        .await;
}

/// `Deleting`, the reason of `Ready`, or `Pending` before the first status.
fn tunnel_state<K: TunnelKindAdapter>(tunnel: &K) -> &'static str {
    if tunnel.meta().deletion_timestamp.is_some() {
        return "Deleting";
    }
    let reason = tunnel
        .tunnel_status()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.as_str());
    match reason {
        Some(reason) => STATES
            .iter()
            .find(|s| **s == reason)
            .copied()
            .unwrap_or("Unknown"),
        None => "Pending",
    }
}

/// Reasons of `Ready` a tunnel can carry (bounded label values).
const STATES: [&str; 17] = [
    "Ready",
    "InvalidSpec",
    "SecretNotFound",
    "SecretKeyMissing",
    "CloudflareAuthFailed",
    "CloudflareError",
    "AccountNotFound",
    "ZoneNotFound",
    "TunnelNotFound",
    "TunnelDeleted",
    "TunnelNameConflict",
    "TunnelIdConflict",
    "RemotelyManagedTunnel",
    "CredentialsInvalid",
    "NameConflict",
    "RenderFailed",
    "KubernetesError",
];

pub(crate) fn receiver_stream<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

/// The tunnels whose API Secret is `secret`.
fn api_secret_users<K: TunnelKindAdapter>(
    tunnels: &Store<K>,
    secret: &ObjectMeta,
    ctx: &Context,
) -> Vec<ObjectRef<K>> {
    let (Some(namespace), Some(name)) = (secret.namespace.as_deref(), secret.name.as_deref())
    else {
        return Vec::new();
    };
    tunnels
        .state()
        .iter()
        .filter(|t| t.api_secret_name() == name && t.managed_namespace(&ctx.options) == namespace)
        .map(|t| ObjectRef::from_obj(&**t))
        .collect()
}
