//! Zero Trust Access end to end (docs/design.md §3.7), on the real API server and the
//! simulator: an AccessPolicy's hostnames are closed (503) before their application exists,
//! served behind it once it does (cloudflared checking the team and the application's AUD),
//! kept out of DNS while their application cannot be made, and public again (rules first, then
//! the application deleted) when the policy goes; someone else's application is left alone.
use std::path::PathBuf;
use std::time::Duration;

use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use cftunnel_types::access_policy::AccessPolicy;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::access_invariant::RenderWatch;
use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{API_SECRET, bindings, create_binding, create_service, records, wait_records};

pub(crate) const TEAM: &str = "acme";

pub(crate) fn policies(h: &Harness) -> Api<AccessPolicy> {
    Api::namespaced(h.admin.clone(), &h.ns)
}

pub(crate) async fn create_policy(h: &Harness, name: &str, targets: Value) {
    let policy: AccessPolicy = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "AccessPolicy",
        "metadata": {"name": name, "labels": {"cftunnel-test/run": h.ns}},
        "spec": {
            "targetRefs": targets,
            "allow": {"emails": ["alice@example.com"]},
            "sessionDuration": "8h",
        },
    }))
    .expect("policy json");
    policies(h)
        .create(&PostParams::default(), &policy)
        .await
        .expect("create policy");
}

pub(crate) fn binding_target(name: &str) -> Value {
    json!({"group": "networking.cfargotunnel.com", "kind": "TunnelBinding", "name": name})
}

/// The tunnel's config.yaml, parsed (`Null` before it exists).
pub(crate) async fn config(h: &Harness) -> (String, Value) {
    let cms: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    let text = cms
        .get("edge")
        .await
        .ok()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get("config.yaml").cloned())
        .unwrap_or_default();
    let parsed = serde_yaml_ng::from_str(&text).unwrap_or(Value::Null);
    (text, parsed)
}

/// The rule of `host` in config.yaml (`Null` when it has none).
pub(crate) async fn rule(h: &Harness, host: &str) -> Value {
    let (_, config) = config(h).await;
    rule_in(&config, host)
}

/// The ingress rule of `host` in a cloudflared configuration (`Null` when it has none).
fn rule_in(config: &Value, host: &str) -> Value {
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["hostname"] == host)
        .cloned()
        .unwrap_or(Value::Null)
}

pub(crate) async fn wait_rule(
    h: &Harness,
    host: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let found = poll_until(what, WAIT, POLL, || async {
        let r = rule(h, host).await;
        check(&r).then_some(r)
    })
    .await;
    match found {
        Ok(r) => r,
        Err(e) => panic!("{e}; rule of {host} now {}", rule(h, host).await),
    }
}

pub(crate) fn closed(rule: &Value) -> bool {
    rule["service"] == "http_status:503" && rule["originRequest"]["access"].is_null()
}

pub(crate) fn public(rule: &Value) -> bool {
    let service = rule["service"].as_str().unwrap_or_default();
    service.starts_with("http://web.") && rule["originRequest"]["access"].is_null()
}

pub(crate) fn apps_for(h: &Harness, host: &str) -> Vec<cftunnel_sim::SimAccessApp> {
    h.sim
        .access_apps()
        .into_iter()
        .filter(|a| a.domain == host)
        .collect()
}

pub(crate) async fn wait_app(h: &Harness, host: &str) -> cftunnel_sim::SimAccessApp {
    poll_until(
        &format!("an application for {host}"),
        WAIT,
        POLL,
        || async { apps_for(h, host).into_iter().next() },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()))
}

/// The policy's first target once its status gives it `reason`.
pub(crate) async fn wait_first_target(
    h: &Harness,
    policy: &str,
    reason: &str,
) -> cftunnel_types::access_policy::TargetStatus {
    wait_first_target_where(h, policy, reason, |_| true).await
}

/// The policy's first target once it has `reason` and `also` holds for it.
pub(crate) async fn wait_first_target_where(
    h: &Harness,
    policy: &str,
    reason: &str,
    also: impl Fn(&cftunnel_types::access_policy::TargetStatus) -> bool,
) -> cftunnel_types::access_policy::TargetStatus {
    poll_until(
        &format!("AccessPolicy {policy}'s first target {reason}"),
        WAIT,
        POLL,
        || async {
            let p = policies(h).get(policy).await.ok()?;
            let target = p.status?.targets?.into_iter().next()?;
            (target.reason.as_deref() == Some(reason) && also(&target)).then_some(target)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()))
}

pub(crate) async fn wait_programmed(
    h: &Harness,
    name: &str,
    status: &str,
    reason: &str,
) -> AccessPolicy {
    poll_until(
        &format!("AccessPolicy {name} Programmed={status}/{reason}"),
        WAIT,
        POLL,
        || async {
            let p = policies(h).get(name).await.ok()?;
            let c = p
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "Programmed")?
                .clone();
            (c.status == status && c.reason == reason).then_some(p)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The message of the policy's `Programmed` condition.
fn programmed_message(policy: AccessPolicy) -> String {
    policy
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Programmed")
        .map(|c| c.message)
        .unwrap_or_default()
}

/// `cloudflared tunnel --config F ingress validate` on `text` (offline).
fn cloudflared_accepts(text: &str) {
    let Some(bin) = std::env::var_os("CFTUNNEL_CLOUDFLARED").map(PathBuf::from) else {
        panic!("CFTUNNEL_CLOUDFLARED must name a cloudflared binary (.ci/run sets it)");
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).expect("write config");
    let out = std::process::Command::new(bin)
        .args(["tunnel", "--config"])
        .arg(&path)
        .args(["ingress", "validate"])
        .output()
        .expect("run cloudflared");
    assert!(
        out.status.success(),
        "cloudflared refused the config: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Secret, the Service and the tunnel, with an Access team on the account.
pub(crate) async fn setup(h: &Harness) {
    h.sim.set_access_team(Some(TEAM.into()));
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
}

/// The Ingress `shop` of the test namespace with `spec`.
pub(crate) async fn create_ingress(h: &Harness, spec: Value) {
    use k8s_openapi::api::networking::v1::Ingress;
    let ingress: Ingress = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "shop"},
        "spec": spec,
    }))
    .expect("ingress json");
    Api::<Ingress>::namespaced(h.admin.clone(), &h.ns)
        .create(&PostParams::default(), &ingress)
        .await
        .expect("create Ingress");
}

pub(crate) async fn route(h: &Harness, binding: &str, host: &str) {
    create_binding(h, binding, json!([{"name": "web", "spec": {"fqdn": host}}])).await;
}

#[tokio::test]
async fn a_public_binding_protected_closes_first_opens_behind_its_application_and_opens_again_when_the_policy_goes()
 {
    let h = Harness::start("tr-access").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    route(&h, "web-b", "b.example.com").await;
    wait_rule(&h, "a.example.com", "a public rule", public).await;
    wait_records(&h, "a.example.com", 1).await;

    // The application's creation takes a while: the rules must be closed all that time.
    h.sim.inject(
        Operation::CreateAccessApp,
        Fault::latency(Duration::from_secs(3)),
    );
    create_policy(
        &h,
        "staff",
        json!([binding_target("web-a"), binding_target("web-b")]),
    )
    .await;
    let closed_rule = wait_rule(&h, "a.example.com", "the rules closed", closed).await;
    assert!(closed(&closed_rule));
    watch.protect("a.example.com").await;
    assert!(
        apps_for(&h, "a.example.com").is_empty(),
        "closed before the application exists"
    );
    let app = wait_app(&h, "a.example.com").await;
    let open = wait_rule(&h, "a.example.com", "the rule behind Access", |r| {
        !r["originRequest"]["access"].is_null()
    })
    .await;
    assert_eq!(
        open["originRequest"]["access"],
        json!({"required": true, "teamName": TEAM, "audTag": [app.aud]}),
        "cloudflared checks the team and this application's AUD"
    );
    assert!(
        open["service"]
            .as_str()
            .is_some_and(|s| s.starts_with("http://web.")),
        "{open}"
    );
    let (text, _) = config(&h).await;
    cloudflared_accepts(&text);
    // The application carries the policy's rules through cftunnel's reusable policy.
    assert_eq!(app.session_duration, "8h");
    let reusable = h.sim.access_policies();
    assert_eq!(reusable.len(), 1, "{reusable:?}");
    assert_eq!(
        app.policies
            .iter()
            .map(|p| p.id.clone())
            .collect::<Vec<_>>(),
        vec![reusable[0].id.clone()]
    );
    let include = serde_json::to_value(&reusable[0].include).expect("include");
    assert_eq!(include, json!([{"email": {"email": "alice@example.com"}}]));
    assert!(reusable[0].name.starts_with("cftunnel AccessPolicy "));
    let policy = wait_programmed(&h, "staff", "True", "Programmed").await;
    crate::metrics::wait_counted("cftunnel_access_applications", &["state=\"protecting\""]).await;
    let targets = policy.status.and_then(|s| s.targets).unwrap_or_default();
    let recorded: Vec<_> = targets
        .iter()
        .flat_map(|t| &t.hostnames)
        .map(|h| (h.hostname.clone(), h.aud.clone()))
        .collect();
    assert!(
        recorded.contains(&("a.example.com".to_string(), app.aud.clone())),
        "{recorded:?}"
    );
    let b_app = wait_app(&h, "b.example.com").await;
    watch.protect("b.example.com").await;

    // Deleting a target deletes its application.
    bindings(&h)
        .delete("web-b", &DeleteParams::default())
        .await
        .expect("delete binding");
    poll_until("b's application gone", WAIT, POLL, || async {
        apps_for(&h, "b.example.com").is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    assert!(
        h.sim.access_apps().iter().all(|a| a.id != b_app.id),
        "deleted, not renamed"
    );

    // Deleting the policy: the rules open first, the application goes after.
    h.sim.clear_faults();
    h.sim.inject(
        Operation::DeleteAccessApp,
        Fault::latency(Duration::from_secs(3)),
    );
    watch.release("a.example.com").await;
    policies(&h)
        .delete("staff", &DeleteParams::default())
        .await
        .expect("delete policy");
    wait_rule(&h, "a.example.com", "the rule public again", public).await;
    assert!(
        !apps_for(&h, "a.example.com").is_empty(),
        "the rules open while the application still exists"
    );
    poll_until(
        "the application and the policy gone",
        WAIT,
        POLL,
        || async {
            let gone = h.sim.access_apps().is_empty() && h.sim.access_policies().is_empty();
            (gone && policies(&h).get_opt("staff").await.ok()?.is_none()).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    assert_eq!(
        records(&h, "a.example.com").len(),
        1,
        "its DNS record stays"
    );
    watch.assert_held();
}

#[tokio::test]
async fn a_new_protected_route_whose_application_is_refused_gets_no_dns_and_no_open_rule() {
    let h = Harness::start("tr-access-403").await;
    let watch = RenderWatch::start(&h);
    watch.protect_from("new.example.com", 0);
    setup(&h).await;
    h.sim
        .inject(Operation::CreateAccessApp, Fault::fail_next(1_000_000, 403));
    create_policy(&h, "staff", json!([binding_target("web-new")])).await;
    route(&h, "web-new", "new.example.com").await;
    let policy = wait_programmed(&h, "staff", "False", "CloudflareError").await;
    let message = programmed_message(policy);
    assert!(message.contains("new.example.com"), "{message}");
    wait_rule(&h, "new.example.com", "the rule closed", closed).await;
    // While refused, it stays that way: no record, no rule serving the Service.
    for _ in 0..12 {
        assert!(
            records(&h, "new.example.com").is_empty(),
            "no DNS record while refused"
        );
        let r = rule(&h, "new.example.com").await;
        assert!(closed(&r), "never served in the open: {r}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    h.sim.clear_faults();
    let app = wait_app(&h, "new.example.com").await;
    let open = wait_rule(&h, "new.example.com", "the rule behind Access", |r| {
        !r["originRequest"]["access"].is_null()
    })
    .await;
    assert_eq!(open["originRequest"]["access"]["audTag"], json!([app.aud]));
    // CNAME and TXT, once the application exists.
    wait_records(&h, "new.example.com", 1).await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    watch.assert_held();
}

#[tokio::test]
async fn someone_elses_application_for_the_hostname_is_left_alone_and_reported() {
    let h = Harness::start("tr-access-theirs").await;
    setup(&h).await;
    let theirs = h
        .sim
        .put_access_app(
            json!({"name": "Made by hand", "domain": "c.example.com", "type": "self_hosted"}),
        )
        .expect("their application");
    route(&h, "web-c", "c.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-c")])).await;
    let policy = wait_programmed(&h, "staff", "False", "ApplicationConflict").await;
    let target = policy
        .status
        .and_then(|s| s.targets)
        .unwrap_or_default()
        .into_iter()
        .next()
        .expect("a target");
    assert_eq!(target.reason.as_deref(), Some("ApplicationConflict"));
    crate::metrics::wait_counted(
        "cftunnel_access_targets",
        &["reason=\"ApplicationConflict\""],
    )
    .await;
    assert!(
        target
            .message
            .as_deref()
            .is_some_and(|m| m.contains(&theirs.id) && m.contains("left alone")),
        "{target:?}"
    );
    assert!(
        closed(&rule(&h, "c.example.com").await),
        "closed, never open"
    );
    let apps = h.sim.access_apps();
    assert_eq!(apps.len(), 1, "{apps:?}");
    assert_eq!(
        (apps[0].id.as_str(), apps[0].name.as_str()),
        (theirs.id.as_str(), "Made by hand"),
        "untouched"
    );
    assert!(apps[0].policies.is_empty(), "untouched");
    assert!(
        records(&h, "c.example.com").is_empty(),
        "no DNS while closed"
    );
}

#[tokio::test]
async fn an_account_without_zero_trust_keeps_the_routes_closed_and_says_so() {
    let h = Harness::start("tr-access-noorg").await;
    setup(&h).await;
    h.sim.set_access_team(None);
    route(&h, "web-d", "d.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-d")])).await;
    let policy = wait_programmed(&h, "staff", "False", "NoOrganization").await;
    let message = programmed_message(policy);
    assert!(message.contains("no Zero Trust organization"), "{message}");
    wait_rule(&h, "d.example.com", "the rule closed", closed).await;
    assert!(h.sim.access_apps().is_empty());
}

#[tokio::test]
async fn labelled_service_and_ingress_targets_are_protected_like_a_binding() {
    let h = Harness::start("tr-access-kinds").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    create_service(
        &h,
        "api",
        8080,
        json!({"cfargotunnel.com/expose-tunnel": "edge"}),
        json!({"cfargotunnel.com/hostname": "api.example.com"}),
    )
    .await;
    let class_name = h.create_ingress_class("edge").await;
    create_ingress(
        &h,
        json!({
            "ingressClassName": class_name,
            "rules": [{"host": "shop.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}],
        }),
    )
    .await;
    create_policy(
        &h,
        "staff",
        json!([
            {"group": "", "kind": "Service", "name": "api"},
            {"group": "networking.k8s.io", "kind": "Ingress", "name": "shop"},
        ]),
    )
    .await;
    for host in ["api.example.com", "shop.example.com"] {
        let app = wait_app(&h, host).await;
        let open = wait_rule(&h, host, "the rule behind Access", |r| {
            !r["originRequest"]["access"].is_null()
        })
        .await;
        assert_eq!(
            open["originRequest"]["access"],
            json!({"required": true, "teamName": TEAM, "audTag": [app.aud]}),
            "{host}"
        );
        watch.protect(host).await;
        wait_records(&h, host, 1).await;
    }
    let (text, _) = config(&h).await;
    cloudflared_accepts(&text);
    let policy = wait_programmed(&h, "staff", "True", "Programmed").await;
    let kinds: Vec<_> = policy
        .status
        .and_then(|s| s.targets)
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.kind, t.hostnames.len()))
        .collect();
    assert_eq!(
        kinds,
        [("Service".to_string(), 1), ("Ingress".to_string(), 1)]
    );
    watch.assert_held();
}

#[tokio::test]
async fn a_remotely_managed_tunnel_gets_the_same_protection_in_its_pushed_configuration() {
    let h = Harness::start("tr-access-remote").await;
    h.sim.set_access_team(Some(TEAM.into()));
    let id = crate::remote::remote_edge(&h).await;
    let pushed_rule = |host: &'static str| {
        let h = &h;
        let id = id.clone();
        move || {
            let config = crate::remote::sim_tunnel(h, &id)
                .config
                .unwrap_or(Value::Null);
            rule_in(&config, host)
        }
    };
    let rule_of = pushed_rule("r.example.com");
    h.sim.inject(
        Operation::CreateAccessApp,
        Fault::latency(Duration::from_secs(3)),
    );
    create_policy(&h, "staff", json!([binding_target("web-r")])).await;
    route(&h, "web-r", "r.example.com").await;
    poll_until("the pushed rule closed", WAIT, POLL, || async {
        closed(&rule_of()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; pushed {}", rule_of()));
    assert!(
        apps_for(&h, "r.example.com").is_empty(),
        "closed before the application exists"
    );
    let app = wait_app(&h, "r.example.com").await;
    let open = poll_until("the pushed rule behind Access", WAIT, POLL, || async {
        let r = rule_of();
        (!r["originRequest"]["access"].is_null()).then_some(r)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; pushed {}", rule_of()));
    assert_eq!(
        open["originRequest"]["access"],
        json!({"required": true, "teamName": TEAM, "audTag": [app.aud]})
    );
    assert!(
        open["service"]
            .as_str()
            .is_some_and(|s| s.starts_with("http://web.")),
        "{open}"
    );
    wait_records(&h, "r.example.com", 1).await;
    assert!(
        crate::access_invariant::assert_pushed_protected(&h, &["r.example.com"]) > 0,
        "no pushed configuration was checked"
    );
}

#[tokio::test]
async fn a_restart_renders_what_was_rendered_before_and_makes_no_new_application() {
    let mut h = Harness::start("tr-access-restart").await;
    setup(&h).await;
    route(&h, "web-e", "e.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-e")])).await;
    let app = wait_app(&h, "e.example.com").await;
    let before = wait_rule(&h, "e.example.com", "the rule behind Access", |r| {
        !r["originRequest"]["access"].is_null()
    })
    .await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    let creates = h.sim.calls(Operation::CreateAccessApp);
    h.stop_operator();
    h.start_operator();
    // The status is the memory: the restarted operator renders the same rule, never public
    // and never closed, and makes no second application.
    for _ in 0..20 {
        assert_eq!(rule(&h, "e.example.com").await, before);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait_programmed(&h, "staff", "True", "Programmed").await;
    assert_eq!(h.sim.calls(Operation::CreateAccessApp), creates);
    assert_eq!(apps_for(&h, "e.example.com"), vec![app]);
}

/// An Ingress with a host rule and a `defaultBackend` (a rule for every host): the host is
/// protected behind its application; the catch-all is refused for the target with a reason
/// that says why, stays closed, and no application for it is ever asked of Cloudflare.
#[tokio::test]
async fn a_catch_all_target_is_refused_without_a_cloudflare_call() {
    let h = Harness::start("tr-access-catchall").await;
    setup(&h).await;
    let class_name = h.create_ingress_class("edge").await;
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    create_ingress(
        &h,
        json!({
            "ingressClassName": class_name,
            "defaultBackend": backend,
            "rules": [{"host": "shop.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": backend}]}}],
        }),
    )
    .await;
    create_policy(
        &h,
        "staff",
        json!([{"group": "networking.k8s.io", "kind": "Ingress", "name": "shop"}]),
    )
    .await;
    wait_app(&h, "shop.example.com").await;
    // The pass that made shop's application writes its status after Cloudflare answered, and
    // an earlier pass (one piece of work each) may already have refused the catch-all.
    let refused = wait_first_target_where(&h, "staff", "CatchAllNotProtectable", |t| {
        !t.hostnames.is_empty()
    })
    .await;
    let message = refused.message.unwrap_or_default();
    assert!(message.contains("give the rule a hostname"), "{message}");
    let recorded: Vec<_> = refused
        .hostnames
        .iter()
        .map(|p| p.hostname.as_str())
        .collect();
    assert_eq!(
        recorded,
        ["shop.example.com"],
        "only shop.example.com is recorded"
    );
    // The catch-all rule stays closed.
    let (_, config) = config(&h).await;
    let last = config["ingress"]
        .as_array()
        .and_then(|rules| {
            rules
                .iter()
                .rev()
                .find(|r| r["hostname"].is_null())
                .cloned()
        })
        .unwrap_or(Value::Null);
    assert!(
        closed(&last) || last["service"] == "http_status:404",
        "{last}"
    );
    // Some passes later, still no application asked for the catch-all.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let creates: Vec<_> = h
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/access/apps"))
        .map(|r| {
            r.request_body
                .map(|b| b["domain"].clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        creates,
        [json!("shop.example.com")],
        "application creations"
    );
}
