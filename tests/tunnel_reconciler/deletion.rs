//! Deletion finishes in bounded time, whatever the pods, the status or Cloudflare do.
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel::tunnel_reconciler::PENDING_SECRET_KEY;
use cftunnel_policy::render::config::CREDENTIALS_KEY;
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use cftunnel_types::names::ANNOTATION_ABANDON_CLEANUP;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::API_SECRET;
use crate::harness::{Harness, POLL, TOKEN, WAIT, ready_message};
use crate::routes::{ZONE, create_service, records, wait_records};

const STUCK: &str = "cftunnel-test/stuck";

/// Creates the API Secret and a newTunnel `web`; returns its tunnel id once Ready.
async fn ready_web_tunnel(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    t.status.and_then(|s| s.tunnel_id).expect("id")
}

async fn delete_web(h: &Harness) {
    h.tunnels()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
}

/// A Ready Tunnel `web` and the names of its 2 cloudflared pods.
async fn ready_tunnel_with_pods(h: &Harness) -> (String, Vec<String>) {
    let id = ready_web_tunnel(h).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let names = poll_until("2 cloudflared pods", WAIT, POLL, || async {
        let list = pods
            .list(&ListParams::default().labels("cfargotunnel.com/tunnel=web"))
            .await
            .ok()?;
        (list.items.len() == 2).then(|| list.items.iter().map(|p| p.name_any()).collect())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    (id, names)
}

async fn wait_deleted_everywhere(h: &Harness, id: &str) {
    h.wait_gone(&h.tunnels(), "web").await;
    poll_until("tunnel deleted on Cloudflare", WAIT, POLL, || async {
        h.sim
            .tunnels()
            .iter()
            .any(|t| t.id == id && t.deleted_at.is_some())
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.live_tunnels().len(), 0);
}

#[tokio::test]
async fn a_failed_pod_never_holds_a_tunnel_deletion() {
    // The bound is far away: only the phase can let this deletion finish.
    let h = Harness::start_with("tr-del-failed", |o| {
        o.deletion_pod_wait = Duration::from_secs(3600)
    })
    .await;
    let (id, names) = ready_tunnel_with_pods(&h).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    // As a kubelet reports an evicted pod; the ReplicaSet leaves Failed pods in place.
    pods.patch_status(
        &names[0],
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed", "reason": "Evicted"}})),
    )
    .await
    .expect("mark the pod failed");
    delete_web(&h).await;
    wait_deleted_everywhere(&h, &id).await;
}

#[tokio::test]
async fn a_pod_stuck_terminating_holds_a_deletion_only_for_the_bound_and_the_wait_is_explained() {
    let h = Harness::start_with("tr-del-stuck", |o| {
        o.deletion_pod_wait = Duration::from_secs(20)
    })
    .await;
    let (id, names) = ready_tunnel_with_pods(&h).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    // A finalizer nobody removes: the pod stays Terminating, as on a lost node.
    pods.patch(
        &names[0],
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [STUCK]}})),
    )
    .await
    .expect("hold the pod");
    delete_web(&h).await;
    let waiting = h.wait_reason(&h.tunnels(), "web", "Deleting").await;
    let message = ready_message(waiting.status.as_ref());
    assert!(
        message.contains(&names[0]) && message.contains("--deletion-pod-wait"),
        "{message}"
    );
    assert!(
        h.live_tunnels().iter().any(|t| t.id == id),
        "not deleted while its pod may run"
    );
    wait_deleted_everywhere(&h, &id).await;
    let pod = pods
        .get(&names[0])
        .await
        .expect("the stuck pod is still there");
    assert!(pod.metadata.deletion_timestamp.is_some());
    pods.patch(
        &names[0],
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the pod");
}

/// A Ready Tunnel `web` whose labelled Service `app` has a CNAME; returns the tunnel id.
async fn ready_tunnel_with_record(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(
        h,
        "app",
        80,
        json!({"cfargotunnel.com/expose-tunnel": "web"}),
        json!({"cfargotunnel.com/hostname": "app.example.com"}),
    )
    .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("id");
    let cname = wait_records(h, "app.example.com", 1).await;
    assert_eq!(cname[0].content, format!("{id}.cfargotunnel.com"));
    id
}

/// Names of the CNAMEs pointing at tunnel `id`.
fn records_of(h: &Harness, id: &str) -> Vec<String> {
    h.sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.record_type == "CNAME" && r.content.contains(id))
        .map(|r| r.name)
        .collect()
}

#[tokio::test]
async fn a_tunnel_whose_id_never_reached_status_leaves_nothing_on_cloudflare_after_deletion() {
    let mut h = Harness::start("tr-del-noid").await;
    let id = ready_tunnel_with_record(&h).await;
    h.stop_operator();
    // As after a create whose answer or status write was lost: the managed Secret holds only
    // the pending secret and status holds no id, account or zone.
    let managed = h.secrets().get("web").await.expect("managed secret");
    let file = managed
        .data
        .as_ref()
        .and_then(|d| d.get(CREDENTIALS_KEY))
        .map(|b| b.0.clone())
        .expect("credentials.json");
    let file: serde_json::Value = serde_json::from_slice(&file).expect("credentials json");
    let secret_b64 = file["TunnelSecret"]
        .as_str()
        .expect("TunnelSecret")
        .to_string();
    h.secrets()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {
                CREDENTIALS_KEY: null,
                PENDING_SECRET_KEY: STANDARD.encode(secret_b64.as_bytes()),
            }})),
        )
        .await
        .expect("rewind the managed Secret");
    h.tunnels()
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "tunnelId": null, "accountId": null, "tunnelName": null,
                "zoneId": null, "zoneDomain": null,
            }})),
        )
        .await
        .expect("clear the status");
    delete_web(&h).await;
    h.start_operator();
    h.wait_gone(&h.tunnels(), "web").await;
    assert!(
        h.live_tunnels().is_empty(),
        "tunnel {id} left on Cloudflare"
    );
    assert_eq!(records_of(&h, &id), Vec::<String>::new());
    assert!(records(&h, "_managed.app.example.com").is_empty());
}

#[tokio::test]
async fn a_refused_clean_up_is_reported_and_the_abandon_annotation_lets_deletion_finish() {
    let h = Harness::start("tr-del-refused").await;
    let id = ready_tunnel_with_record(&h).await;
    // The token lost its DNS rights: every DNS read is refused from now on.
    h.sim
        .inject(Operation::ListDnsRecords, Fault::fail_next(1_000_000, 403));
    delete_web(&h).await;
    let blocked = h
        .wait_reason(&h.tunnels(), "web", "CloudflareAuthFailed")
        .await;
    let message = ready_message(blocked.status.as_ref());
    assert!(
        message.contains("deletion is blocked") && message.contains(ANNOTATION_ABANDON_CLEANUP),
        "{message}"
    );
    assert!(h.live_tunnels().iter().any(|t| t.id == id));
    h.tunnels()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {ANNOTATION_ABANDON_CLEANUP: "true"}}}),
            ),
        )
        .await
        .expect("annotate");
    h.wait_gone(&h.tunnels(), "web").await;
    h.wait_event("web", "CleanupAbandoned").await;
    // Only what Cloudflare refused is left: the tunnel itself could still be deleted.
    assert!(h.live_tunnels().is_empty());
    assert_eq!(records_of(&h, &id), vec!["app.example.com".to_string()]);
}

#[tokio::test]
async fn deleting_an_existing_tunnel_object_removes_its_records_and_keeps_the_tunnel() {
    let h = Harness::start("tr-del-existing").await;
    let id = h
        .precreate_with_credential_file(API_SECRET, [5u8; 32])
        .await;
    create_service(
        &h,
        "app",
        80,
        json!({"cfargotunnel.com/expose-tunnel": "web"}),
        json!({"cfargotunnel.com/hostname": "app.example.com"}),
    )
    .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": id}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    wait_records(&h, "app.example.com", 1).await;
    delete_web(&h).await;
    h.wait_gone(&h.tunnels(), "web").await;
    assert_eq!(records_of(&h, &id), Vec::<String>::new());
    assert!(records(&h, "_managed.app.example.com").is_empty());
    assert!(
        h.live_tunnels().iter().any(|t| t.id == id),
        "an existing tunnel stays on Cloudflare"
    );
    assert_eq!(h.sim.calls(Operation::DeleteTunnel), 0);
}

/// The calls that create DNS records: a batch, or one record (when the batch call is not used).
const DNS_CREATES: [Operation; 2] = [Operation::BatchDnsRecords, Operation::CreateDnsRecord];

fn dns_create_calls(h: &Harness) -> u64 {
    DNS_CREATES.iter().map(|op| h.sim.calls(*op)).sum()
}

#[tokio::test]
async fn a_tunnel_deleted_while_a_sync_of_its_zone_is_writing_leaves_no_record() {
    let h = Harness::start("tr-del-inflight").await;
    let id = ready_web_tunnel(&h).await;
    // Writes are slow (batched or single): the route sync is still writing when the deletion
    // starts.
    for op in DNS_CREATES {
        h.sim.inject(op, Fault::latency(Duration::from_secs(8)));
    }
    create_service(
        &h,
        "app",
        80,
        json!({"cfargotunnel.com/expose-tunnel": "web"}),
        json!({"cfargotunnel.com/hostname": "app.example.com"}),
    )
    .await;
    poll_until("a record create in flight", WAIT, POLL, || async {
        (dns_create_calls(&h) > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    delete_web(&h).await;
    h.wait_gone(&h.tunnels(), "web").await;
    // Every create that was sent has been answered.
    poll_until("no create in flight", WAIT, POLL, || async {
        let answered = h
            .sim
            .request_log()
            .iter()
            .filter(|r| r.operation.is_some_and(|op| DNS_CREATES.contains(&op)))
            .count() as u64;
        (answered == dns_create_calls(&h)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records_of(&h, &id), Vec::<String>::new());
    assert!(records(&h, "_managed.app.example.com").is_empty());
    assert!(h.live_tunnels().is_empty());
}
