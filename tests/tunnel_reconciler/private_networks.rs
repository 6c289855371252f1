//! Private networks end to end on the real API server and the simulator: a NetworkRoute's
//! CIDR, Service address and hostname become routes through its tunnel, each marked with this
//! cluster's id; someone else's route is left alone and reported; a Service recreated moves
//! its route; a route deleted behind cftunnel's back comes back at the drift check; deleting
//! the NetworkRoute removes exactly its routes. And a VirtualNetwork cftunnel makes holds its
//! routes and goes once none uses it.
use std::time::Duration;

use cftunnel_testenv::poll_until;
use cftunnel_types::network::{NetworkRoute, VirtualNetwork};
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{API_SECRET, create_service};

const RUN_LABEL: &str = "cftunnel-test/run";

fn with_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = Duration::from_secs(4);
}

fn routes_api(h: &Harness) -> Api<NetworkRoute> {
    Api::namespaced(h.admin.clone(), &h.ns)
}

fn networks_api(h: &Harness) -> Api<VirtualNetwork> {
    Api::all(h.admin.clone())
}

async fn ready_tunnel(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    tunnel
        .status
        .and_then(|s| s.tunnel_id)
        .expect("the tunnel's id")
}

async fn create_route(h: &Harness, name: &str, spec: Value) {
    let route: NetworkRoute = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "NetworkRoute",
        "metadata": {"name": name, "labels": {RUN_LABEL: h.ns}},
        "spec": spec,
    }))
    .expect("NetworkRoute json");
    routes_api(h)
        .create(&PostParams::default(), &route)
        .await
        .expect("create NetworkRoute");
}

/// Waits until the NetworkRoute's `Programmed` condition has `status` and `reason`.
async fn wait_programmed(h: &Harness, name: &str, status: &str, reason: &str) -> NetworkRoute {
    let api = routes_api(h);
    poll_until(
        &format!("NetworkRoute {name} Programmed {status} ({reason})"),
        WAIT,
        POLL,
        || async {
            let route = api.get(name).await.ok()?;
            let programmed = route
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "Programmed")?
                .clone();
            (programmed.status == status && programmed.reason == reason).then_some(route)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn cluster_ip(h: &Harness, name: &str) -> String {
    let api: Api<Service> = Api::namespaced(h.admin.clone(), &h.ns);
    api.get(name)
        .await
        .expect("the Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP")
}

/// The simulator's live IP routes through `tunnel`, by network.
fn ip_routes(h: &Harness, tunnel: &str) -> Vec<cftunnel_sim::SimIpRoute> {
    let mut routes: Vec<_> = h
        .sim
        .ip_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none() && r.tunnel_id == tunnel)
        .collect();
    routes.sort_by(|a, b| a.network.cmp(&b.network));
    routes
}

async fn wait_ip_routes(
    h: &Harness,
    tunnel: &str,
    networks: &[&str],
) -> Vec<cftunnel_sim::SimIpRoute> {
    let mut want: Vec<String> = networks.iter().map(|n| n.to_string()).collect();
    want.sort();
    poll_until(&format!("IP routes {want:?}"), WAIT, POLL, || async {
        let routes = ip_routes(h, tunnel);
        let have: Vec<String> = routes.iter().map(|r| r.network.clone()).collect();
        (have == want).then_some(routes)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_network_route_is_routed_with_markers_followed_kept_and_removed_exactly() {
    let h = Harness::start_with("tr-private", with_drift).await;
    let tunnel = ready_tunnel(&h).await;
    create_service(&h, "db", 5432, json!({}), json!({})).await;
    let ip = cluster_ip(&h, "db").await;
    // Someone else's route, in the same account, through another tunnel.
    let theirs = h
        .sim
        .put_ip_route(
            json!({"network": "10.30.0.0/24", "tunnel_id": tunnel, "comment": "made by hand"}),
        )
        .expect("their route");
    create_route(
        &h,
        "db",
        json!({
            "tunnelRef": {"name": "edge"},
            "cidrs": ["10.20.0.0/24"],
            "services": [{"name": "db"}],
            "hostnames": ["db.shop.svc.cluster.local"],
            "comment": "reporting database",
        }),
    )
    .await;
    let route = wait_programmed(&h, "db", "True", "Programmed").await;
    let service_route = format!("{ip}/32");
    let made = wait_ip_routes(
        &h,
        &tunnel,
        &["10.20.0.0/24", &service_route, "10.30.0.0/24"],
    )
    .await;
    let default = h
        .sim
        .default_virtual_network_id()
        .expect("a default network");
    for r in made.iter().filter(|r| r.id != theirs.id) {
        assert_eq!(r.virtual_network_id, default, "{r:?}");
        assert!(r.comment.starts_with("cftunnel:"), "marked: {r:?}");
        assert!(r.comment.contains("reporting database"), "{r:?}");
        assert!(r.comment.chars().count() <= 100, "{r:?}");
    }
    let hostnames: Vec<_> = h
        .sim
        .hostname_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none())
        .collect();
    assert_eq!(hostnames.len(), 1, "{hostnames:?}");
    assert_eq!(hostnames[0].hostname, "db.shop.svc.cluster.local");
    assert_eq!(hostnames[0].tunnel_id, tunnel);
    assert!(hostnames[0].comment.starts_with("cftunnel:"));
    let entries = route.status.and_then(|s| s.routes).unwrap_or_default();
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|e| e.state == "Programmed" && e.id.is_some()),
        "{entries:?}"
    );
    assert!(
        entries.iter().any(|e| e.kind == "service"
            && e.service.as_deref() == Some("db")
            && e.route == service_route),
        "{entries:?}"
    );

    // Their CIDR asked for too: left alone, and told.
    routes_api(&h)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cidrs": ["10.20.0.0/24", "10.30.0.0/24"]}})),
        )
        .await
        .expect("patch");
    let conflicted = wait_programmed(&h, "db", "False", "Conflict").await;
    let message = conflicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Programmed")
        .map(|c| c.message)
        .unwrap_or_default();
    assert!(message.contains(&theirs.id), "{message}");
    let kept = ip_routes(&h, &tunnel)
        .into_iter()
        .find(|r| r.id == theirs.id)
        .expect("their route is still there");
    assert_eq!(kept.comment, "made by hand");

    // A route of ours deleted behind cftunnel's back comes back at the drift check.
    let ours = made
        .iter()
        .find(|r| r.network == "10.20.0.0/24")
        .expect("our CIDR route");
    assert!(h.sim.delete_route_out_of_band(&ours.id));
    wait_ip_routes(
        &h,
        &tunnel,
        &["10.20.0.0/24", &service_route, "10.30.0.0/24"],
    )
    .await;

    // The Service recreated with another address: its route follows. (The API server picks
    // addresses at random; recreated until it picks another one.)
    let services: Api<Service> = Api::namespaced(h.admin.clone(), &h.ns);
    let mut moved = ip.clone();
    for _ in 0..5 {
        services
            .delete("db", &DeleteParams::default())
            .await
            .expect("delete Service");
        poll_until("the Service gone", WAIT, POLL, || async {
            services.get_opt("db").await.ok()?.is_none().then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        create_service(&h, "db", 5432, json!({}), json!({})).await;
        moved = cluster_ip(&h, "db").await;
        if moved != ip {
            break;
        }
    }
    assert_ne!(moved, ip, "the Service got another address");
    let moved_route = format!("{moved}/32");
    wait_ip_routes(&h, &tunnel, &["10.20.0.0/24", &moved_route, "10.30.0.0/24"]).await;

    // Deleting the NetworkRoute removes exactly its routes.
    routes_api(&h)
        .delete("db", &DeleteParams::default())
        .await
        .expect("delete NetworkRoute");
    poll_until("the NetworkRoute gone", WAIT, POLL, || async {
        routes_api(&h)
            .get_opt("db")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let left = ip_routes(&h, &tunnel);
    assert_eq!(
        left.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [theirs.id.as_str()],
        "only their route is left: {left:?}"
    );
    assert!(
        h.sim
            .hostname_routes()
            .iter()
            .all(|r| r.deleted_at.is_some()),
        "the hostname route is gone"
    );
}

#[tokio::test]
async fn a_virtual_network_is_made_holds_its_routes_and_goes_once_unused() {
    let h = Harness::start("tr-vnet").await;
    let tunnel = ready_tunnel(&h).await;
    // The network's credentials live in the cluster-resource namespace (the harness's).
    let account = h.sim.account_id();
    let network: VirtualNetwork = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "VirtualNetwork",
        "metadata": {"name": format!("{}-prod", h.ns), "labels": {RUN_LABEL: h.ns}},
        "spec": {"name": format!("{}-prod", h.ns), "comment": "production",
            "cloudflare": {"accountId": account, "secret": API_SECRET}},
    }))
    .expect("VirtualNetwork json");
    let name = network.metadata.name.clone().unwrap_or_default();
    networks_api(&h)
        .create(&PostParams::default(), &network)
        .await
        .expect("create VirtualNetwork");
    let id = poll_until("the network's id", WAIT, POLL, || async {
        networks_api(&h).get(&name).await.ok()?.status?.id
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let at_cloudflare = h
        .sim
        .virtual_networks()
        .into_iter()
        .find(|n| n.id == id)
        .expect("made at Cloudflare");
    assert!(
        at_cloudflare.comment.starts_with("cftunnel:"),
        "{at_cloudflare:?}"
    );
    assert!(!at_cloudflare.is_default_network);

    create_route(
        &h,
        "lan",
        json!({"tunnelRef": {"name": "edge"}, "virtualNetworkRef": {"name": name},
            "cidrs": ["10.96.0.0/12"]}),
    )
    .await;
    wait_programmed(&h, "lan", "True", "Programmed").await;
    let routes = wait_ip_routes(&h, &tunnel, &["10.96.0.0/12"]).await;
    assert_eq!(routes[0].virtual_network_id, id);

    // Deleting the network waits for its route, and says why.
    networks_api(&h)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete VirtualNetwork");
    poll_until("the network says it is in use", WAIT, POLL, || async {
        let n = networks_api(&h).get(&name).await.ok()?;
        let c = n
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Programmed")?;
        (c.reason == "InUse" && c.message.contains("lan")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        h.sim
            .virtual_networks()
            .iter()
            .any(|n| n.id == id && n.deleted_at.is_none())
    );

    routes_api(&h)
        .delete("lan", &DeleteParams::default())
        .await
        .expect("delete NetworkRoute");
    poll_until("the network gone", WAIT, POLL, || async {
        networks_api(&h)
            .get_opt(&name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(ip_routes(&h, &tunnel).is_empty());
    assert!(
        h.sim
            .virtual_networks()
            .iter()
            .all(|n| n.id != id || n.deleted_at.is_some()),
        "deleted at Cloudflare"
    );
}

/// Live routes of either kind whose comment carries a cftunnel marker.
fn marked_routes(h: &Harness) -> usize {
    let ip = h
        .sim
        .ip_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none() && r.comment.starts_with("cftunnel:"))
        .count();
    let hostnames = h
        .sim
        .hostname_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none() && r.comment.starts_with("cftunnel:"))
        .count();
    ip + hostnames
}

async fn wait_marked(h: &Harness, count: usize) {
    poll_until(&format!("{count} marked routes"), WAIT, POLL, || async {
        (marked_routes(h) == count).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {} left", marked_routes(h)));
}

#[tokio::test]
async fn deleting_its_tunnel_object_removes_its_routes_and_the_route_says_why() {
    let h = Harness::start("tr-private-tunnel").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    // An existing tunnel: deleting its object leaves it at Cloudflare, so its routes go only
    // because cftunnel deletes them.
    let id = h
        .precreate_tunnel(
            "kept",
            &[5u8; 32],
            cftunnel_cloudflare::ConfigSrc::Cloudflare,
        )
        .await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": id}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    create_route(
        &h,
        "lan",
        json!({"tunnelRef": {"name": "edge"}, "cidrs": ["10.40.0.0/24"],
            "hostnames": ["lan.corp.internal"]}),
    )
    .await;
    wait_programmed(&h, "lan", "True", "Programmed").await;
    assert_eq!(marked_routes(&h), 2);
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete the Tunnel");
    wait_marked(&h, 0).await;
    assert!(
        h.live_tunnels().iter().any(|t| t.id == id),
        "the existing tunnel stays at Cloudflare"
    );
    let api = routes_api(&h);
    poll_until("Accepted False (TunnelNotFound)", WAIT, POLL, || async {
        let route = api.get("lan").await.ok()?;
        let accepted = route
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Accepted")?;
        (accepted.status == "False" && accepted.reason == "TunnelNotFound").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn deleting_the_namespace_removes_its_routes() {
    let h = Harness::start("tr-private-ns").await;
    ready_tunnel(&h).await;
    create_route(
        &h,
        "lan",
        json!({"tunnelRef": {"name": "edge"}, "cidrs": ["10.41.0.0/24"],
            "hostnames": ["ns.corp.internal"]}),
    )
    .await;
    wait_programmed(&h, "lan", "True", "Programmed").await;
    assert_eq!(marked_routes(&h), 2);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(h.admin.clone());
    namespaces
        .delete(&h.ns, &DeleteParams::default())
        .await
        .expect("delete the namespace");
    wait_marked(&h, 0).await;
    poll_until("the NetworkRoute gone", WAIT, POLL, || async {
        routes_api(&h)
            .get_opt("lan")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The private-network operations the simulator answered since `from` (an index into its log).
fn private_calls(h: &Harness, from: usize) -> Vec<cftunnel_sim::Operation> {
    h.sim
        .request_log()
        .into_iter()
        .skip(from)
        .filter_map(|r| r.operation)
        .filter(|op| op.is_networks() || op.is_hostname_routes())
        .collect()
}

#[tokio::test]
async fn a_restart_only_lists_and_the_steady_state_makes_no_call() {
    let mut h = Harness::start("tr-private-restart").await;
    ready_tunnel(&h).await;
    create_service(&h, "db", 5432, json!({}), json!({})).await;
    create_route(
        &h,
        "db",
        json!({"tunnelRef": {"name": "edge"}, "cidrs": ["10.60.0.0/24"],
            "services": [{"name": "db"}], "hostnames": ["db.restart.internal"]}),
    )
    .await;
    wait_programmed(&h, "db", "True", "Programmed").await;
    h.stop_operator();
    let from = h.sim.request_log().len();
    h.start_operator();
    // The restarted operator lists the account once (IP routes, hostname routes, the default
    // network) and finds everything in place.
    poll_until(
        "the account listed after the restart",
        WAIT,
        POLL,
        || async { (private_calls(&h, from).len() >= 3).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let calls = private_calls(&h, from);
    use cftunnel_sim::Operation::{ListHostnameRoutes, ListIpRoutes, ListVirtualNetworks};
    assert_eq!(
        calls,
        [ListIpRoutes, ListHostnameRoutes, ListVirtualNetworks],
        "a restart only lists, once"
    );
    // Steady state (drift checks off here): no call at all.
    let settled = h.sim.request_log().len();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(private_calls(&h, settled).is_empty());
    assert!(
        routes_api(&h)
            .get("db")
            .await
            .expect("the route")
            .status
            .and_then(|s| s.routes)
            .unwrap_or_default()
            .iter()
            .all(|r| r.state == "Programmed"),
        "still programmed after the restart"
    );
}
