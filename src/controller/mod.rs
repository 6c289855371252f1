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
pub mod drift;
pub mod events;
pub mod finalizer;
pub mod render_cli;
pub mod render_input;
pub mod secret_guard;
pub mod setup;
pub mod status;
pub mod takeover;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube::{Api, Client};

pub use adapters::TunnelKindAdapter;
pub use conditions::ReadyReason;
pub use context::{
    Context, ControllerOptions, DEFAULT_CLOUDFLARED_IMAGE, DEFAULT_CLUSTER_RESOURCE_NAMESPACE,
};
pub use core::ReconcileError;

use crate::api::{ClusterTunnel, Tunnel};
use crate::view_cache::WatchScope;

/// Key of the managed Secret holding the base64 tunnel secret before the tunnel exists.
pub const PENDING_SECRET_KEY: &str = "tunnelSecret";

/// Runs the Tunnel and ClusterTunnel controllers until the process ends.
pub async fn run(client: Client, options: ControllerOptions, scope: WatchScope) {
    let ctx = Arc::new(Context::new(client, options, scope));
    futures::join!(
        run_kind::<Tunnel>(ctx.clone()),
        run_kind::<ClusterTunnel>(ctx)
    );
}

/// One controller: the custom resources of kind `K` plus their label-selected children.
async fn run_kind<K: TunnelKindAdapter>(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut config = watcher::Config::default();
    if let Some(selector) = &ctx.scope.label_selector {
        config = config.labels(selector);
    }
    let children = watcher::Config::default().labels(&K::child_selector());
    let child_ns = K::children_namespace(&ctx);
    Controller::new(K::watch_api(&client, &ctx.scope), config)
        .watches(
            child_api::<Secret>(&client, child_ns.as_deref()),
            children.clone(),
            |child| K::controlling_object(&child.metadata),
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
            if let Err(error) = result {
                tracing::debug!(%error, "tunnel controller event");
            }
        })
        .await;
}

/// Metadata-only view of children: memory holds names and owners, never Secret data.
fn child_api<C>(client: &Client, namespace: Option<&str>) -> Api<PartialObjectMeta<C>>
where
    C: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
