//! Contract between the Cloudflare client, the simulator and Cloudflare's OpenAPI subset:
//! every operation the client uses is round-tripped client → simulator, and every request the
//! client sends and every answer the simulator gives validates against the subset.
mod openapi;

use axum::body::Body;
use cftunnel_cloudflare::Transport;
use cftunnel_cloudflare::{
    BatchDelete, BatchUpdate, CloudflareClient, CommentFilter, ConfigSrc, Credentials, DnsBatch,
    DnsRecordFilter, DnsRecordType, NewDnsRecord, RateLimit, TunnelFilter, TunnelToken, ZoneFilter,
};
use cftunnel_sim::{Fault, LoggedRequest, Operation, SimConfig, Simulator};
use http::{Method, Request};
use openapi::OpenApi;
use serde_json::json;
use tower::ServiceExt;

const TOKEN: &str = "contract-test-token";

fn simulator() -> Simulator {
    Simulator::new(SimConfig {
        account_name: "Contract".into(),
        account_id: None,
        zones: vec!["example.com".into()],
        pending_zones: Vec::new(),
        tokens: vec![TOKEN.into()],
        api_keys: vec![("ops@example.com".into(), "global-key".into())],
        ..SimConfig::default()
    })
}

fn client(sim: &Simulator, credentials: Credentials) -> CloudflareClient {
    CloudflareClient::builder(credentials)
        .transport(Transport::InProcess(sim.router()))
        .rate_limit(RateLimit {
            per_second: 1000,
            burst: 1000,
        })
        .build()
        .expect("client")
}

fn check_log(api: &OpenApi, log: &[LoggedRequest]) {
    for entry in log {
        let op = entry
            .operation
            .unwrap_or_else(|| panic!("no route for {} {}", entry.method, entry.path));
        // The account-scoped token verify is newer than the subset; it shares the user verify's shape.
        let op_id = op.operation_id().unwrap_or("user-api-tokens-verify-token");
        api.validate_request(op_id, entry.request_body.as_ref())
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.validate_query(op_id, &entry.query)
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.check_response(op_id, entry);
    }
}

#[test]
fn every_simulated_operation_is_in_the_subset() {
    let api = OpenApi::load();
    let access = OpenApi::load_access();
    let certificates = OpenApi::load_certificates();
    let networks = OpenApi::load_networks();
    let hostname_routes = OpenApi::load_hostname_routes();
    for op in Operation::ALL {
        let subset = if op.is_access() {
            &access
        } else if op.is_certificates() {
            &certificates
        } else if op.is_networks() {
            &networks
        } else if op.is_hostname_routes() {
            &hostname_routes
        } else {
            &api
        };
        match op.operation_id() {
            Some(id) => assert!(subset.has_operation(id), "{op:?} → {id}"),
            None => assert_eq!(op, Operation::VerifyAccountToken),
        }
    }
}

#[tokio::test]
async fn every_client_operation_round_trips_and_validates() {
    let sim = simulator();
    let cf = client(&sim, Credentials::ApiToken(TOKEN.into()));
    let account = sim.account_id();
    let zone = sim.zone_id("example.com").expect("zone");

    let verified = cf.verify_token(Some(&account)).await.expect("verify");
    assert_eq!(format!("{:?}", verified.status), "Active");
    let accounts = cf.list_accounts(Some("Contract")).await.expect("accounts");
    assert_eq!(
        accounts.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        vec![account.as_str()]
    );
    let zones = cf
        .list_zones(&ZoneFilter {
            name: Some("example.com".into()),
            account_id: Some(account.clone()),
            status: None,
        })
        .await
        .expect("zones");
    assert_eq!(zones.len(), 1);
    assert_eq!(cf.get_zone(&zone).await.expect("zone").name, "example.com");

    let secret = [7u8; 32];
    let tunnel = cf
        .create_tunnel(&account, "contract", &secret, ConfigSrc::Local)
        .await
        .expect("create");
    let duplicate = cf
        .create_tunnel(&account, "contract", &secret, ConfigSrc::Local)
        .await
        .expect_err("1013");
    assert!(duplicate.is_conflict_tunnel_name(), "{duplicate}");
    let found = cf
        .find_live_tunnel(&account, "contract")
        .await
        .expect("find")
        .expect("live tunnel");
    assert_eq!(found.id, tunnel.id);
    let listed = cf
        .list_tunnels(&account, &TunnelFilter::live_named("contract"))
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        cf.get_tunnel(&account, &tunnel.id).await.expect("get").name,
        "contract"
    );
    let token = cf.tunnel_token(&account, &tunnel.id).await.expect("token");
    let decoded = TunnelToken::decode(token.expose()).expect("token decodes");
    assert!(
        decoded.secret_matches(&secret),
        "the token carries the secret that was sent"
    );

    // A remotely-managed tunnel's configuration: versions grow with each PUT.
    let remote = cf
        .create_tunnel(
            &account,
            "contract-remote",
            &[8u8; 32],
            ConfigSrc::Cloudflare,
        )
        .await
        .expect("create remote");
    assert!(remote.is_remotely_managed());
    let config = json!({
        "ingress": [
            {"hostname": "app.example.com", "service": "http://web.apps.svc:80",
             "originRequest": {"connectTimeout": 30, "noTLSVerify": true}},
            {"service": "http_status:404"}
        ],
        "originRequest": {"keepAliveTimeout": 90}
    });
    let first = cf
        .put_tunnel_configuration(&account, &remote.id, &config)
        .await
        .expect("put configuration");
    let second = cf
        .put_tunnel_configuration(&account, &remote.id, &config)
        .await
        .expect("put configuration again");
    assert!(second.version > first.version, "{first:?} then {second:?}");
    let held = cf
        .tunnel_configuration(&account, &remote.id)
        .await
        .expect("get configuration");
    let mut answered = config.clone();
    answered["warp-routing"] = json!({"enabled": false});
    answered["ingress"][1]["originRequest"] = json!({});
    assert_eq!(
        (held.version, held.config),
        (second.version, Some(answered))
    );

    assert!(sim.connect_tunnel(&tunnel.id));
    assert_eq!(
        cf.list_tunnel_connections(&account, &tunnel.id)
            .await
            .expect("connections")
            .len(),
        1
    );
    let busy = cf
        .delete_tunnel(&account, &tunnel.id, false)
        .await
        .expect_err("1022");
    assert!(busy.is_active_connections(), "{busy}");
    cf.clean_up_tunnel_connections(&account, &tunnel.id, None)
        .await
        .expect("clean up");
    let deleted = cf
        .delete_tunnel(&account, &tunnel.id, false)
        .await
        .expect("delete");
    assert!(deleted.is_deleted());
    let gone = cf
        .get_tunnel(&account, &tunnel.id)
        .await
        .expect("a deleted tunnel still answers");
    assert!(gone.deleted_at.is_some());

    let cname = NewDnsRecord::tunnel_cname(
        "app.example.com",
        &tunnel.id,
        Some("cftunnel Tunnel ns/t".into()),
    );
    let record = cf
        .create_dns_record(&zone, &cname)
        .await
        .expect("create CNAME");
    let exists = cf
        .create_dns_record(&zone, &cname)
        .await
        .expect_err("81053");
    assert!(exists.is_record_exists(), "{exists}");
    let txt = NewDnsRecord::txt(
        "_managed.app.example.com",
        "\"{\\\"DnsId\\\":\\\"x\\\"}\"",
        None,
    );
    cf.create_dns_record(&zone, &txt).await.expect("create TXT");
    let by_name = DnsRecordFilter {
        record_type: Some(DnsRecordType::Cname),
        name: Some("app.example.com".into()),
        ..Default::default()
    };
    assert_eq!(
        cf.list_dns_records(&zone, &by_name)
            .await
            .expect("list")
            .len(),
        1
    );
    let candidates = DnsRecordFilter {
        record_type: Some(DnsRecordType::Txt),
        name_startswith: Some("_managed.".into()),
        ..Default::default()
    };
    assert_eq!(
        cf.list_dns_records(&zone, &candidates)
            .await
            .expect("list TXT")
            .len(),
        1
    );
    let by_comment = DnsRecordFilter {
        comment: Some(CommentFilter::StartsWith("cftunnel ".into())),
        content: Some(format!("{}.cfargotunnel.com", tunnel.id)),
        ..Default::default()
    };
    assert_eq!(
        cf.list_dns_records(&zone, &by_comment)
            .await
            .expect("list by comment")
            .len(),
        1
    );
    assert_eq!(
        cf.get_dns_record(&zone, &record.id)
            .await
            .expect("get")
            .content,
        cname.content
    );
    let repointed = NewDnsRecord::tunnel_cname(
        "app.example.com",
        "11111111-2222-4333-8444-555555555555",
        None,
    );
    assert!(
        cf.update_dns_record(&zone, &record.id, &repointed)
            .await
            .expect("put")
            .content
            .starts_with("11111111-")
    );
    let commented =
        NewDnsRecord::tunnel_cname("app.example.com", &tunnel.id, Some("patched".into()));
    assert_eq!(
        cf.patch_dns_record(&zone, &record.id, &commented)
            .await
            .expect("patch")
            .comment
            .as_deref(),
        Some("patched")
    );
    // One batch: a patch of the CNAME and a new CNAME + TXT pair; then one that is refused.
    let batch = DnsBatch {
        patches: vec![BatchUpdate {
            id: record.id.clone(),
            record: NewDnsRecord::tunnel_cname("app.example.com", &tunnel.id, Some("b".into())),
        }],
        posts: vec![
            NewDnsRecord::tunnel_cname("api.example.com", &tunnel.id, None),
            NewDnsRecord::txt("_managed.api.example.com", "\"v\"", None),
        ],
        ..DnsBatch::default()
    };
    let done = cf.batch_dns_records(&zone, &batch).await.expect("batch");
    assert_eq!(done.patches[0].comment.as_deref(), Some("b"));
    assert_eq!(
        done.posts
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["api.example.com", "_managed.api.example.com"]
    );
    let refused = cf
        .batch_dns_records(
            &zone,
            &DnsBatch {
                deletes: vec![BatchDelete {
                    id: done.posts[1].id.clone(),
                }],
                posts: vec![NewDnsRecord::tunnel_cname(
                    "api.example.com",
                    &tunnel.id,
                    None,
                )],
                ..DnsBatch::default()
            },
        )
        .await
        .expect_err("81053");
    assert!(refused.is_record_exists(), "{refused}");
    assert!(
        cf.get_dns_record(&zone, &done.posts[1].id).await.is_ok(),
        "a refused batch deletes nothing"
    );
    cf.delete_dns_record(&zone, &record.id)
        .await
        .expect("delete record");
    let missing = cf
        .delete_dns_record(&zone, &record.id)
        .await
        .expect_err("404");
    assert!(missing.is_not_found());

    // The global API key scheme is accepted everywhere too.
    let keyed = client(
        &sim,
        Credentials::ApiKey {
            email: "ops@example.com".into(),
            key: "global-key".into(),
        },
    );
    assert_eq!(keyed.get_zone(&zone).await.expect("zone by key").id, zone);

    let log = sim.request_log();
    let used: std::collections::BTreeSet<Operation> =
        log.iter().filter_map(|l| l.operation).collect();
    let expected: std::collections::BTreeSet<Operation> = Operation::ALL
        .into_iter()
        // The Access calls are round-tripped by cloudflare_access_contract, the edge
        // certificate ones by cloudflare_certificates_contract, the private-network ones by
        // cloudflare_networks_contract.
        .filter(|op| {
            !matches!(op, Operation::VerifyAccountToken)
                && !op.is_access()
                && !op.is_certificates()
                && !op.is_networks()
                && !op.is_hostname_routes()
        })
        .collect();
    assert_eq!(
        used, expected,
        "the client exercises every operation it needs"
    );
    check_log(&OpenApi::load(), &log);
}

async fn raw(sim: &Simulator, method: Method, path: &str, token: Option<&str>, body: Option<&str>) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
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

#[tokio::test]
async fn error_answers_validate_against_the_subset() {
    let sim = simulator();
    let account = sim.account_id();
    let zone = sim.zone_id("example.com").expect("zone");
    let tunnels = format!("/accounts/{account}/cfd_tunnel");
    raw(&sim, Method::GET, "/zones", None, None).await; // 401
    raw(&sim, Method::GET, "/zones", Some("wrong"), None).await; // 403
    raw(&sim, Method::POST, &tunnels, Some(TOKEN), Some("{")).await; // 400 malformed JSON
    raw(&sim, Method::POST, &tunnels, Some(TOKEN), Some("{}")).await; // 400 missing name
    raw(
        &sim,
        Method::GET,
        &format!("{tunnels}/6ff42ae2-765d-4adf-8112-31c55c1551ef"),
        Some(TOKEN),
        None,
    )
    .await; // 404
    raw(
        &sim,
        Method::GET,
        &format!("/zones/{zone}/dns_records/{}", "0".repeat(32)),
        Some(TOKEN),
        None,
    )
    .await; // 404
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 5));
    raw(&sim, Method::GET, "/zones", Some(TOKEN), None).await; // 429
    sim.inject(Operation::GetZone, Fault::fail_next(1, 503));
    raw(
        &sim,
        Method::GET,
        &format!("/zones/{zone}"),
        Some(TOKEN),
        None,
    )
    .await; // 503
    let log = sim.request_log();
    let statuses: Vec<u16> = log.iter().map(|l| l.status).collect();
    assert_eq!(statuses, vec![401, 403, 400, 400, 404, 404, 429, 503]);
    let api = OpenApi::load();
    for entry in &log {
        let op = entry.operation.expect("routed");
        api.check_response(op.operation_id().expect("in the subset"), entry);
    }
}

#[test]
fn the_validator_catches_a_body_the_schema_forbids() {
    // Guards the guard: the checks above would pass vacuously if validation accepted anything.
    let api = OpenApi::load();
    let zone_missing_fields = json!({"success": true, "errors": [], "messages": [], "result": {"id": "x", "name": "example.com"}});
    assert!(
        api.validate_response("zones-0-get", 200, &zone_missing_fields)
            .is_err()
    );
    let tunnel_without_name = json!({"config_src": "local"});
    assert!(
        api.validate_request(
            "cloudflare-tunnel-create-a-cloudflare-tunnel",
            Some(&tunnel_without_name)
        )
        .is_err()
    );
}

/// The simulator's check of a PUT configuration agrees with the real cloudflared's check of the
/// same rules at start-up (`ingress validate`), for the rules the simulator checks: a service on
/// every rule, the catch-all last and only last. Needs `CFTUNNEL_CLOUDFLARED`.
#[tokio::test]
async fn the_simulator_refuses_a_configuration_exactly_when_cloudflared_does() {
    let cloudflared = match std::env::var_os("CFTUNNEL_CLOUDFLARED") {
        Some(path) if !path.is_empty() => std::path::PathBuf::from(path),
        _ => panic!("set CFTUNNEL_CLOUDFLARED to a cloudflared binary"),
    };
    let sim = simulator();
    let cf = client(&sim, Credentials::ApiToken(TOKEN.into()));
    let account = sim.account_id();
    let tunnel = cf
        .create_tunnel(&account, "rules", &[9u8; 32], ConfigSrc::Cloudflare)
        .await
        .expect("create");
    let app = json!({"hostname": "app.example.com", "service": "http://web:80"});
    let cases = [
        (
            "a route, then the catch-all",
            json!([app, {"service": "http_status:404"}]),
        ),
        ("no catch-all", json!([app])),
        (
            "the catch-all first",
            json!([{"service": "http_status:404"}, app]),
        ),
        (
            "a `*` hostname last",
            json!([app, {"hostname": "*", "service": "http_status:404"}]),
        ),
        (
            "a path-only rule, then the catch-all",
            json!([{"path": "^/api", "service": "http://api:80"}, {"service": "http_status:404"}]),
        ),
        (
            "a path on the last rule",
            json!([app, {"hostname": "*", "path": "^/x", "service": "http_status:404"}]),
        ),
        (
            "a rule without a service",
            json!([{"hostname": "app.example.com"}, {"service": "http_status:404"}]),
        ),
        (
            "only the catch-all",
            json!([{"service": "http_status:503"}]),
        ),
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("config.yaml");
    for (name, ingress) in cases {
        let document = json!({ "ingress": ingress });
        let simulated = cf
            .put_tunnel_configuration(&account, &tunnel.id, &document)
            .await
            .is_ok();
        std::fs::write(&file, document.to_string()).expect("write");
        let output = std::process::Command::new(&cloudflared)
            .args(["tunnel", "--config"])
            .arg(&file)
            .args(["ingress", "validate"])
            .output()
            .expect("run cloudflared");
        assert_eq!(
            simulated,
            output.status.success(),
            "{name}: the simulator {} it, cloudflared says: {}",
            if simulated { "accepts" } else { "refuses" },
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
