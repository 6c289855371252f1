//! The layering the compiler does not check by itself: no circle among the top-level modules of
//! any crate of the workspace, and each crate depends only on the crates below it. Read from
//! the sources, so a `use` that crosses a layer upward fails here, naming the file.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's crates, bottom up, with the workspace crates each may depend on (normal
/// dependencies; tests may use more).
const CRATES: &[(&str, &str, &[&str])] = &[
    ("cftunnel-types", "crates/types", &[]),
    ("cftunnel-cloudflare", "crates/cloudflare", &[]),
    (
        "cftunnel-policy",
        "crates/policy",
        &["cftunnel-types", "cftunnel-cloudflare"],
    ),
    (
        "cftunnel",
        ".",
        &["cftunnel-types", "cftunnel-cloudflare", "cftunnel-policy"],
    ),
    ("cftunnel-sim", "crates/simulator", &[]),
    ("cftunnel-testenv", "crates/testenv", &["cftunnel-types"]),
    (
        "cftunnel-demo",
        "crates/demo",
        &[
            "cftunnel",
            "cftunnel-types",
            "cftunnel-sim",
            "cftunnel-testenv",
        ],
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Source without comments, so a doc link to another module is no dependency.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file below `src` (`lib.rs` and `main.rs` are the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Top-level modules a piece of code names through `crate::` or enough `super::`s, with
/// `use crate::{a, b}` groups expanded.
fn named_top_modules(code: &str, depth: usize) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let bytes = code.as_bytes();
    let ident = |at: usize| -> String {
        code[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut i = 0;
    while i < code.len() {
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if boundary && code[i..].starts_with("crate::") {
            group_or_ident(code, i + "crate::".len(), &ident, &mut named);
            i += "crate::".len();
            continue;
        }
        if boundary && code[i..].starts_with("super::") {
            let mut ups = 0;
            let mut at = i;
            while code[at..].starts_with("super::") {
                ups += 1;
                at += "super::".len();
            }
            if ups >= depth {
                group_or_ident(code, at, &ident, &mut named);
            }
            i = at;
            continue;
        }
        i += code[i..].chars().next().map_or(1, char::len_utf8);
    }
    named
}

fn group_or_ident(
    code: &str,
    at: usize,
    ident: &dyn Fn(usize) -> String,
    named: &mut BTreeSet<String>,
) {
    if code[at..].starts_with('{') {
        let end = code[at..].find('}').map_or(code.len(), |e| at + e);
        for part in code[at + 1..end].split(',') {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.insert(name);
            }
        }
    } else {
        let name = ident(at);
        if !name.is_empty() {
            named.insert(name);
        }
    }
}

/// Edges between the top-level modules of the crate whose sources are under `src`, each with a
/// file that makes it.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(src, f).first().cloned())
        .collect();
    for file in &files {
        let module = module_of(src, file);
        let Some(top) = module.first() else { continue };
        // A file's own `super::` is its parent; `mod.rs` files are their directory's module.
        let depth = module.len();
        for named in named_top_modules(&code_of(file), depth) {
            if &named != top && tops.contains(&named) {
                graph
                    .entry(top.clone())
                    .or_default()
                    .entry(named)
                    .or_insert_with(|| file.clone());
            }
        }
    }
    graph
}

/// A circle through the graph, if there is one.
fn find_circle(graph: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, PathBuf>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut circle = path[start..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(circle) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(circle);
        }
    }
    None
}

#[test]
fn no_crate_has_a_circle_among_its_top_level_modules() {
    let mut circles = Vec::new();
    for (name, dir, _) in CRATES {
        let src = root().join(dir).join("src");
        let graph = module_graph(&src);
        if let Some(circle) = find_circle(&graph) {
            let edges: Vec<String> = circle
                .windows(2)
                .map(|w| {
                    let file = &graph[&w[0]][&w[1]];
                    let shown = file.strip_prefix(root()).unwrap_or(file);
                    format!("  {} -> {} ({})", w[0], w[1], shown.display())
                })
                .collect();
            circles.push(format!("{name}:\n{}", edges.join("\n")));
        }
    }
    assert!(
        circles.is_empty(),
        "top-level modules that import each other in a circle:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_circle_check_finds_a_circle_and_its_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").expect("write");
    std::fs::create_dir(src.join("a")).expect("mkdir");
    std::fs::write(src.join("a/mod.rs"), "mod x;\n").expect("write");
    std::fs::write(src.join("a/x.rs"), "use super::super::{b, c::Y};\n").expect("write");
    std::fs::write(src.join("b.rs"), "// crate::c in a comment is no edge\n").expect("write");
    std::fs::write(src.join("c.rs"), "fn f() { crate::a::g() }\n").expect("write");
    let graph = module_graph(src);
    assert_eq!(
        graph["a"].keys().collect::<Vec<_>>(),
        ["b", "c"],
        "{graph:?}"
    );
    assert!(!graph.contains_key("b"), "{graph:?}");
    assert_eq!(
        find_circle(&graph),
        Some(vec!["a".to_string(), "c".to_string(), "a".to_string()])
    );
}

/// Names of the workspace crates in the `[dependencies]` table of a manifest.
fn workspace_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut in_dependencies = false;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies {
            continue;
        }
        let key = line
            .split(['=', '.', ' '])
            .next()
            .unwrap_or_default()
            .trim();
        if CRATES.iter().any(|(name, _, _)| *name == key) {
            names.insert(key.to_string());
        }
    }
    names
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let mut wrong = Vec::new();
    for (name, dir, allowed) in CRATES {
        let manifest = root().join(dir).join("Cargo.toml");
        for dependency in workspace_dependencies(&manifest) {
            if !allowed.contains(&dependency.as_str()) {
                wrong.push(format!("{name} depends on {dependency}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let crates_dir = root().join("crates");
    let mut members: Vec<String> = std::fs::read_dir(&crates_dir)
        .expect("crates/")
        .flatten()
        .map(|e| format!("crates/{}", e.file_name().to_string_lossy()))
        .collect();
    members.sort();
    for member in &members {
        assert!(
            CRATES.iter().any(|(_, dir, _)| dir == member),
            "{member} is a workspace member this check does not know: add it to CRATES"
        );
    }
}

/// The modules a "bottom up" list of docs/design.md names, in its order: each bullet's
/// backticked names before its dash.
fn documented_order(design: &str, heading: &str) -> Vec<String> {
    let start = design
        .find(heading)
        .unwrap_or_else(|| panic!("docs/design.md has no list {heading:?}"));
    let mut order = Vec::new();
    for line in design[start + heading.len()..].lines().skip(1) {
        let Some(item) = line.strip_prefix("- ") else {
            break;
        };
        let names = item.split(" — ").next().unwrap_or_default();
        for name in names.split(',') {
            order.push(name.trim().trim_matches('`').to_string());
        }
    }
    order
}

#[test]
fn the_design_lists_every_module_in_an_order_no_use_goes_against() {
    let design = std::fs::read_to_string(root().join("docs/design.md")).expect("docs/design.md");
    let mut wrong = Vec::new();
    for (heading, dir) in [
        ("`cftunnel-policy`, bottom up:", "crates/policy"),
        ("`cftunnel` (the operator), bottom up:", "."),
    ] {
        let order = documented_order(&design, heading);
        let src = root().join(dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut modules: Vec<String> = files
            .iter()
            .filter_map(|f| module_of(&src, f).first().cloned())
            .collect();
        modules.sort();
        modules.dedup();
        let mut listed = order.clone();
        listed.sort();
        if listed != modules {
            wrong.push(format!(
                "{heading} lists {listed:?}, the crate has {modules:?}"
            ));
        }
        let position = |m: &str| order.iter().position(|o| o == m);
        for (from, to) in module_graph(&src) {
            for (target, file) in to {
                if let (Some(a), Some(b)) = (position(&from), position(&target))
                    && b > a
                {
                    let shown = file.strip_prefix(root()).unwrap_or(&file).to_path_buf();
                    wrong.push(format!(
                        "{heading}: {from} uses {target}, listed above it ({})",
                        shown.display()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
