//! The API Secret: every way it can be wrong, fixed without touching the tunnel, and the
//! secret-in-use guard kept true by watching Secrets. Retries are set to ten minutes here, so
//! only the Secret watch can explain a prompt recovery.
use std::time::Duration;

use cftunnel::term::ControllerOptions;
use cftunnel_testenv::poll_until;
use cftunnel_types::names::{FIELD_MANAGER_SECRET_GUARD, FINALIZER_SECRET_IN_USE};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::{self, Harness, POLL, TOKEN, WAIT};

const API_SECRET: &str = "cloudflare-api";

fn slow_retries(options: &mut ControllerOptions) {
    options.retry_base = Duration::from_secs(600);
    options.retry_max = Duration::from_secs(600);
}

/// Replaces the API Secret's data (`stringData` would merge; `data` replaces the whole map).
async fn set_secret_data(h: &Harness, data: &[(&str, &str)]) {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| {
            let bytes = ByteString(v.as_bytes().to_vec());
            (k.to_string(), serde_json::to_value(bytes).expect("bytes"))
        })
        .collect();
    h.secrets()
        .patch(
            API_SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": null})),
        )
        .await
        .expect("clear secret data");
    h.secrets()
        .patch(
            API_SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": data })),
        )
        .await
        .expect("set secret data");
}

async fn wait_message(h: &Harness, reason: &str, message: &str) {
    poll_until(&format!("web: {reason}: {message}"), WAIT, POLL, || async {
        let t = h.tunnels().get_opt("web").await.ok().flatten()?;
        let ready = harness::ready(t.status.as_ref())?;
        (ready.reason == reason && ready.message == message).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

fn guarded(secret: &Secret) -> bool {
    secret
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER_SECRET_IN_USE)
}

#[tokio::test]
async fn every_broken_api_secret_is_reported_and_each_fix_is_picked_up_at_once() {
    let h = Harness::start_with("tr-keys", slow_retries).await;
    h.create_api_secret(API_SECRET, &[("unrelated", "x")]).await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let secret = format!("{}/{API_SECRET}", h.ns);
    wait_message(
        &h,
        "SecretKeyMissing",
        &format!(
            "Secret {secret} has neither key CLOUDFLARE_API_TOKEN (API token) nor key \
             CLOUDFLARE_API_KEY (global API key)"
        ),
    )
    .await;
    h.wait_event("web", "SecretKeyMissing").await;
    assert_eq!(
        h.sim.total_calls(),
        0,
        "no Cloudflare call without credentials"
    );

    // A key without the email it needs: a new message proves the edit was seen at once.
    set_secret_data(
        &h,
        &[("CLOUDFLARE_API_TOKEN", "  "), ("CLOUDFLARE_API_KEY", "k")],
    )
    .await;
    wait_message(
        &h,
        "SecretKeyMissing",
        &format!(
            "Secret {secret} holds key CLOUDFLARE_API_KEY (a global API key) but \
             spec.cloudflare.email is not set"
        ),
    )
    .await;
    assert_eq!(h.sim.total_calls(), 0);

    set_secret_data(&h, &[("CLOUDFLARE_API_TOKEN", "rejected-token")]).await;
    h.wait_reason(&h.tunnels(), "web", "CloudflareAuthFailed")
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = h.sim.total_calls();
    assert!(
        (1..=6).contains(&calls),
        "{calls} Cloudflare calls for one rejected token"
    );
    assert!(h.sim.tunnels().is_empty());

    set_secret_data(&h, &[("CLOUDFLARE_API_TOKEN", TOKEN)]).await;
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    assert_eq!(
        t.metadata.generation,
        Some(1),
        "the tunnel was never edited"
    );
    assert_eq!(h.live_tunnels().len(), 1);
}

#[tokio::test]
async fn a_removed_guard_comes_back_and_a_left_over_guard_is_released_at_start_up() {
    let mut h = Harness::start_with("tr-guard", slow_retries).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let secret = h.secrets().get(API_SECRET).await.expect("secret");
    assert!(guarded(&secret));

    // Someone strips the guard: the Secret's change re-runs the tunnel, which puts it back.
    h.secrets()
        .patch(
            API_SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("strip guard");
    poll_until("guard restored", WAIT, POLL, || async {
        guarded(&h.secrets().get(API_SECRET).await.ok()?).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // A guard left behind by a process that stopped between the finalizer and the release
    // (written, as the guard always is, by the guard's own field manager).
    h.stop_operator();
    let stale = Secret {
        metadata: ObjectMeta {
            name: Some("stale-api".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    h.secrets()
        .create(&PostParams::default(), &stale)
        .await
        .expect("stale secret");
    h.secrets()
        .patch(
            "stale-api",
            &PatchParams::apply(FIELD_MANAGER_SECRET_GUARD),
            &Patch::Apply(json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "stale-api", "finalizers": [FINALIZER_SECRET_IN_USE]},
            })),
        )
        .await
        .expect("stale guard");
    h.start_operator();
    poll_until("stale guard released", WAIT, POLL, || async {
        (!guarded(&h.secrets().get("stale-api").await.ok()?)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let secret = h.secrets().get(API_SECRET).await.expect("secret");
    assert!(guarded(&secret), "the guard of a tunnel in use stays");
}

#[tokio::test]
async fn renaming_the_api_secret_moves_the_guard_to_the_new_one() {
    let h = Harness::start("tr-secret-rename").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_api_secret("renamed", &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let guarded = |secret: Secret| {
        secret
            .finalizers()
            .contains(&FINALIZER_SECRET_IN_USE.to_string())
    };
    assert!(guarded(h.secrets().get(API_SECRET).await.expect("secret")));
    h.tunnels()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cloudflare": {"secret": "renamed"}}})),
        )
        .await
        .expect("rename the API Secret");
    poll_until("the guard moved", WAIT, POLL, || async {
        let old = guarded(h.secrets().get(API_SECRET).await.ok()?);
        let new = guarded(h.secrets().get("renamed").await.ok()?);
        (!old && new).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn tunnels_created_together_share_their_api_secret_without_a_failed_reconcile() {
    // Retries are ten minutes: a tunnel whose guard write met a conflict and failed would
    // report KubernetesError, which is what this test looks for.
    let h = Harness::start_with("tr-guard-race", slow_retries).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let names: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    futures::future::join_all(names.iter().map(|name| {
        h.create_tunnel(
            name,
            h.spec(API_SECRET, json!({"newTunnel": {"name": name}})),
        )
    }))
    .await;
    for name in &names {
        h.wait_reason(&h.tunnels(), name, "Ready").await;
    }
    let secret = h.secrets().get(API_SECRET).await.expect("api secret");
    assert!(guarded(&secret), "{:?}", secret.finalizers());
    for name in &names {
        let reasons = h.event_reasons(name).await;
        assert!(
            !reasons.iter().any(|r| r == "KubernetesError"),
            "{name}: {reasons:?}"
        );
    }
}
