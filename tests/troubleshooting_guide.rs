//! docs/troubleshooting.md against the code, and the links between the documents.
//!
//! Every condition reason and Event reason the code emits must appear backticked in the guide.
//! They are read from the Rust sources of `src/` and `crates/*/src` with test code left out:
//! `tests/` folders, `*_tests.rs`, `#[cfg(test)]` items and the module files such items declare
//! (`#[cfg(test)] #[path = "x_props.rs"] mod props;`). Comments are skipped by a small lexer; a
//! reason is a string literal in one of these places:
//!
//! - a constant whose name holds `REASON` or starts with `EVENT_` (`const REASON_X: &str = "X"`);
//! - the string forms of the reason enums (`ReadyReason`, `RouteReason`): the literals the
//!   `as_str` (or `Display::fmt`) of an `impl` of a type named `…Reason` answers, the form the
//!   conditions and Events carry;
//! - a struct field `reason: "X"` (also `.into()`, `Some("X".into())`, `String::from`) or
//!   `reason: CONSTANT`;
//! - an argument given to a parameter named `reason` of a `&str` type: the Event helpers
//!   (`events::normal`, `warning`, `warning_on`) and their wrappers, the condition setters of the
//!   Gateway API and AccessPolicy statuses; a literal, a constant, or the literals of an
//!   `if … { "X" } else { "Y" }`;
//! - a (reason, message) tuple `("X", format!(…))` or `("X", "a message")`, and a (status,
//!   reason, message) triple `("True", "X", …)`.
//!
//! A floor of reasons known to come from each form makes a scan that stops seeing a form fail,
//! however complete the guide is.
//!
//! The reverse is checked too: every reason in the first column of a table of the guide whose
//! header's first cell is `Reason` must be one the scan found. (Reasons the Gateway API
//! specification defines but cftunnel never sets are therefore not listed in such tables.)
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const GUIDE: &str = "docs/troubleshooting.md";

/// Reasons each form is known to yield: a scan that misses one is broken.
const FLOOR: &[(Form, &str)] = &[
    (Form::Constant, "EdgeCertificateMissing"),
    (Form::Constant, "DNSConflict"),
    (Form::Constant, "TunnelDown"),
    (Form::Constant, "OtherClustersHostnames"),
    (Form::Enum, "TunnelIdConflict"),
    (Form::Enum, "HostnameConflict"),
    (Form::Field, "CleanupIncomplete"),
    (Form::Argument, "CleanupAbandoned"),
    (Form::Argument, "TunnelCreated"),
    (Form::Argument, "NoConflicts"),
    (Form::Tuple, "NotAllowedByListeners"),
    (Form::Tuple, "Healthy"),
    (Form::Tuple, "TLSAtEdge"),
];
/// Fewer distinct reasons than this means the scan lost a source of them.
const MIN_REASONS: usize = 70;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Form {
    Constant,
    Enum,
    Field,
    Argument,
    Tuple,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
    Other,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Rust tokens, enough to find literals and their neighbours: comments dropped, strings (raw
/// ones too) kept whole, char literals and lifetimes made `Other`.
fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let (ch, next) = (c[i], at(i + 1));
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == '*' {
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some((text, end)) = raw_string(&c, i) {
            out.push(Tok::Str(text));
            i = end;
        } else if ch == '"' || (ch == 'b' && next == '"') {
            let start = if ch == 'b' { i + 2 } else { i + 1 };
            let mut k = start;
            while k < c.len() && c[k] != '"' {
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Str(c[start..k.min(c.len())].iter().collect()));
            i = k + 1;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a, 'static).
            if next == '\\' {
                let mut k = i + 3;
                while k < c.len() && c[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
            out.push(Tok::Other);
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            out.push(match ch.is_ascii_digit() {
                true => Tok::Other,
                false => Tok::Ident(word),
            });
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// `r"…"`, `r#"…"#`, `br"…"` at `i`: its text and the index after it.
fn raw_string(c: &[char], i: usize) -> Option<(String, usize)> {
    let start = match (c.get(i), c.get(i + 1)) {
        (Some('r'), _) => i + 1,
        (Some('b'), Some('r')) => i + 2,
        _ => return None,
    };
    let hashes = c[start..].iter().take_while(|&&h| h == '#').count();
    if c.get(start + hashes) != Some(&'"') {
        return None;
    }
    let body = start + hashes + 1;
    let closes = |k: usize| c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#'));
    let end = (body..c.len()).find(|&k| closes(k))?;
    Some((c[body..end].iter().collect(), end + 1 + hashes))
}

fn is_punct(t: Option<&Tok>, p: char) -> bool {
    t == Some(&Tok::Punct(p))
}

fn is_ident(t: Option<&Tok>, word: &str) -> bool {
    matches!(t, Some(Tok::Ident(w)) if w == word)
}

/// Index of the token closing the group opened at `open` (`(`, `[`, `{`).
fn closing(toks: &[Tok], open: usize) -> usize {
    let (o, cl) = match &toks[open] {
        Tok::Punct('(') => ('(', ')'),
        Tok::Punct('[') => ('[', ']'),
        _ => ('{', '}'),
    };
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if *t == Tok::Punct(o) {
            depth += 1;
        } else if *t == Tok::Punct(cl) {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len() - 1
}

/// `toks` without its `#[cfg(test)]` items, and the module files those items declare.
fn strip_tests(toks: &[Tok], file: &Path) -> (Vec<Tok>, Vec<PathBuf>) {
    let cfg_test = |i: usize| {
        let want = ["#", "[", "cfg", "(", "test", ")", "]"];
        want.iter().enumerate().all(|(k, w)| match toks.get(i + k) {
            Some(Tok::Punct(p)) => w.len() == 1 && w.starts_with(*p),
            Some(Tok::Ident(x)) => x == w,
            _ => false,
        })
    };
    let (mut kept, mut files) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < toks.len() {
        if !cfg_test(i) {
            kept.push(toks[i].clone());
            i += 1;
            continue;
        }
        let mut j = i + 7;
        let mut path = None;
        while is_punct(toks.get(j), '#') && is_punct(toks.get(j + 1), '[') {
            let end = closing(toks, j + 1);
            if is_ident(toks.get(j + 2), "path")
                && let Some(Tok::Str(p)) = toks.get(j + 4)
            {
                path = Some(p.clone());
            }
            j = end + 1;
        }
        let end = (j..toks.len())
            .find(|&k| is_punct(toks.get(k), ';') || is_punct(toks.get(k), '{'))
            .unwrap_or(toks.len() - 1);
        if is_punct(toks.get(end), '{') {
            i = closing(toks, end) + 1;
            continue;
        }
        if let Some(k) = (j..end).find(|&k| is_ident(toks.get(k), "mod"))
            && let Some(Tok::Ident(name)) = toks.get(k + 1)
        {
            let dir = file.parent().unwrap_or(Path::new("."));
            match path {
                Some(p) => files.push(dir.join(p)),
                None => {
                    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                    let base = match stem {
                        "mod" | "lib" | "main" => dir.to_path_buf(),
                        _ => dir.join(stem),
                    };
                    files.push(base.join(format!("{name}.rs")));
                    files.push(base.join(name).join("mod.rs"));
                }
            }
        }
        i = end + 1;
    }
    (kept, files)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() && name != "tests" {
            rust_files(&path, out);
        } else if name.ends_with(".rs") && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The operator's sources, lexed, test code left out.
fn sources() -> Vec<(PathBuf, Vec<Tok>)> {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).into_iter().flatten() {
        rust_files(
            &krate.map(|e| e.path()).unwrap_or_default().join("src"),
            &mut files,
        );
    }
    let mut test_files = BTreeSet::new();
    let mut lexed = Vec::new();
    for file in files {
        let (toks, declared) = strip_tests(&lex(&read(&file)), &file);
        test_files.extend(declared);
        lexed.push((file, toks));
    }
    lexed.retain(|(file, _)| !test_files.contains(file));
    lexed
}

fn is_reason_like(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
        && s.chars().any(|c| c.is_ascii_lowercase())
}

fn is_constant_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && s.chars().any(|c| c.is_ascii_uppercase())
}

/// `const NAME: &str = "value"` (or `static`, `&'static str`) at `i`: its name and value.
fn const_decl(t: &[Tok], i: usize) -> Option<(&str, &str)> {
    if !(is_ident(t.get(i), "const") || is_ident(t.get(i), "static")) {
        return None;
    }
    let Some(Tok::Ident(name)) = t.get(i + 1) else {
        return None;
    };
    let lifetime = usize::from(t.get(i + 4) == Some(&Tok::Other));
    if !(is_punct(t.get(i + 2), ':')
        && is_punct(t.get(i + 3), '&')
        && is_ident(t.get(i + 4 + lifetime), "str")
        && is_punct(t.get(i + 5 + lifetime), '='))
    {
        return None;
    }
    match t.get(i + 6 + lifetime) {
        Some(Tok::Str(value)) => Some((name, value)),
        _ => None,
    }
}

/// Every `const`/`static` string: name → values (a name may be declared in several files).
fn string_constants(sources: &[(PathBuf, Vec<Tok>)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, t) in sources {
        for (name, value) in (0..t.len()).filter_map(|i| const_decl(t, i)) {
            out.entry(name.to_string())
                .or_default()
                .insert(value.to_string());
        }
    }
    out
}

/// The top-level pieces of the group opened at `open`, split at commas (`<…>` counted when
/// `angles`, as in parameter lists).
fn split_group(t: &[Tok], open: usize, angles: bool) -> Vec<&[Tok]> {
    let end = closing(t, open);
    let (mut parts, mut start, mut depth) = (Vec::new(), open + 1, 0i32);
    for k in open + 1..end {
        match &t[k] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => depth -= 1,
            Tok::Punct('<') if angles => depth += 1,
            Tok::Punct('>') if angles && !is_punct(t.get(k - 1), '-') => depth -= 1,
            Tok::Punct(',') if depth == 0 => {
                parts.push(&t[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    if start < end {
        parts.push(&t[start..end]);
    }
    parts
}

/// Functions and closures with a `reason: &str` parameter: name → its index (`self` not counted).
fn reason_parameters(sources: &[(PathBuf, Vec<Tok>)]) -> BTreeMap<String, BTreeSet<usize>> {
    let mut out: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (_, t) in sources {
        for i in 0..t.len() {
            let (name, open, angles) = match (t.get(i), t.get(i + 1)) {
                (Some(Tok::Ident(f)), Some(Tok::Ident(name))) if f == "fn" => {
                    let mut open = i + 2;
                    if is_punct(t.get(open), '<') {
                        let mut depth = 0;
                        while open < t.len() {
                            match &t[open] {
                                Tok::Punct('<') => depth += 1,
                                Tok::Punct('>') => depth -= 1,
                                _ => {}
                            }
                            open += 1;
                            if depth == 0 {
                                break;
                            }
                        }
                    }
                    (name, open, true)
                }
                (Some(Tok::Ident(l)), Some(Tok::Ident(name))) if l == "let" => {
                    let bar = i + 3 + usize::from(is_ident(t.get(i + 3), "move"));
                    if !is_punct(t.get(i + 2), '=') || !is_punct(t.get(bar), '|') {
                        continue;
                    }
                    (name, bar, false)
                }
                _ => continue,
            };
            let params: Vec<&[Tok]> = if angles && is_punct(t.get(open), '(') {
                split_group(t, open, true)
            } else if !angles {
                let end = (open + 1..t.len()).find(|&k| is_punct(t.get(k), '|'));
                let end = end.unwrap_or(open);
                t[open + 1..end].split(|x| *x == Tok::Punct(',')).collect()
            } else {
                continue;
            };
            let mut index = 0;
            for p in params {
                let p = if is_ident(p.first(), "mut") {
                    &p[1..]
                } else {
                    p
                };
                let colon = p.iter().position(|x| *x == Tok::Punct(':'));
                if p.iter()
                    .take(colon.unwrap_or(p.len()))
                    .any(|x| is_ident(Some(x), "self"))
                {
                    continue;
                }
                if is_ident(p.first(), "reason")
                    && colon == Some(1)
                    && p.iter().any(|x| is_ident(Some(x), "str"))
                {
                    out.entry(name.clone()).or_default().insert(index);
                }
                index += 1;
            }
        }
    }
    out
}

/// The reasons one expression names: a literal, a constant, or the literals of an `if`.
fn literal_reasons(e: &[Tok], constants: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    match e {
        [Tok::Str(s), ..] => vec![s.clone()],
        [Tok::Ident(s), Tok::Punct('('), Tok::Str(v), ..] if s == "Some" => vec![v.clone()],
        [
            Tok::Ident(s),
            Tok::Punct(':'),
            Tok::Punct(':'),
            Tok::Ident(f),
            Tok::Punct('('),
            Tok::Str(v),
            ..,
        ] if s == "String" && f == "from" => {
            vec![v.clone()]
        }
        [Tok::Ident(s), Tok::Punct('('), Tok::Ident(c), ..] if s == "Some" => {
            constants.get(c).into_iter().flatten().cloned().collect()
        }
        [Tok::Ident(c), ..] if is_constant_name(c) => {
            constants.get(c).into_iter().flatten().cloned().collect()
        }
        [Tok::Ident(s), ..] if s == "if" => e
            .windows(3)
            .filter_map(|w| match w {
                [Tok::Punct('{'), Tok::Str(v), Tok::Punct('}')] => Some(v.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The string forms a reason enum's `impl` at `i` gives its variants: the literals its
/// `as_str` or `Display::fmt` answers (`Variant => "X"`, `f.write_str("X")`).
fn enum_strings(t: &[Tok], i: usize) -> Vec<String> {
    if !is_ident(t.get(i), "impl") {
        return Vec::new();
    }
    let Some(open) = (i..t.len()).find(|&k| is_punct(t.get(k), '{')) else {
        return Vec::new();
    };
    let for_reason = t[i..open]
        .iter()
        .rev()
        .find_map(|x| match x {
            Tok::Ident(w) => Some(w.ends_with("Reason")),
            _ => None,
        })
        .unwrap_or(false);
    if !for_reason {
        return Vec::new();
    }
    let end = closing(t, open);
    let mut out = Vec::new();
    for f in open..end {
        if !(is_ident(t.get(f), "fn")
            && (is_ident(t.get(f + 1), "as_str") || is_ident(t.get(f + 1), "fmt")))
        {
            continue;
        }
        let Some(body) = (f..end).find(|&k| is_punct(t.get(k), '{')) else {
            continue;
        };
        for k in body..closing(t, body) {
            match (&t[k], t.get(k + 1), t.get(k + 2)) {
                (Tok::Punct('='), Some(Tok::Punct('>')), Some(Tok::Str(v))) => out.push(v.clone()),
                (Tok::Ident(w), Some(Tok::Punct('(')), Some(Tok::Str(v))) if w == "write_str" => {
                    out.push(v.clone())
                }
                _ => {}
            }
        }
    }
    out
}

/// Every reason the code emits, with the forms and files it was found in.
fn emitted() -> BTreeMap<String, BTreeSet<(Form, String)>> {
    let sources = sources();
    let constants = string_constants(&sources);
    let parameters = reason_parameters(&sources);
    let mut out: BTreeMap<String, BTreeSet<(Form, String)>> = BTreeMap::new();
    for (file, t) in &sources {
        let name = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        let mut add = |form: Form, reason: String| {
            if is_reason_like(&reason) {
                out.entry(reason).or_default().insert((form, name.clone()));
            }
        };
        for i in 0..t.len() {
            let ident = |k: usize| match t.get(k) {
                Some(Tok::Ident(w)) => Some(w.as_str()),
                _ => None,
            };
            // const REASON_X: &str = "X" (the constant table has its value).
            if let Some((c, v)) = const_decl(t, i)
                && (c.contains("REASON") || c.starts_with("EVENT_"))
            {
                add(Form::Constant, v.to_string());
            }
            // impl SomeReason { fn as_str(…) { match self { Self::Variant => "X", … } } }
            for v in enum_strings(t, i) {
                add(Form::Enum, v);
            }
            // reason: "X" in a struct literal
            if ident(i) == Some("reason")
                && is_punct(t.get(i + 1), ':')
                && !is_punct(t.get(i + 2), ':')
                && (is_punct(t.get(i.wrapping_sub(1)), '{')
                    || is_punct(t.get(i.wrapping_sub(1)), ','))
            {
                for v in literal_reasons(&t[i + 2..], &constants) {
                    add(Form::Field, v);
                }
            }
            // f(…, "X", …) where f's parameter there is `reason: &str`
            if let Some(f) = ident(i)
                && let Some(indexes) = parameters.get(f)
                && is_punct(t.get(i + 1), '(')
                && ident(i.wrapping_sub(1)) != Some("fn")
            {
                let args = split_group(t, i + 1, false);
                for v in indexes.iter().filter_map(|&k| args.get(k)) {
                    for v in literal_reasons(v, &constants) {
                        add(Form::Argument, v);
                    }
                }
            }
            // ("X", format!(…)), ("X", "a message"), ("True", "X", …)
            let prev = t.get(i.wrapping_sub(1));
            let tuple_start = matches!(prev, Some(Tok::Punct('(' | ',' | '=' | '{' | '[')))
                || (is_punct(prev, '>') && is_punct(t.get(i.wrapping_sub(2)), '='));
            if tuple_start
                && is_punct(t.get(i), '(')
                && let Some(Tok::Str(first)) = t.get(i + 1)
                && is_punct(t.get(i + 2), ',')
            {
                match (first.as_str(), t.get(i + 3)) {
                    ("True" | "False" | "Unknown", Some(Tok::Str(reason)))
                        if is_punct(t.get(i + 4), ',') =>
                    {
                        add(Form::Tuple, reason.clone())
                    }
                    (_, Some(Tok::Ident(m))) if m == "format" && is_punct(t.get(i + 4), '!') => {
                        add(Form::Tuple, first.clone())
                    }
                    (_, Some(Tok::Str(message))) if message.contains(' ') => {
                        add(Form::Tuple, first.clone())
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// Lines of a markdown file outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

fn backticked(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// The reasons in the first column of the guide's tables headed `| Reason |`.
fn tabled_reasons(guide: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_table = false;
    for line in prose_lines(guide) {
        let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
        if !line.trim_start().starts_with('|') || cells.len() < 3 {
            in_table = false;
        } else if cells[1] == "Reason" {
            in_table = true;
        } else if in_table && !cells[1].starts_with("---") {
            out.extend(backticked(cells[1]).map(str::to_string));
        }
    }
    out
}

#[test]
fn every_reason_the_code_emits_is_in_the_troubleshooting_guide() {
    let emitted = emitted();
    for (form, reason) in FLOOR {
        let found = emitted
            .get(*reason)
            .is_some_and(|f| f.iter().any(|(x, _)| x == form));
        assert!(
            found,
            "the scan of the sources no longer finds {reason:?} as a {form:?}: the scan is broken"
        );
    }
    assert!(
        emitted.len() >= MIN_REASONS,
        "the scan found only {} reasons (at least {MIN_REASONS} exist): {:?}",
        emitted.len(),
        emitted.keys().collect::<Vec<_>>()
    );
    let guide = read(&root().join(GUIDE));
    let documented: BTreeSet<&str> = prose_lines(&guide)
        .into_iter()
        .flat_map(backticked)
        .collect();
    let missing: Vec<String> = emitted
        .iter()
        .filter(|(reason, _)| !documented.contains(reason.as_str()))
        .map(|(reason, found)| {
            let files: BTreeSet<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
            format!(
                "{reason} (from {})",
                files.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{GUIDE} does not document these reasons the code emits; add each, backticked, with \
         what it means and what to do:\n  {}",
        missing.join("\n  ")
    );
    let never: Vec<String> = tabled_reasons(&guide)
        .into_iter()
        .filter(|r| !emitted.contains_key(r))
        .collect();
    assert!(
        never.is_empty(),
        "{GUIDE} lists reasons in its Reason tables that the code never emits: {never:?}"
    );
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped, spaces made hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let Some(title) = line.strip_prefix('#').map(|l| l.trim_start_matches('#')) else {
            continue;
        };
        let base = slug(title);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of the inline links `[text](target)` of `text`, outside code.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_documents_resolves() {
    let root = root();
    let mut documents = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    let mut checked = 0;
    let mut broken = Vec::new();
    for document in &documents {
        let text = read(document);
        let dir = document.parent().unwrap_or(&root);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                document.clone()
            } else {
                dir.join(path)
            };
            let name = document.strip_prefix(&root).unwrap_or(document).display();
            if !file.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
            } else if !anchor.is_empty()
                && file.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&file)).contains(anchor)
            {
                broken.push(format!("{name}: {target} (no such heading)"));
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} relative links found: the link scan is broken"
    );
    assert!(
        broken.is_empty(),
        "broken links:\n  {}",
        broken.join("\n  ")
    );
}
