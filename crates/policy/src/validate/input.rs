//! Reading manifests: files, directories (recursively), stdin; multi-document YAML, JSON and
//! `kind: List` objects, each document remembered with where it came from.
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde_json::Value;

/// Extensions read when walking a directory; files named explicitly are read whatever their name.
const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];
/// Name shown for standard input.
pub(crate) const STDIN_NAME: &str = "<stdin>";

/// Why the input could not be read: the command gives up (exit code 2) instead of judging
/// half of what the user meant.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: no such file or directory")]
    Missing { path: PathBuf },
    #[error("{origin}: cannot read: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: document {index}: not valid YAML or JSON: {message}")]
    Syntax {
        origin: String,
        /// 1-based position of the document in its file.
        index: usize,
        message: String,
    },
}

impl InputError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Missing { .. } => "missing",
            Self::Read { .. } => "read",
            Self::Syntax { .. } => "syntax",
        }
    }
}

/// One object of the input, in input order.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// `<file>#<document>` (1-based), plus `[<item>]` for an item of a `kind: List`.
    pub origin: String,
    pub value: Value,
}

/// [`read_sources`] for a command: `None` after writing the reason to `err` (the input could
/// not be read; the command exits with [`super::EXIT_UNREADABLE`]).
pub fn read_or_report(
    sources: &[String],
    stdin: &mut dyn Read,
    err: &mut dyn Write,
) -> std::io::Result<Option<Vec<Document>>> {
    match read_sources(sources, stdin) {
        Ok(documents) => Ok(Some(documents)),
        Err(e) => {
            writeln!(err, "error: {e}")?;
            Ok(None)
        }
    }
}

/// Reads every source in order; `-` is standard input (read at most once).
pub fn read_sources(sources: &[String], stdin: &mut dyn Read) -> Result<Vec<Document>, InputError> {
    let mut documents = Vec::new();
    let mut stdin_text: Option<String> = None;
    for source in sources {
        if source == "-" {
            let text = match &stdin_text {
                Some(text) => text.clone(),
                None => {
                    let mut text = String::new();
                    stdin
                        .read_to_string(&mut text)
                        .map_err(|source| InputError::Read {
                            origin: STDIN_NAME.to_string(),
                            source,
                        })?;
                    stdin_text = Some(text.clone());
                    text
                }
            };
            documents.extend(parse_text(STDIN_NAME, &text, false)?);
        } else {
            for file in manifest_files(Path::new(source))? {
                documents.extend(read_file(&file)?);
            }
        }
    }
    Ok(documents)
}

/// The file itself, or the manifests under a directory, sorted by path so the order (which
/// decides hostname ownership) does not depend on the file system.
fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, InputError> {
    let metadata = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => InputError::Missing {
            path: path.to_owned(),
        },
        _ => InputError::Read {
            origin: path.display().to_string(),
            source,
        },
    })?;
    if !metadata.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let read_error = |source| InputError::Read {
        origin: path.display().to_string(),
        source,
    };
    let mut entries: Vec<(PathBuf, bool)> = std::fs::read_dir(path)
        .map_err(read_error)?
        .map(|entry| entry.and_then(|e| Ok((e.path(), e.file_type()?.is_dir()))))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    let mut files = Vec::new();
    // `file_type` does not follow symlinks: a link to a directory is not walked, so a link
    // loop cannot recurse forever.
    for (entry, is_dir) in entries {
        if is_dir {
            files.extend(manifest_files(&entry)?);
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
        {
            files.push(entry);
        }
    }
    Ok(files)
}

fn read_file(path: &Path) -> Result<Vec<Document>, InputError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        origin: origin.clone(),
        source,
    })?;
    let json = path.extension().and_then(|e| e.to_str()) == Some("json");
    parse_text(&origin, &text, json)
}

/// Splits `text` into documents (`---` for YAML; a stream of values for JSON), skipping empty
/// ones, and expands lists.
pub(crate) fn parse_text(
    origin: &str,
    text: &str,
    json: bool,
) -> Result<Vec<Document>, InputError> {
    let mut values = Vec::new();
    if json {
        for (i, value) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            values.push(value.map_err(|e| InputError::Syntax {
                origin: origin.to_string(),
                index: i + 1,
                message: e.to_string(),
            })?);
        }
    } else {
        for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            // After a syntax error the stream cannot resume: stop at the first one.
            let value = Value::deserialize(document).map_err(|e| InputError::Syntax {
                origin: origin.to_string(),
                index: i + 1,
                message: e.to_string(),
            })?;
            values.push(value);
        }
    }
    let mut documents = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        if value.is_null() {
            continue;
        }
        expand(format!("{origin}#{}", i + 1), value, &mut documents);
    }
    Ok(documents)
}

/// `kind: List` (and `<Kind>List`) objects stand for their items, in order.
fn expand(origin: String, value: Value, out: &mut Vec<Document>) {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(items) = value
        .get("items")
        .and_then(Value::as_array)
        .filter(|_| kind.ends_with("List"))
    else {
        out.push(Document { origin, value });
        return;
    };
    let item_kind = kind.strip_suffix("List").unwrap_or("");
    let api_version = value.get("apiVersion").cloned();
    for (i, item) in items.iter().enumerate() {
        let mut item = item.clone();
        // Items of a typed list (`TunnelBindingList`) may omit their kind and apiVersion.
        if let Value::Object(map) = &mut item {
            if !item_kind.is_empty() && !map.contains_key("kind") {
                map.insert("kind".into(), Value::String(item_kind.to_string()));
            }
            if let (false, Some(v)) = (map.contains_key("apiVersion"), &api_version) {
                map.insert("apiVersion".into(), v.clone());
            }
        }
        expand(format!("{origin}[{i}]"), item, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(docs: &[Document]) -> Vec<(String, String)> {
        docs.iter()
            .map(|d| {
                (
                    d.origin.clone(),
                    d.value["kind"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn splits_documents_skips_empty_ones_and_expands_lists() {
        let text = "kind: A\n---\n# only a comment\n---\nkind: List\napiVersion: v1\nitems:\n- kind: B\n- kind: C\n---\nkind: D\n";
        let docs = parse_text("f.yaml", text, false).expect("parses");
        assert_eq!(
            kinds(&docs),
            vec![
                ("f.yaml#1".to_string(), "A".to_string()),
                ("f.yaml#3[0]".to_string(), "B".to_string()),
                ("f.yaml#3[1]".to_string(), "C".to_string()),
                ("f.yaml#4".to_string(), "D".to_string()),
            ]
        );
        assert_eq!(docs[1].value["apiVersion"], "v1");
    }

    #[test]
    fn typed_list_items_get_the_list_kind() {
        let text = r#"{"kind": "TunnelBindingList", "apiVersion": "networking.cfargotunnel.com/v1alpha1", "items": [{"metadata": {"name": "a"}}]}"#;
        let docs = parse_text("l.json", text, true).expect("parses");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].value["kind"], "TunnelBinding");
        assert_eq!(
            docs[0].value["apiVersion"],
            "networking.cfargotunnel.com/v1alpha1"
        );
    }

    #[test]
    fn a_syntax_error_names_the_origin_and_the_document() {
        let text = "kind: A\n---\nkind: [unclosed\n";
        let err = parse_text("bad.yaml", text, false).expect_err("syntax error");
        match &err {
            InputError::Syntax { origin, index, .. } => {
                assert_eq!((origin.as_str(), *index), ("bad.yaml", 2));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with("bad.yaml: document 2: not valid YAML or JSON: "),
            "{err}"
        );
    }

    #[test]
    fn a_json_stream_is_read_value_by_value() {
        let docs =
            parse_text("s.json", "{\"kind\": \"A\"}\n{\"kind\": \"B\"}", true).expect("parses");
        assert_eq!(docs.len(), 2);
        let err = parse_text("s.json", "{\"kind\": \"A\"} {", true).expect_err("truncated");
        assert!(err.to_string().starts_with("s.json: document 2: "), "{err}");
    }

    #[test]
    fn a_missing_path_is_reported_with_the_path() {
        let err = read_sources(&["/nonexistent/x.yaml".to_string()], &mut std::io::empty())
            .expect_err("missing");
        assert_eq!(
            err.to_string(),
            "/nonexistent/x.yaml: no such file or directory"
        );
    }

    #[test]
    fn directories_are_walked_in_path_order_without_following_links() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/deeper")).expect("mkdir");
        for (file, kind) in [("b.yaml", "B"), ("a/deeper/c.yml", "C"), ("a/a.json", "A")] {
            std::fs::write(root.join(file), format!("{{\"kind\": \"{kind}\"}}")).expect("write");
        }
        std::fs::write(root.join("a/readme.md"), "kind: [").expect("write");
        std::os::unix::fs::symlink(root, root.join("a/loop")).expect("symlink");
        let docs =
            read_sources(&[root.display().to_string()], &mut std::io::empty()).expect("reads");
        let kinds: Vec<&str> = docs
            .iter()
            .filter_map(|d| d.value["kind"].as_str())
            .collect();
        assert_eq!(kinds, vec!["A", "C", "B"]);
    }
}
