//! Objects that go: their memory goes with them, and their tunnel id is handed over.
use std::time::Duration;

use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::caches::WatchScope;
use crate::scope::Scope;
use crate::term::{Context, ControllerOptions};
use crate::tunnel_reconciler::receiver_stream;

const ID: &str = "6ff42ae2-765d-4adf-8112-31c55c1551ef";

fn tunnel(name: &str, created: &str) -> Tunnel {
    serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "Tunnel",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "creationTimestamp": created},
        "spec": {
            "cloudflare": {"domain": "example.com", "secret": "s", "accountId": "0123456789abcdef0123456789abcdef"},
            "existingTunnel": {"id": ID},
        },
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn an_object_that_leaves_the_store_takes_its_memory_along_and_hands_its_tunnel_id_over() {
    // Nothing listens there: the context is never asked to call the API server.
    let config = kube::Config::new(
        "http://127.0.0.1:9"
            .parse()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}"));
    let options = ControllerOptions {
        drift_interval: Duration::from_secs(600),
        ..ControllerOptions::default()
    };
    let term = Arc::new(Context::new(
        client,
        options,
        WatchScope::default(),
        Scope::root("test"),
        crate::metrics::Metrics::process(),
        cftunnel_cloudflare::RateLimiters::new(),
        cftunnel_policy::dns::ClusterId::new("test-cluster").expect("cluster id"),
    ));
    let ctx = Arc::new(TunnelContext::new(
        term,
        crate::term::route_index::route_index().1,
        Default::default(),
        Default::default(),
        Default::default(),
        Default::default(),
    ));
    let (tunnels, mut writer) = reflector::store::<Tunnel>();
    let (clusters, _) = reflector::store::<ClusterTunnel>();
    let (old, young) = (
        tunnel("old", "2026-01-01T00:00:00Z"),
        tunnel("young", "2026-02-01T00:00:00Z"),
    );
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitApply(old.clone()));
    writer.apply_watcher_event(&Event::InitApply(young.clone()));
    writer.apply_watcher_event(&Event::InitDone);
    let _ = ctx.claims.set(claims::Claims {
        tunnels: tunnels.clone(),
        cluster_tunnels: clusters.clone(),
    });
    assert_eq!(
        ctx.claims
            .get()
            .and_then(|c| c.ahead_of(&young, ID))
            .as_deref(),
        Some("Tunnel ns/old")
    );
    for t in [&old, &young] {
        ctx.next_backoff(&t.display());
        assert!(
            !ctx.drift_due(&t.uid().unwrap_or_default()),
            "first sight schedules"
        );
    }
    assert_eq!(ctx.remembered(), (2, 2));

    let (changes_tx, changes_rx) = mpsc::unbounded_channel::<Arc<Tunnel>>();
    let (tunnel_tx, mut rerun_rx) = mpsc::unbounded_channel();
    let (cluster_tx, _cluster_rx) = mpsc::unbounded_channel();
    let following = tokio::spawn(follow(
        ctx.clone(),
        receiver_stream(changes_rx),
        futures::stream::pending(),
        (tunnels.clone(), clusters),
        Rerun {
            tunnels: tunnel_tx,
            cluster_tunnels: cluster_tx,
        },
    ));
    // A live object claiming the id: those ranking after it are re-run (they must stop).
    let _ = changes_tx.send(Arc::new(old.clone()));
    let rerun = tokio::time::timeout(Duration::from_secs(5), rerun_rx.recv())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rerun, Some(ObjectRef::new("young").within("ns")));
    // The last in line changed: nobody ranks after it, nothing forgotten.
    let _ = changes_tx.send(Arc::new(young.clone()));
    // The watch deletes `old` from the store, then fans the event out.
    writer.apply_watcher_event(&Event::Delete(old.clone()));
    let _ = changes_tx.send(Arc::new(old.clone()));
    let rerun = tokio::time::timeout(Duration::from_secs(5), rerun_rx.recv())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rerun,
        Some(ObjectRef::new("young").within("ns")),
        "the next claimant runs now"
    );
    assert_eq!(
        ctx.remembered(),
        (1, 1),
        "only the live object is remembered"
    );
    assert_eq!(ctx.claims.get().and_then(|c| c.ahead_of(&young, ID)), None);
    assert!(rerun_rx.try_recv().is_err(), "re-run once");
    following.abort();
}

#[tokio::test]
async fn terms_of_one_process_share_its_rate_limiters_so_a_pause_outlives_a_reelection() {
    let config = kube::Config::new(
        "http://127.0.0.1:9"
            .parse()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}"));
    let process = cftunnel_cloudflare::RateLimiters::new();
    let term = |n: &'static str| {
        Context::new(
            client.clone(),
            ControllerOptions::default(),
            WatchScope::default(),
            Scope::root(n),
            crate::metrics::Metrics::process(),
            process.clone(),
            cftunnel_policy::dns::ClusterId::new("test-cluster").expect("cluster id"),
        )
    };
    let (first, second) = (term("first"), term("second"));
    let credentials = cftunnel_cloudflare::Credentials::ApiToken("t".into());
    let rate = cftunnel_cloudflare::Pace::from(cftunnel_cloudflare::RateLimit::default());
    let paused = first.cloudflare.limiters().limiter(&credentials, rate);
    let next = second.cloudflare.limiters().limiter(&credentials, rate);
    assert!(
        Arc::ptr_eq(&paused, &next),
        "the next term's client waits out the 429 pause of the last one"
    );
}
