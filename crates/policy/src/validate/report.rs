//! What `cftunnel validate` found, per object, and how it is printed.
use std::fmt;
use std::io::{self, Write};

/// `<Kind> <namespace>/<name>`, or `<Kind> <name>` for a cluster-scoped object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn namespaced(kind: &str, namespace: &str, name: &str) -> Self {
        ObjectRef {
            kind: kind.to_string(),
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
        }
    }

    pub fn cluster(kind: &str, name: &str) -> Self {
        ObjectRef {
            kind: kind.to_string(),
            namespace: None,
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The verdict on one object of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub object: ObjectRef,
    /// Where the object was read, e.g. `shop.yaml#2`.
    pub origin: String,
    pub violations: Vec<String>,
    pub warnings: Vec<String>,
}

/// Findings in input order; objects that passed without warnings are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// How many objects the rules judged (every kind cftunnel admits, Ingresses and Gateway
    /// API routes of cftunnel's).
    pub judged: usize,
}

impl Report {
    pub(crate) fn has_violations(&self) -> bool {
        self.findings.iter().any(|f| !f.violations.is_empty())
    }

    /// One line per violation: `<Kind> <namespace>/<name>: <message>`.
    pub(crate) fn violation_lines(&self) -> Vec<String> {
        self.lines(|f| &f.violations)
    }

    /// One line per warning, without the `warning: ` prefix.
    pub(crate) fn warning_lines(&self) -> Vec<String> {
        self.lines(|f| &f.warnings)
    }

    fn lines(&self, pick: impl Fn(&Finding) -> &Vec<String>) -> Vec<String> {
        self.findings
            .iter()
            .flat_map(|f| pick(f).iter().map(move |m| format!("{}: {m}", f.object)))
            .collect()
    }

    /// 1 when any object is refused, 0 otherwise.
    pub(crate) fn exit_code(&self) -> u8 {
        u8::from(self.has_violations())
    }

    /// Violations on `out`, warnings on `err` prefixed `warning: `.
    pub fn print(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<()> {
        for line in self.warning_lines() {
            writeln!(err, "warning: {line}")?;
        }
        for line in self.violation_lines() {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}
