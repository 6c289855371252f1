//! The demo's tunnels: waiting until each is Ready and its edge health is written, and the
//! summary of each (tunnel id, Cloudflare's word at the edge, the `Connected` condition, the
//! cloudflared pods, the routes).
use std::time::Duration;

use kube::{Api, Client};

use cftunnel_testenv::{TestEnvError, poll_until};
use cftunnel_types::{ClusterTunnel, EdgeStatus, Tunnel, TunnelStatus};

/// How long the reconcilers and the edge health task get for each step.
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(500);

/// One tunnel object of `examples/`.
pub(crate) struct Watched {
    /// How the summary names it.
    pub label: &'static str,
    /// `None` for a ClusterTunnel.
    pub namespace: Option<&'static str>,
    pub name: &'static str,
}

/// The tunnel objects `examples/` creates, in the summary's order.
pub(crate) const WATCHED: [Watched; 3] = [
    Watched {
        label: "Tunnel demo/shop",
        namespace: Some("demo"),
        name: "shop",
    },
    Watched {
        label: "ClusterTunnel edge",
        namespace: None,
        name: "edge",
    },
    Watched {
        label: "Tunnel demo/legacy",
        namespace: Some("demo"),
        name: "legacy",
    },
];

impl Watched {
    /// The object's status as stored now.
    pub async fn status(&self, client: &Client) -> Option<TunnelStatus> {
        match self.namespace {
            Some(ns) => {
                let api: Api<Tunnel> = Api::namespaced(client.clone(), ns);
                api.get_opt(self.name).await.ok().flatten()?.status
            }
            None => {
                let api: Api<ClusterTunnel> = Api::all(client.clone());
                api.get_opt(self.name).await.ok().flatten()?.status
            }
        }
    }

    /// Waits until the status satisfies `done`; the status then.
    pub async fn wait(
        &self,
        client: &Client,
        what: &str,
        done: impl Fn(&TunnelStatus) -> bool,
    ) -> Result<TunnelStatus, TestEnvError> {
        poll_until(&format!("{} {what}", self.label), WAIT, POLL, || async {
            self.status(client).await.filter(|s| done(s))
        })
        .await
    }
}

/// Ready, with the routes the examples give every tunnel listed in its status.
pub(crate) fn is_ready(status: &TunnelStatus) -> bool {
    condition(status, "Ready").is_some_and(|c| c.status == "True")
        && status.routes.as_ref().is_some_and(|r| !r.is_empty())
}

/// Edge health has written all three: `status.edge` with its connector summary,
/// `status.connectors` and the `Connected` condition.
pub(crate) fn has_edge_health(status: &TunnelStatus) -> bool {
    status.edge.as_ref().is_some_and(|e| e.connectors.is_some())
        && status.connectors.is_some()
        && condition(status, "Connected").is_some()
}

/// The edge reports the tunnel healthy, with a connector, and `Connected` says so.
pub(crate) fn is_connected(status: &TunnelStatus) -> bool {
    has_edge_health(status)
        && status.edge.as_ref().is_some_and(|e| {
            e.status == "healthy" && e.connectors.as_ref().is_some_and(|c| c.count > 0)
        })
        && condition(status, "Connected").is_some_and(|c| c.status == "True")
}

fn condition<'s>(
    status: &'s TunnelStatus,
    type_: &str,
) -> Option<&'s k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// One tunnel's part of the summary: the status waited for, or what there is after the wait
/// failed.
pub(crate) async fn print(
    client: &Client,
    tunnel: &Watched,
    waited: Result<TunnelStatus, TestEnvError>,
) {
    let what = tunnel.label;
    let status = match waited {
        Ok(s) => s,
        Err(e) => {
            println!("  {what}: {e}");
            match tunnel.status(client).await {
                Some(s) => s,
                None => return,
            }
        }
    };
    let ready = condition(&status, "Ready").map_or("not Ready", |c| match c.status.as_str() {
        "True" => "Ready",
        _ => "not Ready",
    });
    println!(
        "  {what}: {ready}, tunnel {}",
        status.tunnel_id.as_deref().unwrap_or_default()
    );
    match &status.edge {
        Some(edge) => println!("    edge: {}", edge_line(edge)),
        None => println!("    edge: not looked at yet"),
    }
    if let Some(c) = condition(&status, "Connected") {
        println!("    Connected {} ({}): {}", c.status, c.reason, c.message);
    }
    match &status.connectors {
        Some(c) => println!(
            "    cloudflared pods: {} of {} ready (no node runs pods in this demo)",
            c.ready, c.desired
        ),
        None => println!("    cloudflared pods: none run for this tunnel"),
    }
    for route in status.routes.unwrap_or_default() {
        println!(
            "    route {} → {} ({}, from {})",
            route.hostname, route.target, route.state, route.source
        );
    }
}

/// `healthy since … · 1 connector at SIM, cloudflared 2026.1.0`.
fn edge_line(edge: &EdgeStatus) -> String {
    let since = edge
        .last_transition_time
        .as_deref()
        .map(|t| format!(" since {t}"))
        .unwrap_or_default();
    let connectors = match &edge.connectors {
        None => "connectors not listed yet".to_string(),
        Some(c) if c.count == 0 => "no connector attached".to_string(),
        Some(c) => {
            let mut text = format!("{} connector(s)", c.count);
            if !c.colos.is_empty() {
                text.push_str(&format!(" at {}", c.colos.join(", ")));
            }
            if !c.versions.is_empty() {
                text.push_str(&format!(", cloudflared {}", c.versions.join(", ")));
            }
            text
        }
    };
    format!("{}{since} · {connectors}", edge.status)
}
