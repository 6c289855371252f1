//! The layering the compiler does not check by itself, read from the sources:
//!
//! - each crate of the workspace depends only on the crates below it;
//! - no circle among the top-level modules of any crate;
//! - no circle among the files of any folder module, at every depth of every crate
//!   (`src/dns_sync/`, `crates/policy/src/routes/gateway/`, …). Child `a` of a folder uses its
//!   sibling `b` when code of `a` (its file, the files of its own sub-folders, the test files it
//!   includes: `#[path = "a_tests.rs"] mod tests;` makes `a_tests.rs` part of `a`) names `b`
//!   through `super::`s that reach the folder (code in an inline `mod tests { … }` is one level
//!   deeper than its file) or through the full `crate::folder::b` path, `use` groups expanded.
//!   The folder's own file (`mod.rs`, or `x.rs` beside `x/`) is the folder, not a child: its
//!   `self::b` makes no edge, and a test file it declares (`mod x_tests;`) is a child of its
//!   own. No circle is allowed.
//!
//! A `use` that crosses a layer upward or closes a circle fails here, naming the circle and a
//! file that makes each of its edges.
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

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

fn skip_space(code: &[u8], mut at: usize) -> usize {
    while code.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The opening of a raw string literal (`r"`, `r#"`, `br##"`, …) at the start of `rest`: its
/// length and the number of `#`s.
fn raw_string_opening(rest: &[u8]) -> Option<(usize, usize)> {
    let at = usize::from(rest.first() == Some(&b'b'));
    if rest.get(at) != Some(&b'r') {
        return None;
    }
    let hashes = rest[at + 1..].iter().take_while(|&&b| b == b'#').count();
    (rest.get(at + 1 + hashes) == Some(&b'"')).then_some((at + 2 + hashes, hashes))
}

/// Source with its comments blanked (every byte keeps its offset, so a doc link to another
/// module is no dependency), and which bytes are in a string or character literal (a brace
/// there opens no block; a path there still counts: `#[serde(default = "crate::x::f")]`).
fn lex(text: &str) -> (String, Vec<bool>) {
    let bytes = text.as_bytes();
    let mut code = bytes.to_vec();
    let mut quoted = vec![false; bytes.len()];
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let boundary = i == 0 || !is_ident(bytes[i - 1]);
        let end = if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |e| i + e);
            code[i..end].fill(b' ');
            end
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0, i);
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            for byte in &mut code[i..j] {
                if *byte != b'\n' {
                    *byte = b' ';
                }
            }
            j
        } else if let Some((opening, hashes)) = raw_string_opening(rest).filter(|_| boundary) {
            let closing: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = bytes[i + opening..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(bytes.len(), |e| i + opening + e + closing.len());
            quoted[i..end].fill(true);
            end
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            quoted[i..end].fill(true);
            end
        } else if bytes[i] == b'\'' {
            // A character literal, or a lifetime or label (`'a`), which is no literal.
            let end = if rest.get(1) == Some(&b'\\') {
                rest.iter()
                    .skip(3)
                    .position(|&b| b == b'\'')
                    .map(|e| i + 3 + e + 1)
            } else {
                text[i + 1..]
                    .chars()
                    .next()
                    .map(char::len_utf8)
                    .filter(|len| rest.get(1 + len) == Some(&b'\''))
                    .map(|len| i + 2 + len)
            };
            if let Some(end) = end {
                quoted[i..end].fill(true);
                end
            } else {
                i + 1
            }
        } else {
            i + 1
        };
        i = end;
    }
    (
        String::from_utf8(code).expect("blanking whole comments keeps UTF-8"),
        quoted,
    )
}

/// The path or `use` tree at `at`, resolved from the module path `path` (`crate` starts again
/// from the root, `super` goes up one, `self` stays), pushing every module path it names, with
/// `{a, b::{c, self}}` groups expanded; returns where it ends.
fn use_tree(
    code: &[u8],
    mut at: usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        let start = at;
        while code.get(at).copied().is_some_and(is_ident) {
            at += 1;
        }
        match &code[start..at] {
            b"" => {
                if code.get(at) == Some(&b'*') {
                    at += 1;
                }
                break;
            }
            b"crate" => path.clear(),
            b"super" => {
                path.pop();
            }
            b"self" => {}
            segment => path.push(String::from_utf8_lossy(segment).into_owned()),
        }
        let after = skip_space(code, at);
        if !code[after..].starts_with(b"::") {
            break;
        }
        at = skip_space(code, after + 2);
        if code.get(at) == Some(&b'{') {
            at += 1;
            loop {
                at = skip_space(code, at);
                if code.get(at) == Some(&b'}') {
                    return at + 1;
                }
                let end = use_tree(code, at, path.clone(), out);
                if end == at {
                    return at;
                }
                at = skip_space(code, end);
                if code[at..].starts_with(b"as")
                    && code.get(at + 2).is_some_and(u8::is_ascii_whitespace)
                {
                    at = skip_space(code, at + 2);
                    while code.get(at).copied().is_some_and(is_ident) {
                        at += 1;
                    }
                    at = skip_space(code, at);
                }
                match code.get(at) {
                    Some(b',') => at += 1,
                    Some(b'}') => return at + 1,
                    _ => return at,
                }
            }
        }
    }
    out.push(path);
    at
}

/// Every module path a file names through `crate::`, `self::` or `super::` (groups expanded),
/// resolved from the crate root, each with the module of the code that names it: the file's
/// `module`, or an inline `mod tests { … }` inside it, whose `super::` is the file's module.
fn named_paths(text: &str, module: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
    let (code, quoted) = lex(text);
    let code = code.as_bytes();
    let mut here = module.to_vec();
    // The inline modules the code is in, with the brace depth each opened at.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut named = Vec::new();
    let mut parsed_to = 0;
    for i in 0..code.len() {
        if !quoted[i] && code[i] == b'{' {
            depth += 1;
        } else if !quoted[i] && code[i] == b'}' {
            depth = depth.saturating_sub(1);
            if inline.last() == Some(&depth) {
                inline.pop();
                here.pop();
            }
        }
        let starts_word = i == 0 || !(is_ident(code[i - 1]) || code[i - 1] == b':');
        if !starts_word || i < parsed_to {
            continue;
        }
        let rest = &code[i..];
        if ["crate::", "super::", "self::"]
            .iter()
            .any(|start| rest.starts_with(start.as_bytes()))
        {
            let mut paths = Vec::new();
            parsed_to = use_tree(code, i, here.clone(), &mut paths);
            named.extend(paths.into_iter().map(|path| (here.clone(), path)));
        } else if !quoted[i]
            && rest.starts_with(b"mod")
            && rest.get(3).is_some_and(u8::is_ascii_whitespace)
        {
            let start = skip_space(code, i + 3);
            let mut end = start;
            while code.get(end).copied().is_some_and(is_ident) {
                end += 1;
            }
            if end > start && code.get(skip_space(code, end)) == Some(&b'{') {
                inline.push(depth);
                here.push(String::from_utf8_lossy(&code[start..end]).into_owned());
            }
        }
    }
    named
}

/// The files a file includes with `#[path = "…"] mod m;`, each with `m`.
fn path_includes(text: &str) -> Vec<(String, String)> {
    let (code, quoted) = lex(text);
    let mut includes = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[path").map(|at| from + at) {
        from = at + "#[path".len();
        if quoted[at] {
            continue;
        }
        let rest = &code[from..];
        let Some(open) = rest.find('"') else { break };
        let Some(len) = rest[open + 1..].find('"') else {
            break;
        };
        let target = rest[open + 1..open + 1 + len].to_string();
        let Some(declaration) = rest.find("mod ") else {
            break;
        };
        let name: String = rest[declaration + "mod ".len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        includes.push((target, name));
    }
    includes
}

/// Every source file below `src` with its module path: where it lies (see [`module_of`]), or for
/// a file included with `#[path = "…"] mod m;`, the including module's path and `m`: the test
/// file `handlers_tests.rs` that `handlers.rs` includes as `mod tests` is part of `handlers`.
fn modules(src: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut included = BTreeMap::new();
    for file in &files {
        for (target, name) in path_includes(&read(file)) {
            let mut module = module_of(src, file);
            module.push(name);
            included.insert(file.parent().unwrap_or(src).join(target), module);
        }
    }
    files
        .into_iter()
        .map(|file| {
            let module = included
                .get(&file)
                .cloned()
                .unwrap_or_else(|| module_of(src, &file));
            (file, module)
        })
        .collect()
}

/// Uses between modules: from each to the modules it names, each with a file that names it.
type Graph = BTreeMap<String, BTreeMap<String, PathBuf>>;

/// For every folder module of the crate whose sources are under `src` (the crate root is `[]`),
/// the uses between its child modules, each with a file that makes it. Child `a` uses sibling
/// `b` when code in `a`'s files names `b` (`super::b`, `super::super::b` from a sub-folder of
/// `a`, `crate::folder::b`); the folder's own file is not a child, and names its children freely.
fn folder_graphs(src: &Path) -> BTreeMap<Vec<String>, Graph> {
    let modules = modules(src);
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (_, module) in &modules {
        for depth in 0..module.len() {
            children
                .entry(module[..depth].to_vec())
                .or_default()
                .insert(module[depth].clone());
        }
    }
    let mut graphs: BTreeMap<Vec<String>, Graph> = children
        .keys()
        .map(|folder| (folder.clone(), Graph::new()))
        .collect();
    for (file, module) in &modules {
        for (here, named) in named_paths(&read(file), module) {
            for depth in 0..here.len() {
                let folder = &here[..depth];
                let (Some(siblings), Some(to)) = (children.get(folder), named.get(depth)) else {
                    continue;
                };
                let from = &here[depth];
                if named[..depth] == *folder
                    && from != to
                    && siblings.contains(from)
                    && siblings.contains(to)
                {
                    graphs
                        .entry(folder.to_vec())
                        .or_default()
                        .entry(from.clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert_with(|| file.clone());
                }
            }
        }
    }
    graphs
}

/// Uses between the top-level modules of the crate whose sources are under `src`, each with a
/// file that makes it.
fn module_graph(src: &Path) -> Graph {
    folder_graphs(src).remove(&Vec::new()).unwrap_or_default()
}

/// A circle through the graph, if there is one.
fn find_circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
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

/// Every circle through the graph, each once, from its smallest module (at most a thousand).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    fn extend(graph: &Graph, path: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
        let (start, node) = (path[0].clone(), path[path.len() - 1].clone());
        for next in graph.get(&node).into_iter().flat_map(BTreeMap::keys) {
            if found.len() >= 1000 {
                return;
            }
            if *next == start {
                let mut circle = path.clone();
                circle.push(start.clone());
                found.push(circle);
            } else if *next > start && !path.contains(next) {
                path.push(next.clone());
                extend(graph, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for start in graph.keys() {
        extend(graph, &mut vec![start.clone()], &mut found);
    }
    found
}

/// A circle's edges, one a line, each with the file that makes it.
fn edges_of(circle: &[String], graph: &Graph) -> String {
    circle
        .windows(2)
        .map(|w| {
            let file = &graph[&w[0]][&w[1]];
            let shown = file.strip_prefix(root()).unwrap_or(file);
            format!("  {} -> {} ({})", w[0], w[1], shown.display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_crate_has_a_circle_among_its_top_level_modules() {
    let mut circles = Vec::new();
    for (name, dir, _) in CRATES {
        let src = root().join(dir).join("src");
        let graph = module_graph(&src);
        if let Some(circle) = find_circle(&graph) {
            circles.push(format!("{name}:\n{}", edges_of(&circle, &graph)));
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

/// Where a folder module's files are, from the workspace root: `src/dns_sync/`.
fn folder_dir(crate_dir: &str, folder: &[String]) -> String {
    let src = Path::new(crate_dir).join("src").join(folder.join("/"));
    let shown = src.strip_prefix(".").unwrap_or(&src);
    format!("{}/", shown.display())
}

#[test]
fn no_folder_module_has_a_circle_among_its_files() {
    let mut wrong = Vec::new();
    for (name, dir, _) in CRATES {
        let src = root().join(dir).join("src");
        for (folder, graph) in folder_graphs(&src) {
            if folder.is_empty() {
                // The crate's top-level modules: the check above.
                continue;
            }
            let shown = folder_dir(dir, &folder);
            for circle in circles(&graph) {
                let line = circle.join(" -> ");
                wrong.push(format!(
                    "{name} {shown}: {line}\n{}",
                    edges_of(&circle, &graph)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "files of a folder module that import each other in a circle:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_folder_check_finds_circles_among_the_files_of_a_folder() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("lib.rs", "mod a;\nmod sync;\n");
    write("a.rs", "");
    // The folder's own file names its children freely, inline tests included.
    write(
        "sync/mod.rs",
        "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\npub use self::a::X;\n\
         use crate::sync::c::Z;\n#[cfg(test)]\nmod tests {\n    use super::d;\n}\n",
    );
    write("sync/a.rs", "use super::b::Y; // super::f in a comment\n");
    write("sync/b/mod.rs", "mod deep;\n");
    // From a sub-folder of `b`, `super::super` is the folder.
    write("sync/b/deep.rs", "fn g() { super::super::c::h() }\n");
    // `crate::` paths and groups, and braces in literals that open no block.
    write(
        "sync/c.rs",
        "use crate::sync::{a::X as _, b::{self, Y}};\nconst S: &str = \"{\";\n\
         const C: char = '}';\nconst R: &str = r#\"}\"#;\nfn h() {}\n",
    );
    // A test file `d.rs` includes is part of `d`, its `super::` is `d`.
    write(
        "sync/d.rs",
        "#[cfg(test)]\n#[path = \"d_tests.rs\"]\nmod tests;\n",
    );
    write("sync/d_tests.rs", "use super::super::a::X;\n");
    // An inline module's `super::super` is the folder.
    write(
        "sync/e.rs",
        "fn s<'a>(x: &'a str) -> &'a str { x }\n#[cfg(test)]\nmod tests {\n    \
         use super::super::a::X;\n}\nfn t() { let _ = super::f::T; }\n",
    );
    // At `f`'s own depth, `super::super::a` is the crate's `a`, no sibling.
    write("sync/f.rs", "pub struct T;\nuse super::super::a;\n");

    let graphs = folder_graphs(src);
    let sync = &graphs[&vec!["sync".to_string()]];
    let edges: Vec<String> = sync
        .iter()
        .flat_map(|(from, to)| to.keys().map(move |to| format!("{from} -> {to}")))
        .collect();
    assert_eq!(
        edges,
        [
            "a -> b", "b -> c", "c -> a", "c -> b", "d -> a", "e -> a", "e -> f"
        ],
        "{sync:?}"
    );
    assert_eq!(sync["b"]["c"], src.join("sync/b/deep.rs"));
    assert_eq!(sync["d"]["a"], src.join("sync/d_tests.rs"));
    let found: Vec<String> = circles(sync).iter().map(|c| c.join(" -> ")).collect();
    assert_eq!(found, ["a -> b -> c -> a", "b -> c -> b"]);
    assert!(
        edges_of(&circles(sync)[1], sync)
            .contains(&format!("c -> b ({})", src.join("sync/c.rs").display())),
        "{}",
        edges_of(&circles(sync)[1], sync)
    );
    // The crate root sees `sync` use the top-level `a`, and no circle.
    assert_eq!(
        graphs[&Vec::new()]["sync"].keys().collect::<Vec<_>>(),
        ["a"]
    );
    assert!(circles(&graphs[&Vec::new()]).is_empty());
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
        let mut modules: Vec<String> = modules(&src)
            .into_iter()
            .filter_map(|(_, module)| module.into_iter().next())
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
