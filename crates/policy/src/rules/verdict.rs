//! The outcome of checking one object: every violation at once, plus advice.
use std::fmt;

/// One broken rule: `<field path>: <what is wrong>; <how to fix it>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Violation(String);

impl Violation {
    /// `field` in Kubernetes field-path notation, `problem` says what is wrong and how to fix it.
    pub fn new(field: impl fmt::Display, problem: impl fmt::Display) -> Self {
        Violation(format!("{field}: {problem}"))
    }

    /// A message that already carries its field path (the texts shared with CEL rules).
    pub(crate) fn from_message(message: &str) -> Self {
        Violation(message.to_string())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn is_allowed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn deny(&mut self, field: impl fmt::Display, problem: impl fmt::Display) {
        self.violations.push(Violation::new(field, problem));
    }

    pub fn warn(&mut self, field: impl fmt::Display, advice: impl fmt::Display) {
        self.warnings.push(format!("{field}: {advice}"));
    }

    /// All violations in one answer, joined by `; ` (docs/design.md §2).
    pub fn denial_message(&self) -> Option<String> {
        if self.violations.is_empty() {
            return None;
        }
        Some(
            self.violations
                .iter()
                .map(Violation::message)
                .collect::<Vec<_>>()
                .join("; "),
        )
    }

    /// UPDATE ratcheting: keep only violations the old object did not already have.
    pub fn ratchet(mut self, old: &Verdict) -> Verdict {
        self.violations.retain(|v| !old.violations.contains(v));
        self
    }
}
