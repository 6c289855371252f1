//! A diff-like excerpt of two texts: the first differing line with a few lines around it.

/// Lines shown before and after the first difference.
const CONTEXT: usize = 4;

/// `-` lines of `expected`, `+` lines of `actual`, from a little before the first line where
/// they differ, with line numbers.
pub fn excerpt(expected: &str, actual: &str) -> String {
    let want: Vec<&str> = expected.lines().collect();
    let got: Vec<&str> = actual.lines().collect();
    let first = want
        .iter()
        .zip(&got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let from = first.saturating_sub(CONTEXT);
    let mut out = format!("first difference at line {}:\n", first + 1);
    for (n, line) in want.iter().enumerate().take(first).skip(from) {
        out.push_str(&format!("  {:>5}  {line}\n", n + 1));
    }
    for (n, line) in want.iter().enumerate().skip(first).take(CONTEXT + 1) {
        out.push_str(&format!("- {:>5}  {line}\n", n + 1));
    }
    for (n, line) in got.iter().enumerate().skip(first).take(CONTEXT + 1) {
        out.push_str(&format!("+ {:>5}  {line}\n", n + 1));
    }
    out.push_str(&format!(
        "(expected {} lines, the plan has {})",
        want.len(),
        got.len()
    ));
    out
}
