//! On the real API server, after the CRDs are served: a TCPRoute on a TCP listener of a Gateway
//! of cftunnel's class is `Accepted` with its backends resolved, the listener counts it and
//! says it takes TCPRoutes, and it makes no ingress rule; a UDPRoute to a Service that does not
//! exist stays `Accepted` with `ResolvedRefs=False` `BackendNotFound`; their statuses are
//! written once; the TCPRoute's backend becomes private routes at Cloudflare owned by the
//! Gateway, which go when the Gateway does.
use cftunnel_testenv::poll_until;
use cftunnel_types::gateway::{Gateway, TCPRoute, UDPRoute};
use cftunnel_types::names::CONTROLLER_NAME;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::harness::{Harness, POLL, WAIT};
use crate::install_support::kubectl_ok;
use crate::live::{condition, create, rules};

/// cftunnel's entry of `status.parents` of a route, if written.
fn ours(status: Option<cftunnel_types::gateway::RouteStatus>) -> Vec<Condition> {
    status
        .into_iter()
        .flat_map(|s| s.parents)
        .find(|p| p.controller_name == CONTROLLER_NAME)
        .map(|p| p.conditions)
        .unwrap_or_default()
}

pub(crate) async fn a_tcp_route_on_a_tcp_listener_is_accepted_and_attached(
    h: &Harness,
    class: &str,
) {
    kubectl_ok(
        h.plane,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/tcproutes.gateway.networking.k8s.io",
            "crd/udproutes.gateway.networking.k8s.io",
        ],
        "",
    );
    let ns = h.ns.clone();
    let services: Api<Service> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &services,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pg"},
               "spec": {"ports": [{"name": "pg", "port": 5432}]}}),
    )
    .await;
    let gateways: Api<Gateway> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &gateways,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "private"},
            "spec": {"gatewayClassName": class, "listeners": [
                {"name": "pg", "port": 5432, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]},
        }),
    )
    .await;
    let tcp: Api<TCPRoute> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &tcp,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
            "metadata": {"name": "pg"},
            "spec": {"parentRefs": [{"name": "private", "sectionName": "pg"}],
                     "rules": [{"backendRefs": [{"name": "pg", "port": 5432}]}]},
        }),
    )
    .await;
    let udp: Api<UDPRoute> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &udp,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
            "metadata": {"name": "dns"},
            "spec": {"parentRefs": [{"name": "private"}],
                     "rules": [{"backendRefs": [{"name": "no-such-dns", "port": 53}]}]},
        }),
    )
    .await;

    let accepted = poll_until(
        "the TCPRoute accepted with its backend",
        WAIT,
        POLL,
        || async {
            let conditions = ours(tcp.get("pg").await.ok()?.status);
            (condition(&conditions, "Accepted") == ("True", "Accepted", "")
                && condition(&conditions, "ResolvedRefs").0 == "True")
                .then_some(())
        },
    )
    .await;
    if let Err(e) = accepted {
        let now = tcp.get("pg").await.ok().and_then(|r| r.status);
        panic!("{e}; now {now:?}");
    }
    let missing = poll_until(
        "the UDPRoute's missing backend told",
        WAIT,
        POLL,
        || async {
            let conditions = ours(udp.get("dns").await.ok()?.status);
            let (status, reason, message) = condition(&conditions, "ResolvedRefs");
            (condition(&conditions, "Accepted").0 == "True"
                && (status, reason) == ("False", "BackendNotFound"))
                .then(|| message.to_string())
        },
    )
    .await;
    match missing {
        Ok(message) => assert!(
            message.contains(&format!("Service {ns}/no-such-dns does not exist")),
            "{message}"
        ),
        Err(e) => {
            let now = udp.get("dns").await.ok().and_then(|r| r.status);
            panic!("{e}; now {now:?}");
        }
    }
    let attached = poll_until(
        "the TCP listener counting its route",
        WAIT,
        POLL,
        || async {
            let status = gateways.get("private").await.ok()?.status?;
            let pg = status.listeners.iter().find(|l| l.name == "pg")?;
            let dns = status.listeners.iter().find(|l| l.name == "dns")?;
            let kinds: Vec<&str> = pg.supported_kinds.iter().map(|k| k.kind.as_str()).collect();
            (pg.attached_routes == 1
                && dns.attached_routes == 1
                && kinds == ["TCPRoute"]
                && condition(&pg.conditions, "Accepted").0 == "True"
                && condition(&status.conditions, "Programmed").0 == "True")
                .then_some(())
        },
    )
    .await;
    if let Err(e) = attached {
        let now = gateways.get("private").await.ok().and_then(|g| g.status);
        panic!("{e}; now {now:?}");
    }
    // No ingress rule: a TCPRoute's backends are private routes, not public hostnames.
    let rules = rules(h).await;
    assert!(
        !rules.iter().any(|(_, service)| service.contains("pg.")),
        "{rules:?}"
    );

    // Their statuses are written once: nothing rewrites them while nothing changes.
    let versions = || async {
        (
            tcp.get("pg").await.expect("TCPRoute").resource_version(),
            udp.get("dns").await.expect("UDPRoute").resource_version(),
            gateways
                .get("private")
                .await
                .expect("Gateway")
                .resource_version(),
        )
    };
    let before = versions().await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        before,
        versions().await,
        "a status was written again with nothing changed"
    );

    // Its backend becomes private routes at Cloudflare, owned by the Gateway: the Service's
    // cluster IP and its cluster DNS name, through the Gateway's tunnel.
    let ip = services
        .get("pg")
        .await
        .expect("Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("cluster IP");
    let cidr = format!("{ip}/32");
    let hostname = format!("pg.{ns}.svc.cluster.local");
    let made = poll_until("the TCPRoute's private routes", WAIT, POLL, || async {
        let ip_route = h
            .sim
            .ip_routes()
            .into_iter()
            .find(|r| r.deleted_at.is_none() && r.network == cidr)?;
        let host_route = h
            .sim
            .hostname_routes()
            .into_iter()
            .find(|r| r.deleted_at.is_none() && r.hostname == hostname)?;
        Some((ip_route, host_route))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?} {:?}", h.sim.ip_routes(), h.sim.hostname_routes()));
    for comment in [&made.0.comment, &made.1.comment] {
        assert!(comment.starts_with("cftunnel:"), "{comment}");
        assert!(
            comment.contains(&format!("{ns}/private")),
            "owned by the Gateway: {comment}"
        );
    }
    assert_eq!(made.0.tunnel_id, made.1.tunnel_id);
    assert!(
        !h.sim
            .hostname_routes()
            .iter()
            .any(|r| r.hostname.contains("no-such-dns")),
        "no route for a backend that does not exist"
    );

    // The Gateway deleted: its routes go with it.
    gateways
        .delete("private", &Default::default())
        .await
        .expect("delete Gateway");
    poll_until("the Gateway's private routes gone", WAIT, POLL, || async {
        let left = h
            .sim
            .ip_routes()
            .into_iter()
            .filter(|r| r.deleted_at.is_none() && r.network == cidr)
            .count()
            + h.sim
                .hostname_routes()
                .into_iter()
                .filter(|r| r.deleted_at.is_none() && r.hostname == hostname)
                .count();
        (left == 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
