//! The real cloudflared is the judge of every config.yaml the render and route tests produce.
//!
//! The check runs those tests again in a child process of this test binary with
//! `CFTUNNEL_RECORD_CONFIGS` set (see `record.rs`), so it sees exactly the configs their own
//! fixtures make (the route model's property tests are left out: random worlds). Each config is
//! given to `cloudflared tunnel --config F ingress validate`, then, for a table of request URLs
//! drawn from its routes (each hostname, a deeper and an upper-case variant, wildcard apexes,
//! each path and near misses, foreign hosts), to `cloudflared tunnel --config F ingress rule URL`:
//! the rule cloudflared picks must be the one the route model says serves the URL
//! ([`crate::routes::serving_route_for_url`]). That makes cloudflared the ground truth for our
//! rule order, wildcards, paths and the catch-all.
//!
//! Needs `CFTUNNEL_CLOUDFLARED`: the path of a cloudflared binary (`.ci/run` sets it). Both
//! cloudflared commands work offline; the credentials file a config names need not exist.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use cftunnel_types::TunnelKind;
use serde::Deserialize;
use serde_json::json;

use super::config::render_config;
use super::input::{OwnerIdentity, TunnelCredentials, TunnelInput};
use super::record::record_config_in;
use crate::routes::record::{RECORD_ENV, RecordedTable, write_in};
use crate::routes::{ANY_HOST, OriginRequest, PathKind, Route};
use crate::routes::{Serving, serving_route_for_url};

const CLOUDFLARED_ENV: &str = "CFTUNNEL_CLOUDFLARED";
/// cloudflared processes at once (each call is mostly process start-up).
const WORKERS: usize = 4;

pub(super) fn cloudflared() -> PathBuf {
    match std::env::var_os(CLOUDFLARED_ENV) {
        Some(path) if Path::new(&path).is_file() => PathBuf::from(path),
        other => panic!(
            "{CLOUDFLARED_ENV} must point at a cloudflared binary (built from \
             github.com/cloudflare/cloudflared; .ci/run sets it); it is {other:?}"
        ),
    }
}

#[derive(Deserialize)]
struct RecordedRoute {
    hostname: String,
    path: Option<String>,
    #[serde(rename = "pathKind", default)]
    path_kind: PathKind,
    service: String,
}

#[derive(Deserialize)]
struct Recorded {
    routes: Vec<RecordedRoute>,
    fallback: String,
    config: String,
}

#[derive(Deserialize)]
struct ConfigFile {
    ingress: Vec<IngressRule>,
}

#[derive(Deserialize)]
struct IngressRule {
    hostname: Option<String>,
    path: Option<String>,
    service: String,
}

/// One config to check: where it came from, what it says, where it was written.
struct Case {
    name: String,
    routes: Vec<Route>,
    fallback: String,
    rules: Vec<IngressRule>,
    file: PathBuf,
}

/// Runs the render and route tests with recording on and reads what they rendered.
fn record_the_suite(dir: &Path) -> Vec<Case> {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("own test binary: {e}"));
    let out = Command::new(exe)
        .args(["render::", "routes::", "--skip", "cloudflared_check"])
        .args([
            "--skip",
            "proptests",
            "--skip",
            "webhook::",
            "--test-threads",
            "2",
        ])
        .env(RECORD_ENV, dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the render and route tests: {e}"));
    assert!(
        out.status.success(),
        "the render and route tests failed while recording:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for table in recorded_files(dir, "table-") {
        let text = std::fs::read_to_string(&table).unwrap_or_default();
        let recorded: RecordedTable =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
        render_recorded_table(dir, &recorded);
    }
    let names = recorded_files(dir, "");
    let errors: Vec<String> = names
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("error-"))
        })
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(
        errors.is_empty(),
        "route tables the renderer refuses: {errors:?}"
    );
    let mut cases = Vec::new();
    for path in recorded_files(dir, "config-") {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let recorded: Recorded =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let config: ConfigFile = serde_yaml_ng::from_str(&recorded.config)
            .unwrap_or_else(|e| panic!("rendered config does not parse: {e}\n{}", recorded.config));
        let file = path.with_extension("yaml");
        std::fs::write(&file, &recorded.config).unwrap_or_else(|e| panic!("{e}"));
        cases.push(Case {
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            routes: recorded
                .routes
                .into_iter()
                .map(|r| Route {
                    hostname: r.hostname,
                    path: r.path,
                    path_kind: r.path_kind,
                    service: r.service,
                    origin_request: OriginRequest::default(),
                })
                .collect(),
            fallback: recorded.fallback,
            rules: config.ingress,
            file,
        });
    }
    cases
}

/// The `.json` files in `dir` whose names start with `prefix`, sorted.
fn recorded_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    names.sort();
    names
}

/// A path the pattern matches when it is a plain prefix: its text after `^` up to the first
/// regex operator (`^/api(/|$)` gives `/api`).
fn literal_prefix(pattern: &str) -> String {
    pattern
        .trim_start_matches('^')
        .chars()
        .take_while(|c| !"\\.+*?()|[]{}^$".contains(*c))
        .collect()
}

/// The request URLs asked of one config: for each route, requests it should serve (each path
/// sample, or `/`), a near miss of its path, a wildcard's deeper name and bare parent, an exact
/// host in upper case and one label deeper; and a host no route names.
fn urls(routes: &[Route]) -> BTreeSet<String> {
    let mut out = BTreeSet::from(["https://example.net/".to_string()]);
    for route in routes {
        let host = match route.hostname.strip_prefix("*.") {
            _ if route.hostname == ANY_HOST => "any.example.net".to_string(),
            Some(parent) => {
                out.insert(format!("https://y.z.{parent}/"));
                out.insert(format!("https://{parent}/"));
                format!("x.{parent}")
            }
            None => {
                out.insert(format!("https://{}/", route.hostname.to_ascii_uppercase()));
                out.insert(format!("https://sub.{}/", route.hostname));
                route.hostname.clone()
            }
        };
        match &route.path {
            Some(pattern) => {
                let prefix = literal_prefix(pattern);
                for path in [
                    prefix.clone(),
                    format!("{prefix}/deeper/x"),
                    format!("{prefix}x"),
                    format!("/other{prefix}"),
                ] {
                    if path.is_empty() || path.starts_with('/') {
                        out.insert(format!("https://{host}{path}"));
                    }
                }
            }
            None => {
                out.insert(format!("https://{host}/"));
                out.insert(format!("https://{host}"));
            }
        }
    }
    out
}

/// The index in the rendered rules of what the model says serves `url`.
fn expected_rule(case: &Case, url: &str) -> usize {
    match serving_route_for_url(&case.routes, url) {
        Some(Serving::Route(route)) if route.matches_everything() => case.rules.len() - 1,
        Some(Serving::Route(route)) => case
            .rules
            .iter()
            .position(|rule| {
                rule.hostname.as_deref() == Some(route.hostname.as_str())
                    && rule.path == route.path
                    && rule.service == route.service
            })
            .unwrap_or_else(|| panic!("{}: route {route:?} has no rule", case.name)),
        Some(Serving::CatchAll) => case.rules.len() - 1,
        None => panic!("{url} is not a URL the model reads"),
    }
}

/// The rule index cloudflared picks: its `Matched rule #N` line.
fn cloudflared_rule(bin: &Path, case: &Case, url: &str) -> Result<usize, String> {
    matched_rule(bin, &case.file, url)
}

/// The rule index cloudflared picks for `url` in the config file `config`.
pub(super) fn matched_rule(bin: &Path, config: &Path, url: &str) -> Result<usize, String> {
    let out = Command::new(bin)
        .arg("tunnel")
        .arg("--config")
        .arg(config)
        .args(["ingress", "rule", url])
        .output()
        .map_err(|e| format!("cannot run cloudflared: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|line| line.trim().strip_prefix("Matched rule #"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("no `Matched rule #N` in cloudflared's answer: {text}"))
}

fn validate(bin: &Path, case: &Case) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("tunnel")
        .arg("--config")
        .arg(&case.file)
        .args(["ingress", "validate"])
        .output()
        .map_err(|e| format!("cannot run cloudflared: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && stdout.lines().any(|l| l.trim() == "OK") {
        Ok(())
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn cloudflared_validates_every_rendered_config_and_picks_the_rule_the_model_says() {
    let bin = cloudflared();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let cases = record_the_suite(dir.path());
    assert!(
        cases.len() >= 10,
        "only {} configs were recorded",
        cases.len()
    );

    // (case, url, model's rule) for every question; the model's answers are tallied so the
    // check provably covers paths, wildcards, several Services on one host and the catch-all.
    let mut questions = Vec::new();
    let mut asked = BTreeSet::new();
    for case in &cases {
        assert_eq!(
            case.rules
                .last()
                .map(|r| (r.hostname.is_none() && r.path.is_none(), r.service.as_str())),
            Some((true, case.fallback.as_str())),
            "{}: the last rule must be the catch-all",
            case.name
        );
        // Configs that differ only in settings (originRequest, catch-all service) have the
        // same rules: each distinct rule list is asked once; every config is validated.
        let shape: Vec<(Option<&str>, Option<&str>)> = case
            .rules
            .iter()
            .map(|r| (r.hostname.as_deref(), r.path.as_deref()))
            .collect();
        if !asked.insert(shape) {
            continue;
        }
        for url in urls(&case.routes) {
            let expected = expected_rule(case, &url);
            questions.push((case, url, expected));
        }
    }
    let served_by = |wanted: fn(&IngressRule) -> bool| {
        questions
            .iter()
            .filter(|(case, _, rule)| case.rules.get(*rule).is_some_and(wanted))
            .count()
    };
    let by_path = served_by(|r| r.path.is_some());
    let by_wildcard = served_by(|r| r.hostname.as_deref().is_some_and(|h| h.starts_with("*.")));
    let by_catch_all = served_by(|r| r.hostname.is_none());
    let shared_hosts = cases
        .iter()
        .filter(|case| {
            case.routes.iter().any(|a| {
                case.routes
                    .iter()
                    .any(|b| a.hostname == b.hostname && a.service != b.service)
            })
        })
        .count();
    assert!(
        questions.len() >= 40
            && by_path > 0
            && by_wildcard > 0
            && by_catch_all > 0
            && shared_hosts > 0,
        "coverage: {} URLs, {by_path} served by a path rule, {by_wildcard} by a wildcard, \
         {by_catch_all} by the catch-all, {shared_hosts} configs with several Services on one host",
        questions.len()
    );

    eprintln!(
        "{} configs, {} distinct rule lists, {} URLs: {by_path} served by a path rule, \
         {by_wildcard} by a wildcard, {by_catch_all} by the catch-all",
        cases.len(),
        asked.len(),
        questions.len()
    );
    let mut problems: Vec<String> = Vec::new();
    let checked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for worker in 0..WORKERS {
            let (bin, cases, questions, checked) = (&bin, &cases, &questions, &checked);
            scope.spawn(move || {
                let mut found = Vec::new();
                for case in cases.iter().skip(worker).step_by(WORKERS) {
                    if let Err(e) = validate(bin, case) {
                        found.push(format!("{}: ingress validate failed: {e}", case.name));
                    }
                }
                for (case, url, expected) in questions.iter().skip(worker).step_by(WORKERS) {
                    match cloudflared_rule(bin, case, url) {
                        Ok(rule) if rule == *expected => {}
                        Ok(rule) => found.push(format!(
                            "{}: {url}: cloudflared picks rule #{rule} {:?}, the model says #{expected} {:?}",
                            case.name,
                            case.rules.get(rule).map(|r| (&r.hostname, &r.path, &r.service)),
                            case.rules.get(*expected).map(|r| (&r.hostname, &r.path, &r.service)),
                        )),
                        Err(e) => found.push(format!("{}: {url}: {e}", case.name)),
                    }
                }
                if let Ok(mut all) = checked.lock() {
                    all.extend(found);
                }
            });
        }
    });
    problems.extend(checked.into_inner().unwrap_or_default());
    assert!(
        problems.is_empty(),
        "{} of {} checks disagree:\n{}",
        problems.len(),
        questions.len() + cases.len(),
        problems.join("\n")
    );
}

/// Renders (and records in `dir`) the config of one recorded route table. A table the renderer
/// refuses is recorded as an error: the model must only produce renderable routes.
fn render_recorded_table(dir: &Path, table: &RecordedTable) {
    let mut spec = json!({
        "newTunnel": {"name": "edge"},
        "cloudflare": {"domain": table.domain, "secret": "cf-api",
                       "accountId": "0123456789abcdef0123456789abcdef"},
    });
    if table.ca_pool {
        spec["originCaPool"] = json!("origin-ca");
    }
    let input = TunnelInput {
        identity: OwnerIdentity {
            kind: TunnelKind::Tunnel,
            namespace: table.namespace.clone(),
            name: table.name.clone(),
            uid: "uid".into(),
        },
        spec: match serde_json::from_value(spec) {
            Ok(spec) => spec,
            Err(e) => panic!("recorded tunnel spec: {e}"),
        },
        tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: table.name.clone(),
        domain: table.domain.clone(),
        credentials: TunnelCredentials {
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            secret_b64: String::new(),
            tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        },
        origin_ca_pem: None,
        routes: table.routes.clone(),
    };
    match render_config(&input) {
        Ok(config) => record_config_in(dir, &input, &config),
        Err(e) => write_in(
            dir,
            "error",
            &json!({"tunnel": table.tunnel, "error": e.to_string()}),
        ),
    }
}
