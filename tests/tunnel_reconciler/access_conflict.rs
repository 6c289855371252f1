//! One owner per protected hostname (docs/design.md §3.7), end to end: a second AccessPolicy
//! naming an object that routes a hostname another policy protects is refused for it, its
//! status naming the older policy, and makes no application; every rule of the hostname keeps
//! checking the older policy's application.
use std::time::Duration;

use cftunnel_testenv::poll_until;
use serde_json::{Value, json};

use crate::access_invariant::RenderWatch;
use crate::access_policy::{
    apps_for, binding_target, create_policy, policies, route, setup, wait_app, wait_first_target,
    wait_programmed,
};
use crate::harness::{Harness, POLL, WAIT};
use crate::routes::create_binding;

/// Every rule of `host` in the tunnel's config.yaml.
async fn rules_of(h: &Harness, host: &str) -> Vec<Value> {
    let (_, config) = crate::access_policy::config(h).await;
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["hostname"] == host)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_second_policy_on_a_protected_hostname_is_refused_naming_the_first_and_makes_nothing() {
    let h = Harness::start("tr-access-second").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    let host = "a.example.com";
    create_binding(
        &h,
        "web-a",
        json!([{"name": "web", "spec": {"fqdn": host}}]),
    )
    .await;
    create_binding(
        &h,
        "web-api",
        json!([{"name": "web", "spec": {"fqdn": host, "path": "/api"}}]),
    )
    .await;
    create_policy(&h, "older", json!([binding_target("web-a")])).await;
    wait_programmed(&h, "older", "True", "Programmed").await;
    let app = wait_app(&h, host).await;
    // Creation times have a resolution of a second: the second policy is newer by one.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_policy(&h, "newer", json!([binding_target("web-api")])).await;

    let refused = wait_first_target(&h, "newer", "TargetConflict").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains(&format!("older AccessPolicy {}/older", h.ns)) && message.contains(host),
        "{message}"
    );
    assert!(
        refused.hostnames.is_empty(),
        "no application recorded for it"
    );
    // Both rules of the hostname check the older policy's application, and only it exists.
    let checked = poll_until(
        "every rule of the hostname behind Access",
        WAIT,
        POLL,
        || async {
            let rules = rules_of(&h, host).await;
            (rules.len() == 2
                && rules
                    .iter()
                    .all(|r| r["originRequest"]["access"]["audTag"] == json!([app.aud])))
            .then_some(rules)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.len(), 2);
    watch.protect(host).await;
    let apps = apps_for(&h, host);
    assert_eq!(apps.len(), 1, "{apps:?}");
    assert!(apps[0].name.contains("/older "), "{}", apps[0].name);
    watch.assert_held();
}

/// A target's message is bounded by the CRD (1,024 characters): a conflict message longer than
/// that (here someone else's application with a long name covers the hostname) is cut, so the
/// status is still written and the policy's other target records its application.
#[tokio::test]
async fn a_conflict_message_over_the_crds_bound_is_cut_and_the_other_target_stays_programmed() {
    let h = Harness::start("tr-access-long").await;
    let watch = RenderWatch::start(&h);
    watch.protect_from("a.example.com", 0);
    watch.protect_from("c.example.com", 0);
    setup(&h).await;
    let long_name = format!("Made by hand {}", "x".repeat(1500));
    let theirs = h
        .sim
        .put_access_app(
            json!({"name": long_name, "domain": "c.example.com", "type": "self_hosted"}),
        )
        .expect("their application");
    // The policy goes first: both hostnames are protected from their first render (a route
    // created before its policy is public until the policy arrives).
    create_policy(
        &h,
        "staff",
        json!([binding_target("web-c"), binding_target("web-a")]),
    )
    .await;
    route(&h, "web-c", "c.example.com").await;
    route(&h, "web-a", "a.example.com").await;
    let targets = poll_until(
        "the conflict and the other target's application in status",
        WAIT,
        POLL,
        || async {
            let targets = policies(&h).get("staff").await.ok()?.status?.targets?;
            let conflict = targets.iter().find(|t| t.name == "web-c")?;
            let other = targets.iter().find(|t| t.name == "web-a")?;
            (conflict.reason.as_deref() == Some("ApplicationConflict")
                && other.hostnames.len() == 1)
                .then_some(targets)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let conflict = targets.iter().find(|t| t.name == "web-c").expect("web-c");
    let message = conflict.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("c.example.com: the Access application \"Made by hand xxx"),
        "{message}"
    );
    assert!(
        message.chars().count() <= 1024,
        "over the CRD's bound: {} characters",
        message.chars().count()
    );
    assert!(
        !message.contains(&theirs.id),
        "the full message (over 1,500 characters) would name the id after the name: it was cut"
    );
    let other = targets.iter().find(|t| t.name == "web-a").expect("web-a");
    assert_eq!(other.reason, None, "{other:?}");
    assert_eq!(other.hostnames[0].hostname, "a.example.com");
    let app = wait_app(&h, "a.example.com").await;
    assert_eq!(other.hostnames[0].application_id, app.id);
    let behind = poll_until("a behind its application", WAIT, POLL, || async {
        let rules = rules_of(&h, "a.example.com").await;
        rules
            .iter()
            .all(|r| r["originRequest"]["access"]["audTag"] == json!([app.aud]))
            .then_some(rules)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(behind.len(), 1);
    assert!(crate::access_policy::closed(
        &crate::access_policy::rule(&h, "c.example.com").await
    ));
    watch.assert_held();
}
