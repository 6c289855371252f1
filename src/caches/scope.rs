//! Which objects a cftunnel instance watches, and how every watch lists them.
use kube::runtime::watcher;
use kube::{Api, Client, Resource};

/// Which objects this instance watches (several instances may share one API server in tests).
#[derive(Clone, Debug, Default)]
pub struct WatchScope {
    /// Watch namespaced objects only in this namespace.
    pub namespace: Option<String>,
    /// Extra label selector for Tunnels, ClusterTunnels, TunnelBindings, NetworkRoutes and
    /// VirtualNetworks.
    pub label_selector: Option<String>,
}

/// An Api over one namespace, or all of them.
pub(crate) fn namespaced<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Objects per page of a watch's initial list (and of a relist).
///
/// Choice: the lists are paged and read consistently, not from "any" resourceVersion (which
/// the API server answers from its watch cache in one response, ignoring the page size), and
/// not streamed (`sendInitialEvents`, refused with 422 where the WatchList feature gate is
/// off, as it is by default on Kubernetes 1.33). A page is decoded and stored before the next
/// one is read, so a restart with a thousand Services holds fifty of them in flight at most,
/// not the whole list (BENCHMARKS.md, restart rows of the convergence benchmark).
pub(crate) const WATCH_PAGE_SIZE: u32 = 50;

/// A watch config, label-selected unless `labels` is empty, listing in pages.
pub(crate) fn config(labels: &str) -> watcher::Config {
    let config = watcher::Config::default().page_size(WATCH_PAGE_SIZE);
    if labels.is_empty() {
        config
    } else {
        config.labels(labels)
    }
}
