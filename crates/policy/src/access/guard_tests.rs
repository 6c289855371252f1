use super::*;
use crate::routes::{RouteEntry, RouteReason, SourceStatus};
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

fn table(routes: &[(&str, &str, RouteReason)]) -> RouteTable {
    let mut table = RouteTable::default();
    for (source, host, reason) in routes {
        let source = Arc::new(binding(source));
        let entry = RouteEntry {
            hostname: host.to_string(),
            path: None,
            service: "http://web.shop.svc:80".into(),
            source: source.clone(),
            reason: *reason,
            message: String::new(),
        };
        let status = table.sources.entry(source).or_insert_with(|| SourceStatus {
            tunnel: Some(edge()),
            routes: Vec::new(),
            reason: RouteReason::Routed,
            message: String::new(),
        });
        status.routes.push(entry.into());
    }
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
