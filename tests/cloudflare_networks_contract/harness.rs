//! What the private-network contract tests share: the simulator and its client with two
//! tunnels to route through, the two documents, and the checks of the request log.
use std::collections::BTreeSet;

use axum::body::Body;
use cftunnel_cloudflare::{
    CloudflareClient, ConfigSrc, Credentials, IpRoute, RateLimit, Transport,
};
use cftunnel_sim::{LoggedRequest, Operation, SimConfig, Simulator};
use http::{Method, Request};
use serde_json::Value;
use tower::ServiceExt;

use crate::openapi::OpenApi;

pub const TOKEN: &str = "networks-contract-token";
/// The comment cftunnel marks its routes and networks with.
pub const OURS: &str = "managed-by: cftunnel team-a/office";

/// A simulated account holding two live tunnels, `office` and `lab`, whose creation is left
/// out of the log and the counters.
pub struct Env {
    pub sim: Simulator,
    pub cf: CloudflareClient,
    pub account: String,
    pub office: String,
    pub lab: String,
}

impl Env {
    pub async fn with_tunnels() -> Self {
        let sim = Simulator::new(SimConfig {
            account_name: "Networks contract".into(),
            zones: vec!["example.com".into()],
            tokens: vec![TOKEN.into()],
            ..SimConfig::default()
        });
        let cf = client(&sim);
        let account = sim.account_id();
        let mut ids = Vec::new();
        for name in ["office", "lab"] {
            let tunnel = cf
                .create_tunnel(&account, name, &[7; 32], ConfigSrc::Cloudflare)
                .await
                .expect("tunnel");
            ids.push(tunnel.id);
        }
        sim.reset_counters();
        let lab = ids.pop().expect("lab");
        let office = ids.pop().expect("office");
        Env {
            sim,
            cf,
            account,
            office,
            lab,
        }
    }
}

/// A client of the simulator; a second one is another tool working on the same account.
pub fn client(sim: &Simulator) -> CloudflareClient {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .transport(Transport::InProcess(sim.router()))
        .rate_limit(RateLimit {
            per_second: 1000,
            burst: 1000,
        })
        .max_attempts(1)
        .build()
        .expect("client")
}

/// Both documents, and which one an operation belongs to.
pub struct Documents {
    pub networks: OpenApi,
    pub hostname_routes: OpenApi,
}

impl Documents {
    pub fn load() -> Self {
        Documents {
            networks: OpenApi::load_networks(),
            hostname_routes: OpenApi::load_hostname_routes(),
        }
    }

    pub fn of(&self, op: Operation) -> &OpenApi {
        if op.is_hostname_routes() {
            &self.hostname_routes
        } else {
            &self.networks
        }
    }
}

/// The operation of a logged private-network call and its `operationId`.
fn operation_of(entry: &LoggedRequest) -> (Operation, &'static str) {
    let op = entry
        .operation
        .unwrap_or_else(|| panic!("no route for {} {}", entry.method, entry.path));
    assert!(
        op.is_networks() || op.is_hostname_routes(),
        "{op:?} is not a private-network call"
    );
    (
        op,
        op.operation_id()
            .expect("every private-network call is in a document"),
    )
}

/// Validates every logged request (body, query names) and answer; returns the operations seen.
pub fn check_log(docs: &Documents, log: &[LoggedRequest]) -> BTreeSet<Operation> {
    let mut seen = BTreeSet::new();
    for entry in log {
        let (op, op_id) = operation_of(entry);
        let api = docs.of(op);
        api.validate_request(op_id, entry.request_body.as_ref())
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.validate_query(op_id, &entry.query)
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.check_response(op_id, entry);
        seen.insert(op);
    }
    seen
}

/// Validates every logged answer (for requests sent malformed on purpose).
pub fn check_answers(docs: &Documents, log: &[LoggedRequest]) {
    for entry in log {
        let (op, op_id) = operation_of(entry);
        docs.of(op).check_response(op_id, entry);
    }
}

/// The operations `filter` picks.
pub fn operations(filter: fn(&Operation) -> bool) -> BTreeSet<Operation> {
    Operation::ALL.into_iter().filter(filter).collect()
}

/// The ranges of `routes`, in order.
pub fn networks_of(routes: &[IpRoute]) -> Vec<&str> {
    routes.iter().map(|r| r.network.as_str()).collect()
}

/// A request sent as is, with the token (for bodies and queries the client never sends).
pub async fn raw(sim: &Simulator, method: Method, path: &str, body: Option<Value>) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"));
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(
            body.map(|b| Body::from(b.to_string()))
                .unwrap_or_else(Body::empty),
        )
        .expect("request");
    sim.router().oneshot(request).await.expect("router answers");
}
