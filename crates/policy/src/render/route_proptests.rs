//! Properties of the route model over random worlds: input order never matters, one owner per
//! hostname and path (the oldest eligible claim), no rule for a loser, every result renders
//! (here, above both the model and the renderer).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cftunnel_types::ServicePorts;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{OwnerIdentity, RenderOptions, TunnelCredentials, TunnelInput, render_all};
use crate::routes::fixtures::{binding, service, tunnel};
use crate::routes::*;
use cftunnel_types::TunnelBinding;
use cftunnel_types::{TunnelIdentity, TunnelKind};

const NAMESPACES: [&str; 2] = ["a", "b"];
const SERVICES: [&str; 3] = ["web", "api", "db"];

fn pick<T: Clone + std::fmt::Debug + 'static>(items: Vec<T>) -> impl Strategy<Value = T> {
    prop::sample::select(items)
}

fn subject() -> impl Strategy<Value = Value> {
    (
        pick(SERVICES.to_vec()),
        pick(vec![
            None,
            Some("app.example.com"),
            Some("APP.example.com"),
            Some("*.example.com"),
            Some("x.example.com"),
            Some("bad_host"),
        ]),
        pick(vec![None, Some("^/a"), Some("(")]),
        pick(vec![json!(null), json!("http"), json!(81), json!("nope")]),
        pick(vec![
            None,
            Some("https"),
            Some("udp"),
            Some("HTTPS"),
            Some("quic"),
        ]),
        any::<bool>(),
        pick(vec![None, Some("ca.crt")]),
    )
        .prop_map(|(name, fqdn, path, port, protocol, no_tls, ca)| {
            let mut spec = serde_json::Map::new();
            let mut put = |k: &str, v: Option<&str>| {
                if let Some(v) = v {
                    spec.insert(k.into(), json!(v));
                }
            };
            put("fqdn", fqdn);
            put("path", path);
            put("protocol", protocol);
            put("caPool", ca);
            if !port.is_null() {
                spec.insert("port".into(), port);
            }
            spec.insert("noTlsVerify".into(), json!(no_tls));
            json!({"name": name, "spec": spec})
        })
}

fn tunnel_ref() -> impl Strategy<Value = Value> {
    (
        pick(vec!["Tunnel", "ClusterTunnel", "tunnel"]),
        pick(vec!["edge", "ghost"]),
        any::<bool>(),
    )
        .prop_map(
            |(kind, name, quiet)| json!({"kind": kind, "name": name, "disableDNSUpdates": quiet}),
        )
}

fn bindings() -> impl Strategy<Value = Vec<Arc<TunnelBinding>>> {
    prop::collection::vec(
        (
            pick(NAMESPACES.to_vec()),
            0i64..3,
            tunnel_ref(),
            prop::collection::vec(subject(), 1..3),
        ),
        0..6,
    )
    .prop_map(|list| {
        list.into_iter()
            .enumerate()
            .map(|(i, (ns, created, tunnel_ref, subjects))| {
                binding(ns, &format!("b{i}"), created, tunnel_ref, json!(subjects))
            })
            .collect()
    })
}

fn services() -> impl Strategy<Value = Vec<Arc<ServicePorts>>> {
    let one = (
        any::<bool>(),
        0i64..3,
        pick(vec![
            json!({}),
            json!({"cfargotunnel.com/expose-tunnel": "edge"}),
            json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        ]),
        pick(vec![
            json!({}),
            json!({"cfargotunnel.com/hostname": "app.example.com,y.example.com"}),
            json!({"cfargotunnel.com/hostname": "x.example.com", "cfargotunnel.com/path": "^/a"}),
        ]),
        pick(vec![
            json!([{"name": "http", "port": 80}]),
            json!([{"port": 81, "protocol": "UDP"}, {"name": "https", "port": 443}]),
            json!([]),
        ]),
    );
    prop::collection::vec(one, 6).prop_map(|list| {
        list.into_iter()
            .enumerate()
            .filter(|(_, (present, ..))| *present)
            .map(|(i, (_, created, labels, annotations, ports))| {
                let (ns, name) = (NAMESPACES[i / 3], SERVICES[i % 3]);
                service(ns, name, created, labels, annotations, ports)
            })
            .collect()
    })
}

fn world() -> impl Strategy<Value = RouteWorld> {
    (bindings(), services()).prop_map(|(bindings, services)| {
        let mut cluster = tunnel(TunnelKind::ClusterTunnel, "", "edge", "example.com");
        cluster.has_origin_ca_pool = true;
        RouteWorld {
            tunnels: vec![
                tunnel(TunnelKind::Tunnel, "a", "edge", "example.com"),
                tunnel(TunnelKind::Tunnel, "b", "edge", "example.com"),
                cluster,
            ],
            bindings,
            services,
            ..RouteWorld::default()
        }
    })
}

/// A deterministic shuffle driven by `seed`.
fn shuffled<T>(mut items: Vec<T>, seed: u64) -> Vec<T> {
    let mut state = seed | 1;
    for i in (1..items.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = usize::try_from(state >> 33).unwrap_or(0) % (i + 1);
        items.swap(i, j);
    }
    items
}

type AgeKey = (
    Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    String,
    String,
    String,
    SourceKind,
);

/// (creationTimestamp, namespace, name, uid, kind) of every source: the order that decides.
fn ages(world: &RouteWorld) -> BTreeMap<SourceRef, AgeKey> {
    let binding_ages = world
        .bindings
        .iter()
        .map(|b| (SourceKind::TunnelBinding, &b.metadata));
    let service_ages = world
        .services
        .iter()
        .map(|s| (SourceKind::Service, &s.metadata));
    binding_ages
        .chain(service_ages)
        .map(|(kind, meta)| {
            let source = SourceRef::of(kind, meta);
            let key = (
                meta.creation_timestamp.clone(),
                source.namespace.clone(),
                source.name.clone(),
                source.uid.clone(),
                kind,
            );
            (source, key)
        })
        .collect()
}

fn input_for(id: &TunnelIdentity, routes: Vec<crate::routes::Route>) -> TunnelInput {
    let mut spec = json!({"newTunnel": {"name": "t"}, "cloudflare": {"domain": "example.com", "secret": "cf", "accountId": "0123456789abcdef0123456789abcdef"}});
    if id.kind == TunnelKind::ClusterTunnel {
        spec["originCaPool"] = json!("pool");
    }
    let id_text = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    TunnelInput {
        identity: OwnerIdentity {
            kind: id.kind,
            namespace: "ns".into(),
            name: id.name.clone(),
            uid: "u".into(),
        },
        spec: serde_json::from_value(spec).unwrap_or_else(|e| panic!("spec: {e}")),
        tunnel_id: id_text.into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: "t".into(),
        domain: "example.com".into(),
        credentials: TunnelCredentials {
            account_tag: "a".into(),
            secret_b64: "cw==".into(),
            tunnel_id: id_text.into(),
        },
        origin_ca_pem: None,
        routes,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_result_does_not_depend_on_input_order(world in world(), seed in any::<u64>()) {
        let expected = compute_routes(&world);
        let mut other = world.clone();
        other.tunnels = shuffled(other.tunnels, seed);
        other.bindings = shuffled(other.bindings, seed.rotate_left(7));
        other.services = shuffled(other.services, seed.rotate_left(13));
        prop_assert_eq!(compute_routes(&other), expected);
    }

    #[test]
    fn each_hostname_and_path_has_exactly_one_owner_the_oldest(world in world()) {
        let table = compute_routes(&world);
        let ages = ages(&world);
        let entries: Vec<(&TunnelIdentity, &RouteEntry)> =
            table.tunnels.iter().flat_map(|(id, t)| t.entries.iter().map(move |e| (id, &**e))).collect();
        let mut owners: BTreeMap<(&str, Option<&str>), &RouteEntry> = BTreeMap::new();
        let mut tunnel_of: BTreeMap<&str, &TunnelIdentity> = BTreeMap::new();
        for (id, entry) in &entries {
            if entry.reason.is_served() {
                let key = (entry.hostname.as_str(), entry.path.as_deref());
                prop_assert!(owners.insert(key, entry).is_none(), "two owners of {:?}", key);
                let first = tunnel_of.entry(&entry.hostname).or_insert(id);
                prop_assert_eq!(*first, *id, "{} served by two tunnels", entry.hostname);
            }
        }
        for (_, entry) in &entries {
            if entry.reason != RouteReason::HostnameConflict {
                continue;
            }
            // A loser lost to an older (or same-object, earlier) served claim on its hostname.
            let winner_age = entries
                .iter()
                .filter(|(_, e)| e.reason.is_served() && e.hostname == entry.hostname)
                .map(|(_, e)| &ages[&e.source])
                .min();
            prop_assert!(winner_age.is_some_and(|w| w <= &ages[&entry.source]), "{:?}", entry);
        }
    }

    #[test]
    fn routes_are_exactly_the_served_entries_and_always_render(world in world()) {
        let table = compute_routes(&world);
        let options = RenderOptions { cloudflared_image: "cloudflare/cloudflared:2026.11.0".into() };
        for (id, tunnel) in &table.tunnels {
            let served: BTreeSet<(&str, Option<&str>, &str)> = tunnel
                .entries
                .iter()
                .filter(|e| e.reason.is_served())
                .map(|e| (e.hostname.as_str(), e.path.as_deref(), e.service.as_str()))
                .collect();
            let routed: BTreeSet<(&str, Option<&str>, &str)> = tunnel
                .routes
                .iter()
                .map(|r| (r.hostname.as_str(), r.path.as_deref(), r.service.as_str()))
                .collect();
            prop_assert_eq!(tunnel.routes.len(), routed.len());
            prop_assert_eq!(&served, &routed);
            let dns: BTreeSet<&str> = tunnel.dns.iter().map(|d| d.fqdn.as_str()).collect();
            let hosts: BTreeSet<&str> = routed.iter().map(|r| r.0).collect();
            prop_assert_eq!(dns, hosts);
            let rendered = render_all(&input_for(id, tunnel.routes.clone()), &options);
            prop_assert!(rendered.is_ok(), "{}: {:?}", id, rendered.err());
        }
        for status in table.sources.values() {
            let served = status.routes.iter().filter(|e| e.reason.is_served()).count();
            prop_assert_eq!(status.ready_status() == "True", status.reason <= RouteReason::UdpPort);
            prop_assert!(served > 0 || status.hostnames().is_empty());
            prop_assert!(status.reason == RouteReason::Routed || !status.message.is_empty());
        }
    }
}
