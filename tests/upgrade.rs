//! Upgrades and rollbacks touch nothing: on the real API server with KCM and the simulated
//! Cloudflare, the pinned earlier build (`CFTUNNEL_PINNED_BIN`, scripts/build-pinned.sh) runs
//! as `cftunnel run` with the shipped RBAC until a workload of every source converged (a Tunnel
//! of each config source, TunnelBindings, an Ingress, a Gateway API HTTPRoute, an AccessPolicy).
//! It is then replaced by this tree's build, and that one by the pinned build again; after each
//! swap the new process leads, reads the zone and runs a while, and then Cloudflare has seen no
//! write, no cloudflared Deployment's pod template changed and every status is what it was
//! (transition times and observed generations aside).
mod common;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
mod install_support;
#[path = "faults/harness.rs"]
mod process;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cftunnel_sim::{LoggedRequest, Operation};
use cftunnel_testenv::{TestUser, poll_until};
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::gateway::{Gateway, GatewayClass, HTTPRoute};
use cftunnel_types::names::CONTROLLER_NAME;
use cftunnel_types::{Tunnel, TunnelBinding};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{ListParams, PostParams};
use kube::{Api, Resource};
use serde_json::{Value, json};

use harness::{Harness, OPERATOR_USER, TOKEN};
use install_support::install_gateway_api_crds;
use process::Operator;

const API_SECRET: &str = "cloudflare-api";
const LOCAL: &str = "local";
const REMOTE: &str = "remote";
/// Every hostname the workload routes, each one CNAME.
const HOSTS: [&str; 4] = [
    "bind.example.com",
    "remote.example.com",
    "ing.example.com",
    "gw.example.com",
];
const WAIT: Duration = Duration::from_secs(240);
const POLL: Duration = Duration::from_millis(500);
/// How long a new build runs after it has led and read the zone, so a late write is seen.
const SETTLE: Duration = Duration::from_secs(60);
/// A short drift interval, so drift checks run inside the settle time too.
const DRIFT: &str = "20s";
const LEASE_NAMESPACE: &str = "cftunnel-system";
const LEASE: &str = "cftunnel-leader";

/// The pinned earlier build: `CFTUNNEL_PINNED_BIN` (scripts/build-pinned.sh prints its path).
fn pinned_binary() -> PathBuf {
    match std::env::var_os("CFTUNNEL_PINNED_BIN").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!(
            "CFTUNNEL_PINNED_BIN must name the pinned cftunnel build ({other:?}): run \
             scripts/build-pinned.sh and pass the path it prints (scripts/test.sh and .ci/run do)"
        ),
    }
}

fn current_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cftunnel"))
}

/// One operator process of `binary`, named `name` (its POD_NAME and so its lease identity).
fn start(h: &Harness, user: &TestUser, binary: &Path, name: &str) -> Operator {
    Operator::start_binary(
        binary,
        h.plane,
        user.kubeconfig(),
        &h.ns,
        &h.running.url,
        name,
        &["--drift-interval", DRIFT],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_to_this_build_and_rolling_back_writes_nothing() {
    let pinned = pinned_binary();
    let current = current_binary();
    let began = Instant::now();
    let h = Harness::start_stopped("upgrade", &["example.com"]).await;
    install_gateway_api_crds(h.plane);
    h.sim.set_access_team(Some("acme".into()));
    let user = h
        .plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user");

    let mut operator = start(&h, &user, &pinned, "cftunnel-pinned-a");
    wait_leader(&h, &mut operator).await;
    create_workload(&h).await;
    wait_converged(&h, &operator).await;
    let before = settled_snapshot(&h).await;
    eprintln!(
        "pinned build converged after {:.0?}: {} Cloudflare requests, {} writes",
        began.elapsed(),
        h.sim.request_log().len(),
        before.writes
    );

    for (binary, name, what) in [
        (&current, "cftunnel-current", "the upgrade to this build"),
        (
            &pinned,
            "cftunnel-pinned-b",
            "the rollback to the pinned build",
        ),
    ] {
        let log_from = h.sim.request_log().len();
        let stopped = operator.terminate(Duration::from_secs(30)).await;
        assert!(
            stopped,
            "{what}: the old operator did not stop cleanly on SIGTERM"
        );
        operator = start(&h, &user, binary, name);
        wait_leader(&h, &mut operator).await;
        wait_cloudflare_read(&h, &operator, log_from).await;
        tokio::time::sleep(SETTLE).await;
        let after = snapshot(&h).await;
        assert_unchanged(&h, what, &before, &after, &operator);
        eprintln!("{what}: nothing written after {:.0?}", began.elapsed());
    }
    operator.terminate(Duration::from_secs(30)).await;
    eprintln!("upgrade and rollback checked in {:.0?}", began.elapsed());
}

/// The workload: a Tunnel of each config source, a binding to each, an Ingress of cftunnel's
/// class, a Gateway with an HTTPRoute, and an AccessPolicy protecting the local binding.
async fn create_workload(h: &Harness) {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let ns = h.ns.clone();
    create(
        &Api::<Service>::namespaced(h.admin.clone(), &ns),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await;
    h.create_tunnel(
        LOCAL,
        h.spec(API_SECRET, json!({"newTunnel": {"name": "upgrade-local"}})),
    )
    .await;
    h.create_tunnel(
        REMOTE,
        h.spec(
            API_SECRET,
            json!({"newTunnel": {"name": "upgrade-remote"}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    let bindings: Api<TunnelBinding> = Api::namespaced(h.admin.clone(), &ns);
    for (name, tunnel, host) in [
        ("local-web", LOCAL, "bind.example.com"),
        ("remote-web", REMOTE, "remote.example.com"),
    ] {
        create(
            &bindings,
            json!({
                "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
                "metadata": {"name": name},
                "subjects": [{"name": "web", "spec": {"fqdn": host}}],
                "tunnelRef": {"kind": "Tunnel", "name": tunnel},
            }),
        )
        .await;
    }
    let class = format!("cftunnel-{ns}");
    create(
        &Api::<IngressClass>::all(h.admin.clone()),
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": class},
            "spec": {"controller": CONTROLLER_NAME, "parameters": {
                "apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel", "name": LOCAL,
                "scope": "Namespace", "namespace": ns}},
        }),
    )
    .await;
    create(
        &Api::<Ingress>::namespaced(h.admin.clone(), &ns),
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop"},
            "spec": {"ingressClassName": class, "rules": [{"host": "ing.example.com", "http": {
                "paths": [{"path": "/", "pathType": "Prefix",
                           "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]},
        }),
    )
    .await;
    create(
        &Api::<GatewayClass>::all(h.admin.clone()),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": class},
            "spec": {"controllerName": CONTROLLER_NAME, "parametersRef": {
                "group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": LOCAL,
                "namespace": ns}},
        }),
    )
    .await;
    create(
        &Api::<Gateway>::namespaced(h.admin.clone(), &ns),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw"},
            "spec": {"gatewayClassName": class,
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        }),
    )
    .await;
    create(
        &Api::<HTTPRoute>::namespaced(h.admin.clone(), &ns),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["gw.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    )
    .await;
    create(
        &Api::<AccessPolicy>::namespaced(h.admin.clone(), &ns),
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "AccessPolicy",
            "metadata": {"name": "staff"},
            "spec": {
                "targetRefs": [{"group": "networking.cfargotunnel.com", "kind": "TunnelBinding",
                                "name": "local-web"}],
                "allow": {"emails": ["alice@example.com"]},
                "sessionDuration": "8h",
            },
        }),
    )
    .await;
}

async fn create<K>(api: &Api<K>, object: Value) -> K
where
    K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).expect("object json");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create")
}

/// Waits until `operator` holds the leader lease (failing at once if it exits).
async fn wait_leader(h: &Harness, operator: &mut Operator) {
    let leases: Api<Lease> = Api::namespaced(h.admin.clone(), LEASE_NAMESPACE);
    let deadline = Instant::now() + WAIT;
    loop {
        let holder = leases
            .get_opt(LEASE)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        if holder.starts_with(&format!("{}_", operator.name)) || holder == operator.name {
            return;
        }
        assert!(
            operator.is_running(),
            "operator {} exited:\n{}",
            operator.name,
            operator.log()
        );
        assert!(
            Instant::now() < deadline,
            "operator {} did not lead within {WAIT:?} (holder {holder:?}):\n{}",
            operator.name,
            operator.log()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the new process has read from Cloudflare (requests after `from` in the
/// simulator's log) the tunnels (each by id, or the account's list), the zone's records and the
/// Access applications: its reconcilers, its DNS round and its Access pass ran.
async fn wait_cloudflare_read(h: &Harness, operator: &Operator, from: usize) {
    let ids = tunnel_ids(h).await;
    let read = poll_until(
        "the new operator to read the tunnels, the zone and the Access applications",
        WAIT,
        POLL,
        || async {
            let log = h.sim.request_log();
            let since = log.get(from..).unwrap_or_default();
            let seen = |op: Operation| since.iter().any(|r| r.operation == Some(op));
            let tunnels = seen(Operation::ListTunnels)
                || ids
                    .iter()
                    .all(|id| since.iter().any(|r| r.path.contains(id.as_str())));
            (tunnels && seen(Operation::ListDnsRecords) && seen(Operation::ListAccessApps))
                .then_some(())
        },
    )
    .await;
    if let Err(e) = read {
        let ops: Vec<String> = h
            .sim
            .request_log()
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(describe)
            .collect();
        panic!("{e}; requests since: {ops:#?}\n{}", operator.log());
    }
}

async fn tunnel_ids(h: &Harness) -> Vec<String> {
    let mut ids = Vec::new();
    for name in [LOCAL, REMOTE] {
        let tunnel = h.tunnels().get(name).await.expect("tunnel");
        ids.push(tunnel.status.and_then(|s| s.tunnel_id).expect("tunnel id"));
    }
    ids
}

/// The Ready condition's (status, reason) of a status value.
fn ready(status: &Value) -> (String, String) {
    condition(status, "Ready")
}

fn condition(status: &Value, type_: &str) -> (String, String) {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .unwrap_or_default()
}

/// What is not converged yet (empty once it all is).
async fn pending(h: &Harness) -> Vec<String> {
    let statuses = statuses(h).await;
    let mut pending = Vec::new();
    for (key, status) in &statuses {
        let ok = match key.split('/').next().unwrap_or_default() {
            "Tunnel" => ready(status) == ("True".into(), "Ready".into()),
            "TunnelBinding" => ready(status).0 == "True",
            "Ingress" => !status["loadBalancer"]["ingress"].is_null(),
            "GatewayClass" => condition(status, "Accepted").0 == "True",
            "Gateway" => condition(status, "Programmed").0 == "True",
            "HTTPRoute" => status["parents"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| condition(p, "Accepted").0 == "True"),
            "AccessPolicy" => {
                condition(status, "Programmed") == ("True".into(), "Programmed".into())
            }
            _ => true,
        };
        if !ok {
            pending.push(format!("{key}: {status}"));
        }
    }
    let records = h.sim.dns_records("example.com");
    for host in HOSTS {
        let cnames = records
            .iter()
            .filter(|r| r.name == host && r.record_type == "CNAME")
            .count();
        if cnames != 1 {
            pending.push(format!("{cnames} CNAMEs at {host}"));
        }
    }
    if !h
        .sim
        .access_apps()
        .iter()
        .any(|a| a.domain == "bind.example.com")
    {
        pending.push("no Access application for bind.example.com".into());
    }
    pending
}

async fn wait_converged(h: &Harness, operator: &Operator) {
    let done = poll_until("the workload to converge", WAIT, POLL, || async {
        pending(h).await.is_empty().then_some(())
    })
    .await;
    if let Err(e) = done {
        panic!("{e}: {:#?}\n{}", pending(h).await, operator.log());
    }
}

/// What the test compares before and after a swap.
#[derive(Debug, PartialEq)]
struct Snapshot {
    /// Cloudflare write requests (POST, PUT, PATCH, DELETE) so far.
    writes: usize,
    /// Each cloudflared Deployment: its generation and pod template.
    deployments: BTreeMap<String, (i64, Value)>,
    /// `Kind/name` → status, normalised ([`normalise`]).
    statuses: BTreeMap<String, Value>,
}

fn is_write(r: &LoggedRequest) -> bool {
    matches!(r.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
}

fn describe(r: &LoggedRequest) -> String {
    format!(
        "{} {}{} ({:?}) -> {}: {}",
        r.method,
        r.path,
        if r.query.is_empty() {
            String::new()
        } else {
            format!("?{}", r.query)
        },
        r.operation,
        r.status,
        r.request_body
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    )
}

async fn snapshot(h: &Harness) -> Snapshot {
    let writes = h.sim.request_log().iter().filter(|r| is_write(r)).count();
    let deployments = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .list(&ListParams::default())
        .await
        .expect("list deployments")
        .items
        .into_iter()
        .map(|d| {
            let name = d.metadata.name.clone().unwrap_or_default();
            let generation = d.metadata.generation.unwrap_or_default();
            let template =
                serde_json::to_value(&d).expect("deployment json")["spec"]["template"].clone();
            (name, (generation, template))
        })
        .collect();
    let statuses = statuses(h)
        .await
        .into_iter()
        .map(|(k, v)| (k, normalise(v)))
        .collect();
    Snapshot {
        writes,
        deployments,
        statuses,
    }
}

/// A snapshot once nothing moves: two in a row 15 s apart are equal (the pinned build has
/// finished its own writes before the swap is judged).
async fn settled_snapshot(h: &Harness) -> Snapshot {
    let mut last = snapshot(h).await;
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_secs(15)).await;
        let now = snapshot(h).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the workload never settled under the pinned build: last snapshot {last:#?}");
}

/// Every status of the workload as stored, by `Kind/name`.
async fn statuses(h: &Harness) -> BTreeMap<String, Value> {
    let ns = &h.ns;
    let admin = &h.admin;
    let class = format!("cftunnel-{ns}");
    let mut out = BTreeMap::new();
    for name in [LOCAL, REMOTE] {
        let status = status_of(&Api::<Tunnel>::namespaced(admin.clone(), ns), name).await;
        out.insert(format!("Tunnel/{name}"), without_edge_report(status));
    }
    for name in ["local-web", "remote-web"] {
        out.insert(
            format!("TunnelBinding/{name}"),
            status_of(&Api::<TunnelBinding>::namespaced(admin.clone(), ns), name).await,
        );
    }
    out.insert(
        "Ingress/shop".into(),
        status_of(&Api::<Ingress>::namespaced(admin.clone(), ns), "shop").await,
    );
    out.insert(
        format!("GatewayClass/{class}"),
        status_of(&Api::<GatewayClass>::all(admin.clone()), &class).await,
    );
    out.insert(
        "Gateway/gw".into(),
        status_of(&Api::<Gateway>::namespaced(admin.clone(), ns), "gw").await,
    );
    out.insert(
        "HTTPRoute/web".into(),
        status_of(&Api::<HTTPRoute>::namespaced(admin.clone(), ns), "web").await,
    );
    out.insert(
        "AccessPolicy/staff".into(),
        status_of(&Api::<AccessPolicy>::namespaced(admin.clone(), ns), "staff").await,
    );
    out
}

async fn status_of<K>(api: &Api<K>, name: &str) -> Value
where
    K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|o| serde_json::to_value(o).expect("object json")["status"].clone())
        .unwrap_or(Value::Null)
}

/// A tunnel's status without the edge health report (`edge`, `connectors`, `Connected`): it
/// follows Cloudflare's edge and the pods, not the build (a build that reports it adds it after
/// an upgrade, one that does not leaves it as it was).
fn without_edge_report(mut status: Value) -> Value {
    if let Some(map) = status.as_object_mut() {
        map.remove("edge");
        map.remove("connectors");
    }
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conditions.retain(|c| c["type"] != "Connected");
    }
    status
}

/// The status without what may differ between two writers of the same content: transition
/// and other times, and `observedGeneration`, dropped at every depth.
fn normalise(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !ignored(k))
                .map(|(k, v)| (k, normalise(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(normalise).collect()),
        other => other,
    }
}

fn ignored(key: &str) -> bool {
    key == "observedGeneration"
        || key.ends_with("Time")
        || key.ends_with("Timestamp")
        || key.ends_with("At")
}

/// Fails with every difference: each Cloudflare write since, each changed Deployment, each
/// changed status (the object and both values).
fn assert_unchanged(
    h: &Harness,
    what: &str,
    before: &Snapshot,
    after: &Snapshot,
    operator: &Operator,
) {
    let mut problems = Vec::new();
    let log = h.sim.request_log();
    let writes: Vec<String> = log
        .iter()
        .filter(|r| is_write(r))
        .skip(before.writes)
        .map(describe)
        .collect();
    if !writes.is_empty() {
        problems.push(format!(
            "{} Cloudflare write(s):\n  {}",
            writes.len(),
            writes.join("\n  ")
        ));
    }
    for (name, (generation, template)) in &before.deployments {
        match after.deployments.get(name) {
            None => problems.push(format!("Deployment {name} is gone")),
            Some((g, t)) => {
                if g != generation {
                    problems.push(format!("Deployment {name}: generation {generation} -> {g}"));
                }
                if t != template {
                    problems.push(format!(
                        "Deployment {name}: pod template changed:\n  {}",
                        differences("", template, t).join("\n  ")
                    ));
                }
            }
        }
    }
    for name in after.deployments.keys() {
        if !before.deployments.contains_key(name) {
            problems.push(format!("Deployment {name} is new"));
        }
    }
    for (key, old) in &before.statuses {
        let new = after.statuses.get(key).unwrap_or(&Value::Null);
        if new != old {
            problems.push(format!(
                "{key} status changed:\n  {}\n  before: {old}\n  after:  {new}",
                differences("", old, new).join("\n  ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{what} changed what the previous build left:\n{}\n--- operator {} log ---\n{}",
        problems.join("\n"),
        operator.name,
        operator.log()
    );
}

/// Where two JSON values differ, as `path: old -> new` lines.
fn differences(path: &str, old: &Value, new: &Value) -> Vec<String> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    let null = Value::Null;
                    differences(
                        &format!("{path}.{k}"),
                        a.get(k).unwrap_or(&null),
                        b.get(k).unwrap_or(&null),
                    )
                })
                .collect()
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .flat_map(|(i, (x, y))| differences(&format!("{path}[{i}]"), x, y))
            .collect(),
        (a, b) if a == b => Vec::new(),
        (a, b) => vec![format!("{path}: {a} -> {b}")],
    }
}
