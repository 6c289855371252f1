//! DNS ownership and the lifecycle holes around it (docs/design.md §3.3): records this cluster
//! cannot prove are its own are never deleted, a zone that is not active takes no hostname, and
//! deletions and restarts leave no record behind.
use std::time::Duration;

use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{API_SECRET, ZONE, bindings, create_binding, create_service, records};

/// The drift interval of these tests: DNS is checked again this often.
const DRIFT: Duration = Duration::from_secs(2);

fn fast_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = DRIFT;
}

/// The cluster id this harness's operator writes: the uid of its kube-system Namespace.
async fn cluster_id(h: &Harness) -> String {
    let ns = Api::<Namespace>::all(h.admin.clone())
        .get("kube-system")
        .await
        .expect("kube-system");
    ns.metadata.uid.expect("uid")
}

/// Waits until the simulator has answered `more` further candidate reads (DNS syncs).
async fn wait_dns_rounds(h: &Harness, more: u64) {
    let start = h.sim.calls(Operation::ListDnsRecords);
    poll_until("more DNS sync rounds", WAIT, POLL, || async {
        (h.sim.calls(Operation::ListDnsRecords) >= start + more).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A Go operator CNAME at `name` for tunnel `id` and its `_managed` TXT (no marker).
fn insert_go_records(h: &Harness, zone: &str, name: &str, id: &str) {
    let cname = h
        .sim
        .insert_dns_record(
            zone,
            json!({"type": "CNAME", "name": name, "content": format!("{id}.cfargotunnel.com"), "proxied": true, "ttl": 1}),
        )
        .expect("Go CNAME");
    let txt = json!({"DnsId": cname, "TunnelName": "pre", "TunnelId": id}).to_string();
    h.sim
        .insert_dns_record(
            zone,
            json!({"type": "TXT", "name": format!("_managed.{name}"), "content": txt, "ttl": 1}),
        )
        .expect("Go TXT");
}

#[tokio::test]
async fn a_go_record_for_our_existing_tunnel_that_no_route_wants_survives_drift_and_a_restart() {
    let mut h = Harness::start_with("tr-own-go", fast_drift).await;
    let id = h
        .precreate_with_credential_file(API_SECRET, [7u8; 32])
        .await;
    insert_go_records(&h, ZONE, "other.example.com", &id);
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": id}})),
    )
    .await;
    create_binding(
        &h,
        "own",
        json!([{"name": "web", "spec": {"fqdn": "own.example.com"}}]),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let ours = crate::routes::wait_records(&h, "own.example.com", 1).await;
    let cluster = cluster_id(&h).await;
    assert_eq!(
        ours[0].comment.as_deref(),
        Some(format!("cftunnel Tunnel {}/edge cluster={cluster}", h.ns).as_str()),
        "every record this cluster writes names it"
    );
    wait_dns_rounds(&h, 3).await;
    assert_eq!(records(&h, "other.example.com").len(), 1);
    assert_eq!(records(&h, "_managed.other.example.com").len(), 1);
    h.stop_operator();
    h.start_operator();
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    wait_dns_rounds(&h, 3).await;
    let kept = records(&h, "other.example.com");
    assert_eq!(kept.len(), 1, "another cluster may serve it: {kept:?}");
    assert_eq!(kept[0].comment, None, "left as the Go operator wrote it");
    assert_eq!(records(&h, "_managed.other.example.com").len(), 1);
}

#[tokio::test]
async fn a_tunnel_whose_domain_is_in_no_zone_is_deleted_with_its_cloudflare_tunnel() {
    let h = Harness::start("tr-own-nozone").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let mut spec = h.spec(API_SECRET, json!({"newTunnel": {"name": "typo"}}));
    spec["cloudflare"]["domain"] = json!("exmaple.com");
    h.create_tunnel("typo", spec).await;
    h.wait_reason(&h.tunnels(), "typo", "ZoneNotFound").await;
    assert_eq!(h.live_tunnels().len(), 1, "the tunnel exists on Cloudflare");
    h.tunnels()
        .delete("typo", &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.tunnels(), "typo").await;
    assert!(
        h.live_tunnels().is_empty(),
        "deleted on Cloudflare with its object"
    );
}

/// Records of `away.example.net` (CNAME and TXT) in `example.net`.
fn in_net(h: &Harness) -> usize {
    h.sim
        .dns_records("example.net")
        .into_iter()
        .filter(|r| r.name.ends_with("away.example.net"))
        .count()
}

#[tokio::test]
async fn a_binding_deleted_while_cftunnel_is_stopped_leaves_no_record_in_its_other_zone() {
    let mut h = Harness::start_in_zones("tr-own-stopped", &["example.com", "example.net"]).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    create_binding(
        &h,
        "away",
        json!([{"name": "web", "spec": {"fqdn": "away.example.net"}}]),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    poll_until("CNAME and TXT in example.net", WAIT, POLL, || async {
        (in_net(&h) == 2).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let status = h.tunnels().get("edge").await.expect("edge").status;
    let zones: Vec<String> = status
        .and_then(|s| s.previous_zones)
        .unwrap_or_default()
        .into_iter()
        .map(|z| z.zone_domain)
        .collect();
    assert_eq!(
        zones,
        ["example.net"],
        "recorded before its records went there"
    );

    h.stop_operator();
    bindings(&h)
        .delete("away", &DeleteParams::default())
        .await
        .expect("delete binding");
    // Gone for good while cftunnel is down (its finalizer stripped, as a user may do).
    bindings(&h)
        .patch(
            "away",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("strip the finalizer");
    h.wait_gone(&bindings(&h), "away").await;
    h.start_operator();
    poll_until("no record left in example.net", WAIT, POLL, || async {
        (in_net(&h) == 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; example.net holds {:?}",
            h.sim.dns_records("example.net")
        )
    });
    poll_until("example.net released from status", WAIT, POLL, || async {
        let status = h.tunnels().get("edge").await.ok()?.status?;
        status.previous_zones.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn an_existing_tunnel_named_by_name_follows_the_name_to_a_recreated_tunnel() {
    let h = Harness::start_with("tr-own-rename", fast_drift).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let old = h
        .precreate_tunnel("pre", &[1u8; 32], ConfigSrc::Local)
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"existingTunnel": {"name": "pre"}})),
    )
    .await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let cname = crate::routes::wait_records(&h, "app.example.com", 1).await;
    assert_eq!(cname[0].content, format!("{old}.cfargotunnel.com"));
    // `cloudflared tunnel delete pre` and `cloudflared tunnel create pre`.
    assert!(h.sim.delete_tunnel_out_of_band(&old));
    let new = h
        .precreate_tunnel("pre", &[2u8; 32], ConfigSrc::Local)
        .await;
    poll_until(
        "the object runs the new tunnel, its record points at it",
        WAIT,
        POLL,
        || async {
            let status = h.tunnels().get("edge").await.ok()?.status?;
            let runs_new = status.tunnel_id.as_deref() == Some(new.as_str());
            let points = records(&h, "app.example.com")
                .iter()
                .any(|r| r.content == format!("{new}.cfargotunnel.com"));
            (runs_new && points).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; zone holds {:?}", h.sim.dns_records(ZONE)));
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
}

#[tokio::test]
async fn a_tunnel_whose_finalizer_was_stripped_lets_its_namespace_go() {
    let h = Harness::start("tr-own-strip").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    h.tunnels()
        .patch(
            "edge",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("strip the finalizer");
    let namespaces: Api<Namespace> = Api::all(h.admin.clone());
    namespaces
        .delete(&h.ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    poll_until("the namespace gone", WAIT, POLL, || async {
        matches!(namespaces.get_opt(&h.ns).await, Ok(None)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: the API Secret guard must be released"));
}

#[tokio::test]
async fn a_hostname_under_a_pending_zone_goes_to_the_active_parent_zone() {
    let h = Harness::start_in_zones("tr-own-pending", &["example.com", "dev.example.com"]).await;
    assert!(h.sim.set_zone_status("dev.example.com", "pending"));
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    create_binding(
        &h,
        "dev",
        json!([{"name": "web", "spec": {"fqdn": "app.dev.example.com"}}]),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    crate::routes::wait_records(&h, "app.dev.example.com", 1).await;
    assert_eq!(records(&h, "_managed.app.dev.example.com").len(), 1);
    assert!(
        h.sim.dns_records("dev.example.com").is_empty(),
        "nothing goes into the pending zone"
    );
    poll_until("a ZonePending Event", WAIT, POLL, || async {
        h.event_reasons("edge")
            .await
            .contains(&"ZonePending".to_string())
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn an_existing_tunnel_deleted_during_a_slow_dns_round_leaves_no_record_of_ours() {
    let h = Harness::start("tr-own-race").await;
    let id = h
        .precreate_with_credential_file(API_SECRET, [9u8; 32])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": id}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let creates = [Operation::BatchDnsRecords, Operation::CreateDnsRecord];
    for op in creates {
        h.sim.inject(op, Fault::latency(Duration::from_secs(6)));
    }
    let sent = || creates.iter().map(|op| h.sim.calls(*op)).sum::<u64>();
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    poll_until("a record write in flight", WAIT, POLL, || async {
        (sent() > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.tunnels(), "edge").await;
    poll_until("every write answered", WAIT, POLL, || async {
        let answered = h
            .sim
            .request_log()
            .iter()
            .filter(|r| r.operation.is_some_and(|op| creates.contains(&op)))
            .count() as u64;
        (answered == sent()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // A sync round more would have written them again by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let marker = format!("cftunnel Tunnel {}/edge", h.ns);
    let left: Vec<_> = h
        .sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.comment.as_deref().is_some_and(|c| c.starts_with(&marker)))
        .collect();
    assert!(left.is_empty(), "records with its marker: {left:?}");
    assert!(
        h.live_tunnels().iter().any(|t| t.id == id),
        "the existing tunnel stays"
    );
}
