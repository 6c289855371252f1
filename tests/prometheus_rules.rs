//! The Prometheus alert rules the chart ships (charts/cftunnel/files/prometheus-rules.yaml):
//! promtool loads them and their unit tests (tests/data/prometheus/rules-test.yaml) pass, and
//! every alert links its runbook (a section of docs/runbooks.md) and has a test where it fires
//! and one where it stays silent.
//!
//! promtool comes from `$CFTUNNEL_PROMTOOL`, else from PATH; scripts/install-monitoring-deps.sh
//! installs it (Debian's `prometheus` package).
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

const RULES: &str = "charts/cftunnel/files/prometheus-rules.yaml";
const RULE_TESTS: &str = "tests/data/prometheus/rules-test.yaml";
const RUNBOOKS: &str = "docs/runbooks.md";
/// What the chart replaces with `monitoring.prometheusRule.runbooksUrl`.
const RUNBOOKS_TOKEN: &str = "__RUNBOOKS__";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `$CFTUNNEL_PROMTOOL`, else `promtool` on PATH; a missing promtool fails the test.
fn promtool() -> PathBuf {
    const HOW: &str = "install Debian's prometheus package (`apt-get install prometheus`, or \
                       scripts/install-monitoring-deps.sh) or set CFTUNNEL_PROMTOOL to a \
                       promtool binary";
    if let Some(path) = std::env::var_os("CFTUNNEL_PROMTOOL") {
        let path = PathBuf::from(path);
        assert!(
            is_executable(&path),
            "CFTUNNEL_PROMTOOL={} is not an executable file: {HOW}",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("promtool"))
                .find(|candidate| is_executable(candidate))
        })
        .unwrap_or_else(|| panic!("promtool is not on PATH: {HOW}"))
}

/// Runs promtool with `args`, failing with everything it printed unless it succeeds.
fn run_promtool(args: &[&str]) {
    let promtool = promtool();
    let output = Command::new(&promtool)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", promtool.display()));
    assert!(
        output.status.success(),
        "`{} {}` failed ({}):\n{}\n{}",
        promtool.display(),
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let rules = root().join(RULES);
    let tests = root().join(RULE_TESTS);
    let rules = rules.to_str().expect("the rule file's path is UTF-8");
    let tests = tests.to_str().expect("the rule tests' path is UTF-8");
    run_promtool(&["check", "rules", rules]);
    run_promtool(&["test", "rules", tests]);
}

/// A Prometheus rule file, as much of it as is checked here.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleGroup {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    alert: Option<String>,
    record: Option<String>,
    expr: String,
    #[serde(rename = "for")]
    for_: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// A promtool unit-test file, as much of it as is checked here.
#[derive(Debug, Deserialize)]
struct RuleTests {
    rule_files: Vec<String>,
    evaluation_interval: Option<String>,
    tests: Vec<RuleTestGroup>,
}

#[derive(Debug, Deserialize)]
struct RuleTestGroup {
    name: Option<String>,
    #[serde(default)]
    alert_rule_test: Vec<AlertRuleTest>,
}

#[derive(Debug, Deserialize)]
struct AlertRuleTest {
    alertname: String,
    eval_time: String,
    /// Missing means none, as for promtool.
    #[serde(default)]
    exp_alerts: Vec<serde_yaml_ng::Value>,
}

fn alerts() -> Vec<Rule> {
    let file: RuleFile =
        serde_yaml_ng::from_str(&read(RULES)).expect("the rule file parses as a rule file");
    file.groups
        .into_iter()
        .flat_map(|group| {
            assert!(!group.rules.is_empty(), "group {} has no rules", group.name);
            group.rules
        })
        .filter(|rule| rule.record.is_none())
        .collect()
}

#[test]
fn every_alert_has_its_runbook_and_a_firing_and_a_silent_test() {
    let alerts = alerts();
    assert!(!alerts.is_empty(), "{RULES} holds no alert");
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for rule in &alerts {
        let Some(name) = rule.alert.as_deref() else {
            problems.push(format!(
                "a rule with neither alert nor record: {}",
                rule.expr
            ));
            continue;
        };
        if !names.insert(name) {
            problems.push(format!("{name}: defined twice"));
        }
        if !name.starts_with("Cftunnel") {
            problems.push(format!("{name}: the name does not start with Cftunnel"));
        }
        if rule.expr.trim().is_empty() {
            problems.push(format!("{name}: empty expr"));
        }
        if rule.for_.is_none() {
            problems.push(format!("{name}: no `for`"));
        }
        match rule.labels.get("severity").map(String::as_str) {
            Some("warning" | "critical") => {}
            other => problems.push(format!(
                "{name}: severity {other:?}, not warning or critical"
            )),
        }
        for key in ["summary", "description", "runbook_url"] {
            if rule
                .annotations
                .get(key)
                .is_none_or(|v| v.trim().is_empty())
            {
                problems.push(format!("{name}: no {key} annotation"));
            }
        }
        let runbook = format!("{RUNBOOKS_TOKEN}#{}", name.to_lowercase());
        if let Some(url) = rule.annotations.get("runbook_url")
            && *url != runbook
        {
            problems.push(format!("{name}: runbook_url {url:?}, not {runbook:?}"));
        }
    }

    // docs/runbooks.md: a `## <AlertName>` section for each alert (GitHub's anchor is the
    // lowercase name), and none for an alert that is gone.
    let runbooks = read(RUNBOOKS);
    let headings: BTreeSet<&str> = runbooks
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(str::trim)
        .collect();
    for name in &names {
        if !headings.contains(name) {
            problems.push(format!("{RUNBOOKS}: no `## {name}` section"));
        }
    }
    for heading in &headings {
        if !names.contains(heading) {
            problems.push(format!("{RUNBOOKS}: `## {heading}` is no alert of {RULES}"));
        }
    }

    // tests/data/prometheus/rules-test.yaml: it loads this rule file, and each alert has a
    // case where it fires and one where it stays silent; every case names an alert that exists
    // (promtool passes a silent case of a misspelt alert).
    let tests: RuleTests = serde_yaml_ng::from_str(&read(RULE_TESTS))
        .expect("the rule tests parse as a promtool test file");
    let tests_dir = root()
        .join(RULE_TESTS)
        .parent()
        .expect("the rule tests are in a directory")
        .to_path_buf();
    let loaded: Vec<PathBuf> = tests
        .rule_files
        .iter()
        .map(|file| {
            let path = tests_dir.join(file);
            path.canonicalize()
                .unwrap_or_else(|e| panic!("{RULE_TESTS}: rule file {file}: {e}"))
        })
        .collect();
    let rules_path = root()
        .join(RULES)
        .canonicalize()
        .expect("the rule file exists");
    if loaded != [rules_path] {
        problems.push(format!(
            "{RULE_TESTS}: rule_files {:?}, not just {RULES}",
            tests.rule_files
        ));
    }
    if tests.evaluation_interval.as_deref() != Some("1m") {
        problems.push(format!(
            "{RULE_TESTS}: evaluation_interval {:?}, not 1m",
            tests.evaluation_interval
        ));
    }
    let mut firing: BTreeMap<&str, usize> = BTreeMap::new();
    let mut silent: BTreeMap<&str, usize> = BTreeMap::new();
    for group in &tests.tests {
        let group_name = group.name.as_deref().unwrap_or("(unnamed)");
        for case in &group.alert_rule_test {
            let name = case.alertname.as_str();
            if !names.contains(name) {
                problems.push(format!(
                    "{RULE_TESTS}: test {group_name:?} at {} checks {name}, which is no alert",
                    case.eval_time
                ));
            }
            let counts = if case.exp_alerts.is_empty() {
                &mut silent
            } else {
                &mut firing
            };
            *counts.entry(name).or_default() += 1;
        }
    }
    for name in &names {
        if !firing.contains_key(name) {
            problems.push(format!("{RULE_TESTS}: no case where {name} fires"));
        }
        if !silent.contains_key(name) {
            problems.push(format!("{RULE_TESTS}: no case where {name} stays silent"));
        }
    }

    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
