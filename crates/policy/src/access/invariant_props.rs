//! The Access invariant over random worlds, checked on what a tunnel renders (the guard's
//! protections applied by `render::protection::protect`), after every step of a random sequence
//! of events: routes added, removed and moved between tunnels (a source routing through several
//! tunnels included), policies created, edited, recorded and deleted, the policies becoming
//! unknown and known again. Statuses are the memory: a step may also start over from them, as
//! a restart does.
//!
//! The invariant: for every tunnel and every hostname it serves, if a live AccessPolicy targets
//! an object routing that hostname (through any tunnel), the tunnel's rules for it are closed
//! (`http_status:503`) or carry `access` with an AUD a live policy targeting it records for it
//! under its targets (never one listed to retire). While the policies are unknown, no rule is
//! open that was not open in the last render made while they were known.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::{AccessGuard, guard};
use crate::render::protection::{CLOSED_SERVICE, protect};
use crate::routes::{
    OriginRequest, Route, RouteEntry, RouteReason, RouteTable, SourceKind, SourceRef, SourceStatus,
    TunnelRoutes,
};
use cftunnel_types::access_policy::{
    AccessAllow, AccessPolicy, AccessPolicySpec, AccessPolicyStatus, PolicyTargetRef,
    ProtectedHostname, TargetStatus,
};
use cftunnel_types::{TunnelIdentity, TunnelKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const TUNNELS: usize = 3;
const SOURCES: usize = 4;
const HOSTS: usize = 4;
const POLICIES: usize = 3;

fn tunnel(i: usize) -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: format!("t{i}"),
    }
}

fn host(i: usize) -> String {
    format!("h{i}.example.com")
}

fn source_name(i: usize) -> String {
    format!("s{i}")
}

/// One world: routes (source, hostname, tunnel, served?), policies, and whether the policies
/// can be read.
#[derive(Clone, Debug, Default)]
struct World {
    routes: BTreeSet<(usize, usize, usize, bool)>,
    policies: BTreeMap<usize, PolicyState>,
    unknown: bool,
    /// While unknown: the policies as last read (none after a restart while unknown).
    last_read: Option<BTreeMap<usize, PolicyState>>,
}

#[derive(Clone, Debug, Default)]
struct PolicyState {
    targets: BTreeSet<usize>,
    deleting: bool,
    /// hostname → (AUD, listed to retire).
    recorded: BTreeMap<usize, (String, bool)>,
}

/// A change to the world.
#[derive(Clone, Debug)]
enum Step {
    Route(usize, usize, usize, bool),
    Unroute(usize, usize, usize),
    Target(usize, usize),
    Untarget(usize, usize),
    /// The Access reconciler records (or retires) an application.
    Record(usize, usize, u8, bool),
    Forget(usize, usize),
    DeletePolicy(usize),
    Policies(bool),
    /// A restart: everything is computed again from the objects (no baseline).
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    let (t, s, h, p) = (0..TUNNELS, 0..SOURCES, 0..HOSTS, 0..POLICIES);
    prop_oneof![
        4 => (s.clone(), h.clone(), t.clone(), prop::bool::weighted(0.85))
            .prop_map(|(s, h, t, served)| Step::Route(s, h, t, served)),
        2 => (s.clone(), h.clone(), t).prop_map(|(s, h, t)| Step::Unroute(s, h, t)),
        3 => (p.clone(), s.clone()).prop_map(|(p, s)| Step::Target(p, s)),
        1 => (p.clone(), s).prop_map(|(p, s)| Step::Untarget(p, s)),
        3 => (p.clone(), h.clone(), any::<u8>(), prop::bool::weighted(0.2))
            .prop_map(|(p, h, n, r)| Step::Record(p, h, n, r)),
        1 => (p.clone(), h).prop_map(|(p, h)| Step::Forget(p, h)),
        1 => p.prop_map(Step::DeletePolicy),
        1 => any::<bool>().prop_map(Step::Policies),
        1 => Just(Step::Restart),
    ]
}

impl World {
    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Route(s, h, t, served) => {
                self.routes.retain(|r| (r.0, r.1, r.2) != (s, h, t));
                self.routes.insert((s, h, t, served));
            }
            Step::Unroute(s, h, t) => self.routes.retain(|r| (r.0, r.1, r.2) != (s, h, t)),
            Step::Target(p, s) => {
                self.policies.entry(p).or_default().targets.insert(s);
            }
            Step::Untarget(p, s) => {
                if let Some(policy) = self.policies.get_mut(&p) {
                    policy.targets.remove(&s);
                }
            }
            Step::Record(p, h, n, retiring) => {
                if let Some(policy) = self.policies.get_mut(&p) {
                    policy
                        .recorded
                        .insert(h, (format!("aud-{p}-{h}-{n}"), retiring));
                }
            }
            Step::Forget(p, h) => {
                if let Some(policy) = self.policies.get_mut(&p) {
                    policy.recorded.remove(&h);
                }
            }
            Step::DeletePolicy(p) => {
                if let Some(policy) = self.policies.get_mut(&p) {
                    policy.deleting = true;
                }
            }
            Step::Policies(known) => {
                if !known && !self.unknown {
                    self.last_read = Some(self.policies.clone());
                }
                self.unknown = !known;
            }
            Step::Restart => {
                if self.unknown {
                    self.last_read = Some(BTreeMap::new());
                }
            }
        }
    }

    fn table(&self) -> RouteTable {
        let mut table = RouteTable::default();
        let mut tunnels: BTreeMap<TunnelIdentity, TunnelRoutes> = BTreeMap::new();
        for &(s, h, t, served) in &self.routes {
            let source = Arc::new(SourceRef {
                kind: SourceKind::TunnelBinding,
                namespace: "shop".into(),
                name: source_name(s),
                uid: format!("uid-{s}"),
            });
            let entry = Arc::new(RouteEntry {
                hostname: host(h),
                path: None,
                service: "http://web.shop.svc:80".into(),
                source: source.clone(),
                reason: if served {
                    RouteReason::Routed
                } else {
                    RouteReason::HostnameConflict
                },
                message: String::new(),
            });
            // A source's status names the tunnel of its first route, as the route model's does
            // for a route with parents on two tunnels.
            let status = table.sources.entry(source).or_insert_with(|| SourceStatus {
                tunnel: Some(tunnel(t)),
                routes: Vec::new(),
                reason: RouteReason::Routed,
                message: String::new(),
            });
            status.routes.push(entry.clone());
            let routes = tunnels.entry(tunnel(t)).or_default();
            routes.entries.push(entry);
            if served {
                routes.routes.push(Route {
                    hostname: host(h),
                    path: None,
                    path_kind: Default::default(),
                    service: "http://web.shop.svc:80".into(),
                    origin_request: OriginRequest::default(),
                });
            }
        }
        table.tunnels = tunnels.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        table
    }

    /// The policies the watch holds: all of them, or while unknown those last read.
    fn policies(&self) -> Vec<Arc<AccessPolicy>> {
        let read = match (&self.last_read, self.unknown) {
            (Some(last), true) => last,
            _ => &self.policies,
        };
        read.iter()
            .map(|(&p, state)| {
                let mut policy = AccessPolicy::new(
                    &format!("p{p}"),
                    AccessPolicySpec {
                        target_refs: state
                            .targets
                            .iter()
                            .map(|&s| PolicyTargetRef {
                                group: "networking.cfargotunnel.com".into(),
                                kind: "TunnelBinding".into(),
                                name: source_name(s),
                                namespace: None,
                            })
                            .collect(),
                        allow: AccessAllow {
                            emails: vec!["a@example.com".into()],
                            ..AccessAllow::default()
                        },
                        policies: Vec::new(),
                        session_duration: None,
                    },
                );
                policy.metadata.namespace = Some("shop".into());
                policy.metadata.creation_timestamp = Some(Time(
                    jiff::Timestamp::from_second(1_700_000_000 + p as i64).unwrap_or_default(),
                ));
                if state.deleting {
                    policy.metadata.deletion_timestamp = policy.metadata.creation_timestamp.clone();
                }
                let app = |h: usize, aud: &str| ProtectedHostname {
                    hostname: host(h),
                    application_id: format!("app-{aud}"),
                    aud: aud.to_string(),
                    team: "acme".into(),
                    account_id: "acct".into(),
                };
                let under_targets: Vec<ProtectedHostname> = state
                    .recorded
                    .iter()
                    .filter(|(_, (_, r))| !r)
                    .map(|(&h, (aud, _))| app(h, aud))
                    .collect();
                let retiring: Vec<ProtectedHostname> = state
                    .recorded
                    .iter()
                    .filter(|(_, (_, r))| *r)
                    .map(|(&h, (aud, _))| app(h, aud))
                    .collect();
                // Half the retiring ones the way an earlier release listed them.
                let (legacy, listed): (Vec<_>, Vec<_>) = retiring
                    .into_iter()
                    .partition(|h| h.aud.ends_with(['0', '2', '4', '6', '8']));
                let mut targets = vec![TargetStatus {
                    group: "networking.cfargotunnel.com".into(),
                    kind: "TunnelBinding".into(),
                    name: source_name(0),
                    hostnames: under_targets,
                    reason: None,
                    message: None,
                }];
                if !legacy.is_empty() {
                    targets.push(TargetStatus {
                        group: "networking.cfargotunnel.com".into(),
                        kind: "TunnelBinding".into(),
                        name: "gone".into(),
                        hostnames: legacy,
                        reason: Some("Retiring".into()),
                        message: None,
                    });
                }
                policy.status = Some(AccessPolicyStatus {
                    conditions: None,
                    targets: Some(targets),
                    retiring: (!listed.is_empty()).then_some(listed),
                });
                Arc::new(policy)
            })
            .collect()
    }

    /// The AUDs a live policy targeting a source that serves `h` records for it (not retiring).
    fn allowed_auds(&self, h: usize) -> Option<BTreeSet<String>> {
        let serving: BTreeSet<usize> = self
            .routes
            .iter()
            .filter(|r| r.1 == h && r.3)
            .map(|r| r.0)
            .collect();
        let targeting: Vec<&PolicyState> = self
            .policies
            .values()
            .filter(|p| !p.deleting && p.targets.iter().any(|s| serving.contains(s)))
            .collect();
        if targeting.is_empty() {
            return None;
        }
        // While unknown, the watch still holds what it last read: an application recorded
        // then is checked until the policies can be read again (one replaced meanwhile is
        // deleted, so its AUD lets no one in).
        let last_read = match (&self.last_read, self.unknown) {
            (Some(last), true) => last.values().collect(),
            _ => Vec::new(),
        };
        Some(
            targeting
                .into_iter()
                .chain(last_read)
                .filter_map(|p| p.recorded.get(&h))
                .filter(|(_, retiring)| !retiring)
                .map(|(aud, _)| aud.clone())
                .collect(),
        )
    }
}

/// Per tunnel, the rules it renders: hostname → (service, AUD checked).
type Rendered = BTreeMap<TunnelIdentity, BTreeMap<String, (String, Option<String>)>>;

fn render(table: &RouteTable, guard: &AccessGuard) -> Rendered {
    table
        .tunnels
        .iter()
        .map(|(t, routes)| {
            let rules = protect(&routes.routes, &guard.of_tunnel(t))
                .into_iter()
                .map(|r| {
                    let aud = r
                        .origin_request
                        .access
                        .as_ref()
                        .and_then(|a| a.aud_tag.first().cloned());
                    (r.hostname, (r.service, aud))
                })
                .collect();
            (t.clone(), rules)
        })
        .collect()
}

fn is_open_without_access(rule: &(String, Option<String>)) -> bool {
    rule.0 != CLOSED_SERVICE && rule.1.is_none()
}

/// Checks the invariant on one render; `Err` says which rule breaks it.
fn check(world: &World, rendered: &Rendered, baseline: Option<&Rendered>) -> Result<(), String> {
    for (t, rules) in rendered {
        for (hostname, rule) in rules {
            let Some(h) = (0..HOSTS).find(|&h| host(h) == *hostname) else {
                continue;
            };
            let was_open = baseline
                .and_then(|b| b.get(t))
                .and_then(|rules| rules.get(hostname))
                .is_some_and(is_open_without_access);
            if world.unknown {
                // Unknown: what was open stays open (a policy that cannot be read may have
                // come meanwhile), nothing else is opened.
                if is_open_without_access(rule) && !was_open {
                    return Err(format!(
                        "{t} newly serves {hostname} in the open while the policies are unknown"
                    ));
                }
                if was_open {
                    continue;
                }
            }
            let Some(auds) = world.allowed_auds(h) else {
                continue;
            };
            match &rule.1 {
                _ if rule.0 == CLOSED_SERVICE => {}
                Some(aud) if auds.contains(aud) => {}
                Some(aud) => {
                    return Err(format!(
                        "{t} checks {hostname} against {aud}, not one of {auds:?}"
                    ));
                }
                None => return Err(format!("{t} serves the protected {hostname} in the open")),
            }
        }
    }
    Ok(())
}

/// What the route reconciler does with one world: the guard, closed where the policies are
/// unknown against the last table and guard computed while they were known.
fn publish(
    world: &World,
    known: &mut Option<(RouteTable, AccessGuard, Rendered)>,
) -> (RouteTable, AccessGuard, Rendered) {
    let table = world.table();
    let mut g = guard(&world.policies(), &table);
    if world.unknown {
        g.close_unknown(
            &table,
            known.as_ref().map(|(t, g, _)| (t, g)),
            "the policies cannot be read",
        );
    }
    let rendered = render(&table, &g);
    if !world.unknown {
        *known = Some((table.clone(), g.clone(), rendered.clone()));
    }
    (table, g, rendered)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_protected_hostname_is_ever_rendered_open(steps in prop::collection::vec(step(), 1..40)) {
        let mut world = World::default();
        let mut known: Option<(RouteTable, AccessGuard, Rendered)> = None;
        for (i, s) in steps.iter().enumerate() {
            world.apply(s);
            if matches!(s, Step::Restart) {
                known = None;
            }
            let baseline = known.as_ref().map(|(_, _, r)| r.clone());
            let (_, _, rendered) = publish(&world, &mut known);
            if let Err(broken) = check(&world, &rendered, baseline.as_ref()) {
                prop_assert!(false, "after step {i} ({s:?}): {broken}\nworld: {world:?}");
            }
        }
    }
}
