//! The Tunnel / ClusterTunnel reconciler (SPEC §3.1): one generic core, one adapter per kind.
//!
//! Crash safety of `newTunnel`: before a tunnel is created, its 32 random secret bytes are stored
//! in the managed Secret under [`PENDING_SECRET_KEY`]; once the tunnel exists, the rendered
//! Secret (credentials.json, holding the same secret) replaces that key. A restart between the two
//! finds the live tunnel by name and adopts it only when its decoded secret equals the stored one.
pub mod adapters;
pub mod apply;
pub mod conditions;
pub mod context;
pub mod core;
pub mod credentials;
pub mod deletion;
pub mod deletion_pods;
pub mod deletion_target;
pub mod dns_guard;
pub mod drift;
pub mod events;
pub mod finalizer;
pub mod go_cluster_workload;
pub mod memory;
pub mod render_cli;
pub mod render_input;
pub mod secret_guard;
pub mod setup;
pub mod status;
pub mod takeover;
pub mod zones;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client};

pub use adapters::TunnelKindAdapter;
pub use conditions::ReadyReason;
pub use context::{
    Context, ControllerOptions, DEFAULT_CLOUDFLARED_IMAGE, DEFAULT_CLUSTER_RESOURCE_NAMESPACE,
};
pub use core::ReconcileError;

use tokio::sync::mpsc;

use crate::admission::{TunnelIdentity, TunnelKind};
use crate::api::{ClusterTunnel, Tunnel};
use crate::view_cache::WatchScope;

/// Key of the managed Secret holding the base64 tunnel secret before the tunnel exists.
pub const PENDING_SECRET_KEY: &str = "tunnelSecret";

/// Runs the Tunnel and ClusterTunnel controllers, and the route reconciler that feeds them,
/// until the process ends.
pub async fn run(client: Client, options: ControllerOptions, scope: WatchScope) {
    let ctx = Arc::new(Context::new(client, options, scope));
    tokio::spawn(secret_guard::sweep(
        ctx.clone(),
        ctx.scope.namespace.clone(),
    ));
    if ctx.scope.namespace.is_some() {
        let cluster_ns = Some(ctx.options.cluster_resource_namespace.clone());
        tokio::spawn(secret_guard::sweep(ctx.clone(), cluster_ns));
    }
    let (route_tx, mut route_rx) = mpsc::unbounded_channel::<TunnelIdentity>();
    let (tunnel_tx, tunnel_rx) = mpsc::unbounded_channel::<ObjectRef<Tunnel>>();
    let (cluster_tx, cluster_rx) = mpsc::unbounded_channel::<ObjectRef<ClusterTunnel>>();
    // Route changes re-run exactly the tunnels they touch.
    let dispatch = async move {
        while let Some(tunnel) = route_rx.recv().await {
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
        crate::routing::run(ctx.clone(), route_tx),
        dispatch,
        run_kind::<Tunnel>(ctx.clone(), receiver_stream(tunnel_rx)),
        run_kind::<ClusterTunnel>(ctx, receiver_stream(cluster_rx))
    );
}

/// One controller: the custom resources of kind `K`, triggered by their label-selected children
/// and by every Secret of the watched namespaces (an API Secret that appears, is fixed or rotates
/// re-runs the tunnels that name it at once). All trigger watches are metadata-only and keep no
/// cache: memory never holds Secret data or unrelated objects.
async fn run_kind<K: TunnelKindAdapter>(
    ctx: Arc<Context>,
    route_changes: impl futures::Stream<Item = ObjectRef<K>> + Send + 'static,
) {
    let client = ctx.client.clone();
    let mut config = watcher::Config::default();
    if let Some(selector) = &ctx.scope.label_selector {
        config = config.labels(selector);
    }
    let children = watcher::Config::default().labels(&K::child_selector());
    let child_ns = K::children_namespace(&ctx);
    let controller = Controller::new(K::watch_api(&client, &ctx.scope), config);
    let tunnels = controller.store();
    let _tracked = crate::metrics::track_tunnels(tunnels.clone());
    let secrets_ctx = ctx.clone();
    controller
        .reconcile_on(route_changes)
        .watches(
            child_api::<Secret>(&client, child_ns.as_deref()),
            watcher::Config::default(),
            move |secret| {
                let mut refs: Vec<ObjectRef<K>> = K::controlling_object(&secret.metadata)
                    .into_iter()
                    .collect();
                refs.extend(api_secret_users(&tunnels, &secret.metadata, &secrets_ctx));
                refs
            },
        )
        .watches(
            child_api::<ConfigMap>(&client, child_ns.as_deref()),
            children.clone(),
            |child| K::controlling_object(&child.metadata),
        )
        .watches(
            child_api::<Deployment>(&client, child_ns.as_deref()),
            children,
            |child| K::controlling_object(&child.metadata),
        )
        .run(core::reconcile::<K>, core::error_policy::<K>, ctx)
        .for_each(|result| async move {
            crate::metrics::controller_event(K::KIND.as_str(), &result);
            if let Err(error) = result {
                tracing::debug!(%error, "tunnel controller event");
            }
        })
        .await;
}

fn receiver_stream<T: Send + 'static>(
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
        .filter(|t| t.api_secret_name() == name && t.managed_namespace(ctx) == namespace)
        .map(|t| ObjectRef::from_obj(&**t))
        .collect()
}

/// Metadata-only view (kube sends metadata-only requests for `PartialObjectMeta`): memory and
/// traffic hold names and owners, never Secret data. `None`: all namespaces.
fn child_api<C>(client: &Client, namespace: Option<&str>) -> Api<PartialObjectMeta<C>>
where
    C: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
