//! Golden plans: every `tests/data/plan/<case>.in.yaml` is read into a `PlanInput`
//! ([`input`]), planned, and the plan serialized as YAML must equal `<case>.out.yaml` exactly.
//! `CFTUNNEL_BLESS_PLAN=1` (`scripts/bless-plan.sh`) writes the outputs instead of comparing.
mod diff;
mod input;

use std::path::{Path, PathBuf};

use cftunnel_policy::plan::plan;

/// Set to write every `<case>.out.yaml` from the current code instead of comparing.
const BLESS: &str = "CFTUNNEL_BLESS_PLAN";

const HEADER: &str = "# The plan of the .in.yaml beside this file; written by scripts/bless-plan.sh, never by hand.\n";

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/plan")
}

/// Every case, by name, sorted.
fn cases(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".in.yaml"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The serialized plan of one case's input.
fn planned(dir: &Path, case: &str) -> String {
    let path = dir.join(format!("{case}.in.yaml"));
    let input = input::read(&path).unwrap_or_else(|e| panic!("case {case}: {e}"));
    // Through JSON: enums read as maps (`email: {…}`), not YAML tags.
    let value = serde_json::to_value(plan(&input))
        .unwrap_or_else(|e| panic!("case {case}: the plan does not serialize: {e}"));
    let yaml = serde_yaml_ng::to_string(&value)
        .unwrap_or_else(|e| panic!("case {case}: the plan does not serialize: {e}"));
    format!("{HEADER}{yaml}")
}

#[test]
fn every_case_plans_as_its_golden_file_says() {
    let dir = cases_dir();
    let names = cases(&dir);
    assert!(
        names.len() >= 40,
        "only {} cases in {}",
        names.len(),
        dir.display()
    );
    let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for case in &names {
        let actual = planned(&dir, case);
        let out = dir.join(format!("{case}.out.yaml"));
        if bless {
            std::fs::write(&out, &actual).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
            continue;
        }
        match std::fs::read_to_string(&out) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "case {case}: the plan differs from {case}.out.yaml\n{}",
                diff::excerpt(&expected, &actual)
            )),
            Err(e) => failures.push(format!(
                "case {case}: {case}.out.yaml cannot be read ({e}); run scripts/bless-plan.sh and read what it wrote"
            )),
        }
    }
    let orphans: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".out.yaml"))
                .map(str::to_string)
        })
        .filter(|n| !names.contains(n))
        .collect();
    for orphan in orphans {
        failures.push(format!(
            "{orphan}.out.yaml has no {orphan}.in.yaml; remove it"
        ));
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden plans failed (scripts/bless-plan.sh rewrites them; read the diff first):\n\n{}",
        failures.len(),
        names.len(),
        failures.join("\n\n")
    );
}

#[test]
fn a_plan_is_the_same_twice() {
    let dir = cases_dir();
    for case in cases(&dir).iter().take(5) {
        assert_eq!(planned(&dir, case), planned(&dir, case), "case {case}");
    }
}
