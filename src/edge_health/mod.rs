//! The edge health task (docs/design.md §3.9): what Cloudflare's edge says of each tunnel, and
//! how many of its cloudflared pods are ready, handed to the status writer as an [`EdgeView`].
//!
//! Every `--edge-interval` (60 s by default, so a change at Cloudflare shows within two
//! minutes) it walks the tunnels of each account once per credential, at background priority,
//! through the walks the drift checks share (`term::tunnel_lists`): a page answers 1,000
//! tunnels. A tunnel whose word changed since it was last seen gets its connectors listed (one
//! call, only then) for the summary in `status.edge`. The pods come from the term's cache of
//! cloudflared Deployments. Nothing is written here: the status writer writes `status.edge`,
//! `status.connectors` and `Connected`, and tells each transition in an Event. The same pass
//! checks each tunnel's routed hostnames against its zone's edge certificates
//! ([`certificates`]); a hostname none covers is a finding on its routes.
mod certificates;
mod look;

pub use certificates::Finding;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use kube::ResourceExt;

use crate::caches::{ProcessCaches, TermCaches};
use crate::metrics::{EdgeSample, EdgeSource};
use crate::term::Context;
use crate::term::adapters::TunnelKindAdapter;
use cftunnel_types::{ConnectorsStatus, EdgeStatus, TunnelIdentity};

/// What the edge and the pods say of each tunnel, by the object's uid, and the hostnames of
/// each tunnel no active edge certificate covers.
#[derive(Debug, Default, PartialEq)]
pub struct EdgeView {
    pub tunnels: HashMap<String, EdgeReport>,
    pub certificates: BTreeMap<TunnelIdentity, Vec<Finding>>,
}

/// One tunnel's `status.edge` and `status.connectors` as they should be.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeReport {
    /// `None` until a walk listed the tunnel.
    pub edge: Option<EdgeStatus>,
    /// `None` when cftunnel runs no cloudflared for it.
    pub connectors: Option<ConnectorsStatus>,
}

/// Runs until its term ends; `--edge-interval 0` turns it off.
pub async fn run(
    ctx: Arc<Context>,
    caches: ProcessCaches,
    children: TermCaches,
    view: watch::Sender<Arc<EdgeView>>,
) {
    let interval = ctx.options.edge_interval;
    if interval.is_zero() {
        return;
    }
    let _tracked = ctx.metrics.track_edges(samples(&caches));
    let mut seen = look::Seen::default();
    loop {
        let next = look::pass(&ctx, &caches, &children, &mut seen, interval / 2).await;
        // Sent every pass, changed or not: the writer compares it with every tunnel's status
        // again, which puts back a `Connected` a reconcile wrote over from an older copy.
        view.send_replace(Arc::new(next));
        tokio::time::sleep(interval.max(Duration::from_secs(1))).await;
    }
}

/// What the metrics read of each tunnel's status at scrape time.
fn samples(caches: &ProcessCaches) -> EdgeSource {
    let (tunnels, cluster_tunnels) = (caches.tunnels.store(), caches.cluster_tunnels.store());
    Box::new(move || {
        let mut out: Vec<EdgeSample> = Vec::new();
        out.extend(tunnels.state().iter().map(|t| sample(t.as_ref(), "tunnel")));
        out.extend(
            cluster_tunnels
                .state()
                .iter()
                .map(|t| sample(t.as_ref(), "clustertunnel")),
        );
        out
    })
}

fn sample<K: TunnelKindAdapter>(tunnel: &K, kind: &'static str) -> EdgeSample {
    let status = tunnel.tunnel_status();
    EdgeSample {
        kind,
        namespace: tunnel.namespace().unwrap_or_default(),
        name: tunnel.name_any(),
        status: status
            .and_then(|s| s.edge.as_ref())
            .map(|e| e.status.clone()),
        pods: status
            .and_then(|s| s.connectors.as_ref())
            .map(|c| (c.ready, c.desired)),
    }
}
