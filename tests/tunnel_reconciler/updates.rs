//! Spec edits on a Ready tunnel, existingTunnel credentials, a global API key and an account
//! named instead of identified: what is rendered, what rolls the pods, and what Cloudflare sees.
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::{Operation, SimConfig, Simulator};
use cftunnel_testenv::poll_until;
use cftunnel_types::Tunnel;
use cftunnel_types::names::{ANNOTATION_CHECKSUM, FINALIZER};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::harness::{self, Harness, POLL, TOKEN, WAIT};

const API_SECRET: &str = "cloudflare-api";

/// What a spec edit may move: the rendered config, the rollout trigger and the Deployment.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    config: Value,
    config_map_version: Option<String>,
    secret_version: Option<String>,
    deployment_generation: Option<i64>,
    checksum: Option<String>,
    args: Vec<String>,
    replicas: Option<i32>,
    env: Vec<(String, Option<String>)>,
}

async fn snapshot(h: &Harness, name: &str) -> Snapshot {
    let cm = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get(name)
        .await
        .expect("configmap");
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .cloned()
        .expect("config.yaml");
    let config: Value = serde_yaml_ng::from_str(&text).expect("config.yaml is YAML");
    let secret = h.secrets().get(name).await.expect("managed secret");
    let d = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .get(name)
        .await
        .expect("deployment");
    let spec = d.spec.clone();
    let checksum = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_CHECKSUM))
        .cloned();
    let container = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "cloudflared"))
        .cloned()
        .expect("cloudflared container");
    Snapshot {
        config,
        config_map_version: cm.metadata.resource_version.clone(),
        secret_version: secret.metadata.resource_version.clone(),
        deployment_generation: d.metadata.generation,
        checksum,
        args: container.args.clone().unwrap_or_default(),
        replicas: spec.replicas,
        env: container
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect(),
    }
}

/// Patches the spec, then waits until the operator has observed that generation and is Ready.
async fn edit_and_wait(h: &Harness, name: &str, spec: Value) -> Tunnel {
    let edited = h
        .tunnels()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .expect("patch spec");
    let generation = edited.metadata.generation;
    poll_until(
        &format!("{name} observes generation {generation:?}"),
        WAIT,
        POLL,
        || async {
            let t = h.tunnels().get_opt(name).await.ok().flatten()?;
            let status = t.status.as_ref()?;
            let ready = harness::ready(Some(status))?;
            (status.observed_generation == generation
                && ready.reason == "Ready"
                && ready.observed_generation == generation)
                .then_some(t)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Restarts the operator (which reconciles everything) and touches each object; their snapshots
/// after a settling pause. Counters are reset first.
async fn resync(h: &mut Harness, names: &[&str]) -> Vec<Snapshot> {
    h.sim.reset_counters();
    h.stop_operator();
    h.start_operator();
    for name in names {
        h.tunnels()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"touched": "1"}}})),
            )
            .await
            .expect("touch");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut out = Vec::new();
    for name in names {
        out.push(snapshot(h, name).await);
    }
    out
}

/// The value following `flag` in the cloudflared args.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn last_rule(config: &Value) -> Value {
    config["ingress"]
        .as_array()
        .and_then(|rules| rules.last())
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn spec_edits_reach_the_objects_only_config_changes_roll_and_none_calls_cloudflare() {
    let mut h = Harness::start("tr-upd").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let initial = snapshot(&h, "web").await;
    assert_eq!(
        last_rule(&initial.config),
        json!({"service": "http_status:404"})
    );
    assert_eq!(initial.config.get("originRequest"), None);
    assert_eq!(flag_value(&initial.args, "--protocol"), Some("auto"));
    assert_eq!(initial.replicas, Some(2));
    assert_eq!(initial.checksum.as_ref().map(String::len), Some(64));

    // fallbackTarget: new config, new checksum (a rollout).
    h.sim.reset_counters();
    edit_and_wait(&h, "web", json!({"fallbackTarget": "http_status:503"})).await;
    let fallback = snapshot(&h, "web").await;
    assert_eq!(
        last_rule(&fallback.config),
        json!({"service": "http_status:503"})
    );
    assert_ne!(fallback.config_map_version, initial.config_map_version);
    assert_ne!(fallback.checksum, initial.checksum);
    assert_eq!(fallback.checksum.as_ref().map(String::len), Some(64));
    assert_ne!(
        fallback.deployment_generation,
        initial.deployment_generation
    );
    assert_eq!(fallback.secret_version, initial.secret_version);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    // noTlsVerify: top-level originRequest, new checksum.
    edit_and_wait(&h, "web", json!({"noTlsVerify": true})).await;
    let tls = snapshot(&h, "web").await;
    assert_eq!(
        tls.config.get("originRequest"),
        Some(&json!({"noTLSVerify": true}))
    );
    assert_eq!(
        last_rule(&tls.config),
        json!({"service": "http_status:503"})
    );
    assert_ne!(tls.config_map_version, fallback.config_map_version);
    assert_ne!(tls.checksum, fallback.checksum);
    assert_ne!(tls.checksum, initial.checksum);
    assert_ne!(tls.deployment_generation, fallback.deployment_generation);
    assert_eq!(tls.secret_version, initial.secret_version);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    // protocol: the args change, the config and checksum do not.
    edit_and_wait(&h, "web", json!({"protocol": "http2"})).await;
    let proto = snapshot(&h, "web").await;
    assert_eq!(flag_value(&proto.args, "--protocol"), Some("http2"));
    assert_eq!(
        proto.checksum, tls.checksum,
        "a protocol change is no config change"
    );
    assert_eq!(proto.config, tls.config);
    assert_eq!(proto.config_map_version, tls.config_map_version);
    assert_eq!(proto.secret_version, initial.secret_version);
    assert_ne!(proto.deployment_generation, tls.deployment_generation);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    // deployPatch: replicas and an env var on cloudflared; the checksum stays.
    let patch = "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: cloudflared\n        env:\n        - name: TUNNEL_LOGLEVEL\n          value: debug\n";
    edit_and_wait(&h, "web", json!({"deployPatch": patch})).await;
    let patched = snapshot(&h, "web").await;
    assert_eq!(patched.replicas, Some(3));
    assert!(
        patched
            .env
            .contains(&("TUNNEL_LOGLEVEL".to_string(), Some("debug".to_string()))),
        "{:?}",
        patched.env
    );
    assert_eq!(
        patched.args, proto.args,
        "args are not touched by the patch"
    );
    assert_eq!(patched.checksum, proto.checksum);
    assert_eq!(patched.config_map_version, proto.config_map_version);
    assert_eq!(patched.secret_version, initial.secret_version);
    assert_ne!(patched.deployment_generation, proto.deployment_generation);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    // A resync with nothing changed (a restart reconciles everything) moves nothing.
    let resynced = resync(&mut h, &["web"]).await;
    assert_eq!(resynced, [patched]);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    // Back to the defaults: the first render, its checksum and the patched fields all return.
    edit_and_wait(
        &h,
        "web",
        json!({"fallbackTarget": null, "noTlsVerify": null, "protocol": null, "deployPatch": null}),
    )
    .await;
    let reverted = snapshot(&h, "web").await;
    assert_eq!(reverted.config, initial.config);
    assert_eq!(reverted.checksum, initial.checksum);
    assert_eq!(reverted.args, initial.args);
    assert_eq!(reverted.replicas, Some(2));
    assert_eq!(reverted.env, initial.env);
    assert_eq!(reverted.secret_version, initial.secret_version);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());
}

/// The managed credentials.json of `name`.
async fn managed_credentials(h: &Harness, name: &str) -> Value {
    let secret = h.secrets().get(name).await.expect("managed secret");
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("credentials.json"))
        .map(|b| b.0.clone())
        .expect("credentials.json");
    serde_json::from_slice(&bytes).expect("credentials.json is JSON")
}

#[tokio::test]
async fn existing_tunnel_credentials_from_a_tunnel_secret_key_or_the_token_endpoint() {
    let mut h = Harness::start("tr-upd-exist").await;
    let id = h
        .precreate_tunnel("pre", &[4u8; 32], ConfigSrc::Local)
        .await;
    let sim_secret = h
        .sim
        .tunnels()
        .into_iter()
        .find(|t| t.id == id)
        .map(|t| t.tunnel_secret)
        .expect("simulated tunnel");
    assert_eq!(STANDARD.decode(&sim_secret).ok(), Some(vec![4u8; 32]));
    // One tunnel per object: a Cloudflare tunnel is run by one object only.
    let id_b = h
        .precreate_tunnel("pre-b", &[4u8; 32], ConfigSrc::Local)
        .await;
    let id_c = h
        .precreate_tunnel("pre-c", &[4u8; 32], ConfigSrc::Local)
        .await;
    h.create_api_secret(
        "with-secret",
        &[
            ("CLOUDFLARE_API_TOKEN", TOKEN),
            (
                "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET",
                &STANDARD.encode([4u8; 32]),
            ),
        ],
    )
    .await;
    h.create_api_secret("token-only", &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_api_secret(
        "renamed-key",
        &[
            ("CLOUDFLARE_API_TOKEN", TOKEN),
            ("tunnel-secret", &STANDARD.encode([4u8; 32])),
            // Under the default key name, but spec.cloudflare names another key.
            (
                "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET",
                &STANDARD.encode([8u8; 32]),
            ),
        ],
    )
    .await;
    let mut renamed = h.spec("renamed-key", json!({"existingTunnel": {"id": id_b}}));
    renamed["cloudflare"]["CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET"] = json!("tunnel-secret");
    h.create_tunnel("by-renamed-key", renamed).await;
    h.create_tunnel(
        "by-secret",
        h.spec("with-secret", json!({"existingTunnel": {"id": id}})),
    )
    .await;
    h.create_tunnel(
        "by-token",
        h.spec("token-only", json!({"existingTunnel": {"name": "pre-c"}})),
    )
    .await;
    for (name, id) in [
        ("by-secret", &id),
        ("by-token", &id_c),
        ("by-renamed-key", &id_b),
    ] {
        let t = h.wait_reason(&h.tunnels(), name, "Ready").await;
        assert_eq!(
            t.status.as_ref().and_then(|s| s.tunnel_id.clone()),
            Some(id.clone()),
            "{name}"
        );
        // Held for the removal of its DNS records on deletion; the tunnel itself stays.
        assert!(t.finalizers().contains(&FINALIZER.to_string()), "{name}");
        let creds = managed_credentials(&h, name).await;
        assert_eq!(creds["TunnelID"], json!(id), "{name}");
        assert_eq!(creds["AccountTag"], json!(h.sim.account_id()), "{name}");
        assert_eq!(
            creds["TunnelSecret"]
                .as_str()
                .map(|s| STANDARD.decode(s).ok()),
            Some(STANDARD.decode(&sim_secret).ok()),
            "{name}"
        );
    }
    assert!(
        h.sim.calls(Operation::GetTunnelToken) >= 1,
        "by-token read the token endpoint"
    );
    let names = ["by-secret", "by-token", "by-renamed-key"];
    let mut settled = Vec::new();
    for name in names {
        settled.push(snapshot(&h, name).await);
    }
    assert_eq!(resync(&mut h, &names).await, settled);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());
    for name in ["by-secret", "by-token", "by-renamed-key"] {
        h.tunnels()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        h.wait_gone(&h.tunnels(), name).await;
    }
    let mut live: Vec<String> = h.live_tunnels().into_iter().map(|t| t.id).collect();
    live.sort();
    let mut existing = vec![id, id_b, id_c];
    existing.sort();
    assert_eq!(live, existing, "the existing tunnels stay on Cloudflare");
    assert_eq!(h.sim.calls(Operation::DeleteTunnel), 0);
}

const EMAIL: &str = "ops@example.com";
const API_KEY: &str = "sim-global-api-key";

#[tokio::test]
async fn a_global_api_key_with_email_creates_the_tunnel() {
    let mut h = Harness::start("tr-upd-key").await;
    // A simulator that accepts only the global API key of EMAIL, no token.
    let sim = Simulator::new(SimConfig {
        api_keys: vec![(EMAIL.to_string(), API_KEY.to_string())],
        ..SimConfig::default()
    });
    let running = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("sim");
    h.sim = sim;
    std::mem::replace(&mut h.running, running).shutdown().await;
    h.start_operator();
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_KEY", API_KEY)])
        .await;
    h.create_tunnel(
        "nomail",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "nomail"}})),
    )
    .await;
    let t = h
        .wait_reason(&h.tunnels(), "nomail", "SecretKeyMissing")
        .await;
    assert_eq!(
        harness::ready(t.status.as_ref()).map(|c| c.message.clone()),
        Some(format!(
            "Secret {}/{API_SECRET} holds key CLOUDFLARE_API_KEY (a global API key) but spec.cloudflare.email is not set",
            h.ns
        ))
    );
    let mut spec = h.spec(API_SECRET, json!({"newTunnel": {"name": "keyed"}}));
    spec["cloudflare"]["email"] = json!(EMAIL);
    h.create_tunnel("keyed", spec).await;
    let t = h.wait_reason(&h.tunnels(), "keyed", "Ready").await;
    let live = h.live_tunnels();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].name, "keyed");
    assert_eq!(
        t.status.as_ref().and_then(|s| s.tunnel_id.clone()),
        Some(live[0].id.clone())
    );
    assert_eq!(h.sim.calls(Operation::CreateTunnel), 1);

    // The key may live under another name, which spec.cloudflare.CLOUDFLARE_API_KEY gives.
    h.create_api_secret("renamed-api", &[("global-key", API_KEY)])
        .await;
    let mut spec = h.spec("renamed-api", json!({"newTunnel": {"name": "renamed"}}));
    spec["cloudflare"]["email"] = json!(EMAIL);
    spec["cloudflare"]["CLOUDFLARE_API_KEY"] = json!("global-key");
    h.create_tunnel("renamed", spec).await;
    h.wait_reason(&h.tunnels(), "renamed", "Ready").await;
    let mut names: Vec<String> = h.live_tunnels().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["keyed", "renamed"]);
}

#[tokio::test]
async fn an_account_name_is_resolved_to_its_id() {
    let mut h = Harness::start("tr-upd-acct").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let base = h.spec(API_SECRET, json!({}));
    let by_name = |tunnel: &str, account: &str| {
        let mut spec = base.clone();
        spec["newTunnel"] = json!({"name": tunnel});
        if let Some(cloudflare) = spec["cloudflare"].as_object_mut() {
            cloudflare.remove("accountId");
            cloudflare.insert("accountName".into(), json!(account));
        }
        spec
    };
    h.create_tunnel("named", by_name("named", &h.sim.account_name()))
        .await;
    let t = h.wait_reason(&h.tunnels(), "named", "Ready").await;
    assert_eq!(
        t.status.as_ref().and_then(|s| s.account_id.clone()),
        Some(h.sim.account_id())
    );
    assert!(h.sim.calls(Operation::ListAccounts) >= 1);
    let live = h.live_tunnels();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].name, "named");
    let creds = managed_credentials(&h, "named").await;
    assert_eq!(creds["AccountTag"], json!(h.sim.account_id()));
    // The resolved account is kept in status: a resync looks nothing up again.
    let settled = snapshot(&h, "named").await;
    assert_eq!(resync(&mut h, &["named"]).await, [settled]);
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());

    h.create_tunnel("unknown", by_name("unknown", "no-such-account"))
        .await;
    let t = h
        .wait_reason(&h.tunnels(), "unknown", "AccountNotFound")
        .await;
    assert_eq!(
        harness::ready(t.status.as_ref()).map(|c| c.message.clone()),
        Some("no account named \"no-such-account\" is visible to this credential (account-owned API tokens cannot list accounts: set spec.cloudflare.accountId)".to_string())
    );
    assert_eq!(
        h.live_tunnels().len(),
        1,
        "nothing created without an account"
    );
}

#[tokio::test]
async fn a_corrected_tunnel_secret_in_the_api_secret_reaches_the_managed_credentials() {
    let h = Harness::start("tr-upd-rotate").await;
    let id = h
        .precreate_tunnel("pre", &[4u8; 32], ConfigSrc::Local)
        .await;
    // A mistake: the tunnel secret of another tunnel.
    h.create_api_secret(
        API_SECRET,
        &[
            ("CLOUDFLARE_API_TOKEN", TOKEN),
            (
                "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET",
                &STANDARD.encode([1u8; 32]),
            ),
        ],
    )
    .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": id}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let creds = managed_credentials(&h, "web").await;
    assert_eq!(creds["TunnelSecret"], json!(STANDARD.encode([1u8; 32])));
    let before = snapshot(&h, "web").await;
    h.sim.reset_counters();

    h.secrets()
        .patch(
            API_SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {
                "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET": STANDARD.encode(STANDARD.encode([4u8; 32]))
            }})),
        )
        .await
        .expect("correct the API Secret");
    // The API Secret is not watched: the next reconcile (here an edit) picks the fix up.
    edit_and_wait(&h, "web", json!({"fallbackTarget": "http_status:503"})).await;
    let creds = managed_credentials(&h, "web").await;
    assert_eq!(creds["TunnelSecret"], json!(STANDARD.encode([4u8; 32])));
    assert_eq!(creds["TunnelID"], json!(id));
    let after = snapshot(&h, "web").await;
    assert_ne!(after.secret_version, before.secret_version);
    assert_ne!(
        after.checksum, before.checksum,
        "new credentials roll the pods"
    );
}
