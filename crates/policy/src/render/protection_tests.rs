//! Protected hostnames closed or checked by cloudflared, in config.yaml and in the remote
//! document. Every config.yaml rendered here is also given to the real cloudflared by the
//! cloudflared check (`ingress validate` and the rule each URL gets).
use std::collections::BTreeMap;

use serde_json::json;

use super::super::config::render_config;
use super::super::remote::remote_config;
use super::super::tests::{five_routes, input, spec};
use super::*;
use cftunnel_types::TunnelKind;

const AUD: &str = "4714b7fbd5b2b4d0c3f9e8a1b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f";

fn protected(entries: &[(&str, Protection)]) -> BTreeMap<String, Protection> {
    entries
        .iter()
        .map(|(h, p)| ((*h).to_string(), p.clone()))
        .collect()
}

fn open() -> Protection {
    Protection::Open {
        team: "acme".into(),
        aud: AUD.into(),
    }
}

#[test]
fn an_open_hostname_keeps_its_service_and_carries_the_access_check_on_every_rule() {
    let routes = protect(&five_routes(), &protected(&[("app.example.com", open())]));
    let app: Vec<&Route> = routes
        .iter()
        .filter(|r| r.hostname == "app.example.com")
        .collect();
    assert_eq!(app.len(), 2);
    for rule in app {
        assert!(rule.service.starts_with("http://api"), "{rule:?}");
        assert_eq!(
            rule.origin_request.access,
            Some(AccessCheck {
                required: true,
                team_name: "acme".into(),
                aud_tag: vec![AUD.into()],
            })
        );
    }
    // The others are untouched.
    let others: Vec<&Route> = routes
        .iter()
        .filter(|r| r.hostname != "app.example.com")
        .collect();
    assert!(others.iter().all(|r| r.origin_request.access.is_none()));
    let text = render_config(&input(TunnelKind::Tunnel, spec(json!({})), routes)).expect("renders");
    assert!(
        text.contains("access:\n") && text.contains("teamName: acme") && text.contains(AUD),
        "{text}"
    );
}

#[test]
fn a_closed_hostname_answers_503_on_every_rule_and_reaches_no_service() {
    let closed = Protection::Closed {
        why: "the application is not made yet".into(),
    };
    let routes = protect(
        &five_routes(),
        &protected(&[
            ("secure.example.com", closed.clone()),
            ("app.example.com", closed),
        ]),
    );
    for rule in routes
        .iter()
        .filter(|r| r.hostname == "secure.example.com" || r.hostname == "app.example.com")
    {
        assert_eq!(rule.service, CLOSED_SERVICE);
        assert!(rule.origin_request.is_empty(), "{rule:?}");
    }
    let text = render_config(&input(TunnelKind::Tunnel, spec(json!({})), routes)).expect("renders");
    assert!(
        !text.contains("api.shop.svc") && !text.contains("secure.shop.svc"),
        "{text}"
    );
}

#[test]
fn the_remote_document_carries_the_same_access_check() {
    let routes = protect(&five_routes(), &protected(&[("app.example.com", open())]));
    let config = remote_config(&input(
        TunnelKind::Tunnel,
        spec(json!({"configSource": "Cloudflare"})),
        routes,
    ))
    .expect("renders");
    let rules = config["ingress"].as_array().cloned().unwrap_or_default();
    let app: Vec<_> = rules
        .iter()
        .filter(|r| r["hostname"] == "app.example.com")
        .collect();
    assert_eq!(app.len(), 2);
    for rule in app {
        assert_eq!(
            rule["originRequest"]["access"],
            json!({"required": true, "teamName": "acme", "audTag": [AUD]})
        );
    }
}

#[test]
fn hostnames_are_matched_without_regard_to_case_and_unprotected_ones_are_left_alone() {
    let routes = five_routes();
    let mut upper = routes.clone();
    upper[1].hostname = "APP.example.com".into();
    let protected = protected(&[("app.example.com", open())]);
    assert!(
        protect(&upper, &protected)[1]
            .origin_request
            .access
            .is_some()
    );
    assert_eq!(protect(&routes, &BTreeMap::new()), routes);
}
