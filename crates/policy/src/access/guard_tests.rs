use super::*;
use crate::routes::{RouteEntry, RouteReason, SourceStatus, TunnelRoutes};
use cftunnel_types::TunnelKind;
use cftunnel_types::access_policy::{
    AccessAllow, AccessPolicySpec, AccessPolicyStatus, ProtectedHostname, TargetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn edge() -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: "edge".into(),
    }
}

fn binding(name: &str) -> SourceRef {
    SourceRef {
        kind: SourceKind::TunnelBinding,
        namespace: "shop".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

fn tunnel(name: &str) -> TunnelIdentity {
    TunnelIdentity {
        name: name.into(),
        ..edge()
    }
}

fn table(routes: &[(&str, &str, RouteReason)]) -> RouteTable {
    let on_edge: Vec<_> = routes.iter().map(|&(s, h, r)| (s, h, r, "edge")).collect();
    table_on(&on_edge)
}

/// A table of (source, hostname, reason, tunnel) routes; a source's status names the tunnel of
/// its first route, as the route model's does for a route with parents on two tunnels.
fn table_on(routes: &[(&str, &str, RouteReason, &str)]) -> RouteTable {
    let mut table = RouteTable::default();
    let mut tunnels: BTreeMap<TunnelIdentity, TunnelRoutes> = BTreeMap::new();
    for (source, host, reason, on) in routes {
        let source = Arc::new(binding(source));
        let entry = Arc::new(RouteEntry {
            hostname: host.to_string(),
            path: None,
            service: "http://web.shop.svc:80".into(),
            source: source.clone(),
            reason: *reason,
            message: String::new(),
        });
        let status = table.sources.entry(source).or_insert_with(|| SourceStatus {
            tunnel: Some(tunnel(on)),
            routes: Vec::new(),
            reason: RouteReason::Routed,
            message: String::new(),
        });
        status.routes.push(entry.clone());
        tunnels.entry(tunnel(on)).or_default().entries.push(entry);
    }
    table.tunnels = tunnels.into_iter().map(|(t, r)| (t, Arc::new(r))).collect();
    table
}

fn target(kind: &str, name: &str) -> PolicyTargetRef {
    let group = match kind {
        "TunnelBinding" => "networking.cfargotunnel.com",
        "HTTPRoute" | "GRPCRoute" => "gateway.networking.k8s.io",
        "Ingress" => "networking.k8s.io",
        _ => "",
    };
    PolicyTargetRef {
        group: group.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    }
}

fn policy(name: &str, age: i64, targets: Vec<PolicyTargetRef>) -> AccessPolicy {
    let mut p = AccessPolicy::new(
        name,
        AccessPolicySpec {
            target_refs: targets,
            allow: AccessAllow {
                emails: vec!["alice@example.com".into()],
                ..AccessAllow::default()
            },
            policies: Vec::new(),
            session_duration: None,
        },
    );
    p.metadata.namespace = Some("shop".into());
    p.metadata.creation_timestamp = Some(Time(
        jiff::Timestamp::from_second(1_700_000_000 + age).expect("time"),
    ));
    p
}

fn recorded(mut p: AccessPolicy, host: &str, aud: &str) -> AccessPolicy {
    p.status = Some(AccessPolicyStatus {
        conditions: None,
        targets: Some(vec![TargetStatus {
            group: "networking.cfargotunnel.com".into(),
            kind: "TunnelBinding".into(),
            name: "web".into(),
            hostnames: vec![ProtectedHostname {
                hostname: host.into(),
                application_id: "app-1".into(),
                aud: aud.into(),
                team: "acme".into(),
                account_id: "acct".into(),
            }],
            reason: None,
            message: None,
        }]),
        retiring: None,
    });
    p
}

#[test]
fn a_targeted_hostname_is_closed_until_its_application_is_recorded_then_open_with_it() {
    let routes = table(&[
        ("web", "a.example.com", RouteReason::Routed),
        ("web", "b.example.com", RouteReason::Routed),
        ("web", "c.example.com", RouteReason::HostnameConflict),
        ("other", "d.example.com", RouteReason::Routed),
    ]);
    let fresh = policy("staff", 0, vec![target("TunnelBinding", "web")]);
    let guard = guard(&[Arc::new(fresh.clone())], &routes);
    assert_eq!(
        guard.hostnames.keys().collect::<Vec<_>>(),
        ["a.example.com", "b.example.com"],
        "served hostnames of the target only"
    );
    assert!(guard.hostnames.values().all(|g| g.protection
        == Protection::Closed {
            why: WAITING.into()
        }));
    assert_eq!(guard.held().len(), 2);
    let done = recorded(fresh, "A.example.com", "aud-a");
    let guard = super::guard(&[Arc::new(done)], &routes);
    assert_eq!(
        guard.of_tunnel(&edge()).get("a.example.com"),
        Some(&Protection::Open {
            team: "acme".into(),
            aud: "aud-a".into()
        })
    );
    assert_eq!(
        guard.held().into_iter().collect::<Vec<_>>(),
        ["b.example.com"]
    );
}

#[test]
fn a_policy_being_deleted_protects_nothing_and_the_older_of_two_policies_wins_a_target() {
    let routes = table(&[("web", "a.example.com", RouteReason::Routed)]);
    let mut leaving = policy("staff", 0, vec![target("TunnelBinding", "web")]);
    leaving.metadata.deletion_timestamp = leaving.metadata.creation_timestamp.clone();
    assert!(guard(&[Arc::new(leaving)], &routes).hostnames.is_empty());

    let older = policy("older", 0, vec![target("TunnelBinding", "web")]);
    let newer = policy("newer", 5, vec![target("TunnelBinding", "web")]);
    let guard = guard(&[Arc::new(newer), Arc::new(older)], &routes);
    assert_eq!(guard.hostnames["a.example.com"].policy.name, "older");
    let refused: Vec<_> = guard
        .refused
        .iter()
        .map(|r| (&r.policy.name, r.reason))
        .collect();
    assert_eq!(refused, [(&"newer".to_string(), REASON_TARGET_CONFLICT)]);
    assert!(guard.refused[0].message.contains("AccessPolicy shop/older"));
}

#[test]
fn grpc_targets_missing_targets_and_other_namespaces_are_refused_with_a_reason() {
    let routes = table(&[("web", "a.example.com", RouteReason::Routed)]);
    let mut elsewhere = target("TunnelBinding", "web");
    elsewhere.namespace = Some("other".into());
    let p = policy(
        "staff",
        0,
        vec![
            target("GRPCRoute", "rpc"),
            target("Ingress", "none"),
            elsewhere,
        ],
    );
    let guard = guard(&[Arc::new(p)], &routes);
    assert!(guard.hostnames.is_empty());
    let reasons: Vec<_> = guard.refused.iter().map(|r| r.reason).collect();
    assert_eq!(
        reasons,
        [
            REASON_UNSUPPORTED_KIND,
            REASON_TARGET_NOT_FOUND,
            REASON_TARGET_NOT_FOUND
        ]
    );
    assert!(guard.refused[0].message.contains("does not apply to gRPC"));
}

#[test]
fn a_rule_for_every_host_stays_closed_even_with_a_status() {
    let routes = table(&[("web", ANY_HOST, RouteReason::Routed)]);
    let p = recorded(
        policy("staff", 0, vec![target("TunnelBinding", "web")]),
        ANY_HOST,
        "aud",
    );
    let guard = guard(&[Arc::new(p)], &routes);
    assert!(matches!(
        guard.hostnames[ANY_HOST].protection,
        Protection::Closed { .. }
    ));
}

#[test]
fn a_second_policy_on_a_protected_hostname_is_refused_for_it_naming_the_first() {
    // Two bindings serve one hostname (on different paths); each has its own policy.
    let routes = table(&[
        ("web", "a.example.com", RouteReason::Routed),
        ("api", "a.example.com", RouteReason::Routed),
        ("api", "b.example.com", RouteReason::Routed),
    ]);
    let older = policy("older", 0, vec![target("TunnelBinding", "web")]);
    let newer = policy("newer", 5, vec![target("TunnelBinding", "api")]);
    let guard = guard(&[Arc::new(newer), Arc::new(older)], &routes);
    assert_eq!(guard.hostnames["a.example.com"].policy.name, "older");
    assert_eq!(guard.hostnames["b.example.com"].policy.name, "newer");
    let refused: Vec<_> = guard
        .refused
        .iter()
        .map(|r| (r.policy.name.as_str(), r.reason, r.target.name.as_str()))
        .collect();
    assert_eq!(refused, [("newer", REASON_TARGET_CONFLICT, "api")]);
    assert!(
        guard.refused[0]
            .message
            .contains("a.example.com (TunnelBinding shop/api) is protected by the older AccessPolicy shop/older"),
        "{}",
        guard.refused[0].message
    );
}

#[test]
fn a_route_served_by_two_tunnels_is_protected_on_each_of_them() {
    // One HTTPRoute-like source with parents on two tunnels: its status names the first.
    let routes = table_on(&[
        ("web", "a.example.com", RouteReason::Routed, "edge"),
        ("web", "b.example.com", RouteReason::Routed, "other"),
        // Another, untargeted object serving the protected hostname on a third tunnel.
        ("api", "a.example.com", RouteReason::Routed, "third"),
    ]);
    let p = policy("staff", 0, vec![target("TunnelBinding", "web")]);
    let guard = guard(&[Arc::new(p)], &routes);
    let closed = Protection::Closed {
        why: WAITING.into(),
    };
    assert_eq!(
        guard.of_tunnel(&tunnel("other")),
        BTreeMap::from([("b.example.com".to_string(), closed.clone())]),
        "the second tunnel renders its hostname closed"
    );
    assert_eq!(
        guard.of_tunnel(&edge()),
        BTreeMap::from([("a.example.com".to_string(), closed.clone())])
    );
    assert_eq!(
        guard.of_tunnel(&tunnel("third")),
        BTreeMap::from([("a.example.com".to_string(), closed)]),
        "protection follows the hostname, whichever object routes it"
    );
    assert_eq!(
        guard.hostnames["a.example.com"].tunnels,
        BTreeSet::from([edge(), tunnel("third")])
    );
}

#[test]
fn unknown_policies_close_every_hostname_not_served_open_before_and_keep_what_was() {
    let before = table_on(&[
        ("web", "a.example.com", RouteReason::Routed, "edge"),
        ("web", "p.example.com", RouteReason::Routed, "edge"),
    ]);
    let staff = policy("staff", 0, vec![target("TunnelBinding", "api")]);
    let known_guard = guard(&[Arc::new(staff.clone())], &before);
    // p is protected (by a binding not routed yet); the policies become unknown, and a new
    // binding routes n; p moves to another tunnel.
    let now = table_on(&[
        ("web", "a.example.com", RouteReason::Routed, "edge"),
        ("web", "n.example.com", RouteReason::Routed, "edge"),
        ("web", "p.example.com", RouteReason::Routed, "other"),
    ]);
    let mut unknown = guard(&[Arc::new(staff)], &now);
    unknown.close_unknown(&now, Some((&before, &known_guard)), "RBAC forbids it");
    let closed = |why: &str| Protection::Closed { why: why.into() };
    assert_eq!(
        unknown.of_tunnel(&edge()),
        BTreeMap::from([("n.example.com".to_string(), closed("RBAC forbids it"))]),
        "a stays open as it was; n is new and stays closed"
    );
    assert_eq!(
        unknown.of_tunnel(&tunnel("other")),
        BTreeMap::from([("p.example.com".to_string(), closed("RBAC forbids it"))]),
        "open on edge before is not open on another tunnel"
    );
    assert_eq!(
        unknown.held(),
        BTreeSet::from(["n.example.com".to_string(), "p.example.com".to_string()]),
        "no new DNS record either"
    );
    // Since the start: nothing was open, everything is closed.
    let mut fresh = guard(&[], &now);
    fresh.close_unknown(&now, None, "RBAC forbids it");
    assert_eq!(fresh.of_tunnel(&edge()).len(), 2);
    assert_eq!(fresh.of_tunnel(&tunnel("other")).len(), 1);
}

#[test]
fn unknown_policies_keep_a_hostname_protected_by_the_last_known_ones_as_it_is() {
    let routes = table(&[("web", "a.example.com", RouteReason::Routed)]);
    let p = recorded(
        policy("staff", 0, vec![target("TunnelBinding", "web")]),
        "a.example.com",
        "aud-a",
    );
    let mut g = guard(&[Arc::new(p)], &routes);
    g.close_unknown(&routes, None, "why");
    assert_eq!(
        g.of_tunnel(&edge()),
        BTreeMap::from([(
            "a.example.com".to_string(),
            Protection::Open {
                team: "acme".into(),
                aud: "aud-a".into()
            }
        )]),
        "behind its application: cloudflared checks the caller"
    );
    assert!(g.unknown.is_empty());
}

#[test]
fn an_application_listed_to_retire_opens_nothing() {
    let routes = table(&[("web", "a.example.com", RouteReason::Routed)]);
    let mut p = recorded(
        policy("staff", 0, vec![target("TunnelBinding", "web")]),
        "a.example.com",
        "aud-a",
    );
    let mut status = p.status.take().expect("status");
    // As an earlier release listed a removed target's applications.
    if let Some(t) = status.targets.as_mut().and_then(|t| t.first_mut()) {
        t.reason = Some("Retiring".into());
    }
    let hostnames = status.targets.as_ref().expect("targets")[0]
        .hostnames
        .clone();
    status.retiring = Some(hostnames);
    p.status = Some(status);
    let g = guard(&[Arc::new(p)], &routes);
    assert_eq!(
        g.of_tunnel(&edge()).get("a.example.com"),
        Some(&Protection::Closed {
            why: WAITING.into()
        })
    );
}
