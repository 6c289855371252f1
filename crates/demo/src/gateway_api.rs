//! Gateway API in the demo: the CRDs the chart ships installed before cftunnel starts (so it
//! serves them at once), and the summary of the example's GatewayClass, Gateway and HTTPRoute.
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, Client};

use cftunnel_testenv::{ControlPlane, TestEnvError, poll_until};
use cftunnel_types::gateway::{Gateway, GatewayClass, HTTPRoute, RouteParentStatus};
use cftunnel_types::names::CONTROLLER_NAME;

/// The Gateway API v1.6.3 standard-channel CRDs, as `charts/cftunnel/files` holds them.
const CRDS_YAML: &str = include_str!("../../../charts/cftunnel/files/gateway-api-crds.yaml");
const KINDS: [&str; 7] = [
    "gatewayclasses",
    "gateways",
    "httproutes",
    "grpcroutes",
    "referencegrants",
    "tcproutes",
    "udproutes",
];

/// The objects of `examples/30-gateway-api.yaml`.
const CLASS: &str = "cftunnel";
const NAMESPACE: &str = "demo";
const GATEWAY: &str = "public";
const ROUTE: &str = "admin";

/// Installs the CRDs (`--server-side`: the HTTPRoute CRD is too large for client-side apply's
/// annotation) and waits until they are served.
pub(crate) fn install_crds(plane: &ControlPlane) -> anyhow::Result<()> {
    let file = plane.dir().join("gateway-api-crds.yaml");
    std::fs::write(&file, CRDS_YAML).with_context(|| format!("writing {}", file.display()))?;
    let apply = plane
        .kubectl()
        .args(["apply", "--server-side", "-f"])
        .arg(&file)
        .output()?;
    anyhow::ensure!(
        apply.status.success(),
        "installing the Gateway API CRDs: {}",
        String::from_utf8_lossy(&apply.stderr)
    );
    let mut wait = plane.kubectl();
    wait.args(["wait", "--for=condition=Established", "--timeout=60s"]);
    wait.args(KINDS.map(|kind| format!("crd/{kind}.gateway.networking.k8s.io")));
    let waited = wait.output()?;
    anyhow::ensure!(
        waited.status.success(),
        "waiting for the Gateway API CRDs: {}",
        String::from_utf8_lossy(&waited.stderr)
    );
    Ok(())
}

/// Waits until cftunnel accepted the HTTPRoute on its Gateway and programmed the Gateway; the
/// route's entry of cftunnel's parent then.
pub(crate) async fn wait_accepted(client: &Client) -> Result<RouteParentStatus, TestEnvError> {
    let routes: Api<HTTPRoute> = Api::namespaced(client.clone(), NAMESPACE);
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NAMESPACE);
    poll_until(
        "HTTPRoute demo/admin to be Accepted and its Gateway Programmed",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let gateway = gateways.get_opt(GATEWAY).await.ok().flatten()?.status?;
            if !is_true(&gateway.conditions, "Programmed") {
                return None;
            }
            let parent = cftunnel_parent(routes.get_opt(ROUTE).await.ok().flatten()?)?;
            is_true(&parent.conditions, "Accepted").then_some(parent)
        },
    )
    .await
}

fn cftunnel_parent(route: HTTPRoute) -> Option<RouteParentStatus> {
    route
        .status?
        .parents
        .into_iter()
        .find(|p| p.controller_name == CONTROLLER_NAME)
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// `Accepted True (Accepted)`, or `Accepted not set`.
fn told(conditions: &[Condition], type_: &str) -> String {
    match conditions.iter().find(|c| c.type_ == type_) {
        Some(c) => format!("{type_} {} ({})", c.status, c.reason),
        None => format!("{type_} not set"),
    }
}

/// The class, the Gateway and the route's parent status.
pub(crate) async fn print(client: &Client, parent: Result<RouteParentStatus, TestEnvError>) {
    let classes: Api<GatewayClass> = Api::all(client.clone());
    if let Ok(Some(class)) = classes.get_opt(CLASS).await {
        let status = class.status.unwrap_or_default();
        println!(
            "  GatewayClass {CLASS} (controller {}): {}",
            class.spec.controller_name,
            told(&status.conditions, "Accepted")
        );
    }
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), NAMESPACE);
    if let Ok(Some(gateway)) = gateways.get_opt(GATEWAY).await {
        let status = gateway.status.unwrap_or_default();
        let address = status
            .addresses
            .first()
            .map(|a| a.value.as_str())
            .unwrap_or("none");
        let attached: i32 = status.listeners.iter().map(|l| l.attached_routes).sum();
        println!(
            "  Gateway {NAMESPACE}/{GATEWAY}: {} · address {address} · {attached} attached route(s)",
            told(&status.conditions, "Programmed")
        );
    }
    match parent {
        Ok(parent) => {
            let gateway = &parent.parent_ref;
            let namespace = gateway.namespace.as_deref().unwrap_or(NAMESPACE);
            println!(
                "  HTTPRoute {NAMESPACE}/{ROUTE}: parent Gateway {namespace}/{}: {} · {}",
                gateway.name,
                told(&parent.conditions, "Accepted"),
                told(&parent.conditions, "ResolvedRefs")
            );
        }
        Err(e) => println!("  HTTPRoute {NAMESPACE}/{ROUTE}: not accepted ({e})"),
    }
}
