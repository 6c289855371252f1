//! Path rules are checked the way cloudflared loads them: Go's `regexp.Compile`, that is
//! `regexp/syntax` with Perl flags (RE2 syntax). This is a validator only: it walks the pattern
//! once, keeps the shape Go's parser would build (which operand a repetition applies to, which
//! repetitions nest), and answers with Go's error code and the offending text.
//!
//! The rules, as Go (1.25 and later) applies them:
//! - Repetition `{n}`, `{n,}`, `{n,m}`: each count at most 1000, `n <= m`; a count with a leading
//!   zero (`{01}`) or a brace that is not one of these forms is a literal `{`.
//! - Nested repetition: walking down from a counted repetition (`n` or `m` ≥ 2), every chain of
//!   nested repetitions must satisfy Go's check — with `k` = 1000, each repetition's count `c`
//!   (its max, or its min when unbounded; a count of 0 ends the chain) must be ≤ `k`, then
//!   `k /= c` — so `(a{1000}){1000}` is "invalid repeat count".
//! - Two repetition operators in a row (`a**`, `a{2}{3}`, `a*??`) are "invalid nested
//!   repetition operator"; a repetition with nothing before it (`*a`, `(*)`, `a|*`) is "missing
//!   argument to repetition operator". `(?i)` pushes nothing, so `(?i)*` has no argument.
//! - Escapes: `\A \b \B \z`, `\Q…\E`, `\d \s \w` (and upper case), `\pX`, `\p{Name}`, `\PX`,
//!   `\p{^Name}`, `\a \f \n \r \t \v`, octal `\0`, `\0oo`, `\1oo`… (a lone `\1`–`\7` would be a
//!   back-reference: refused), `\xHH`, `\x{H…}` up to 10FFFF, and any ASCII punctuation.
//!   Everything else is refused: `\C`, `\Z`, `\8`, `\e`, a non-ASCII letter, a trailing `\`.
//!   Inside `[…]` the same escapes except the assertions and `\Q` (`[\b]` is refused).
//! - Unicode classes (`go_regex_names.rs`): general categories and their long aliases, Go's
//!   Unicode 15.0 scripts, `Any`, `ASCII`, `Assigned`, `LC`, `Cn`; the name is matched ignoring
//!   case, spaces, `_` and `-` — but a script whose own name has `_` or an inner capital
//!   (`Old_Italic`, `SignWriting`) is never found, as in Go.
//! - POSIX classes `[[:alpha:]]` and `[[:^alpha:]]` with the 14 POSIX names; another name is
//!   refused. A range `z-a` is refused.
//! - Groups `( )`, `(?: )`, `(?P<name> )`, `(?<name> )` (name of ASCII letters, digits, `_`;
//!   duplicates allowed), flags `(?imsU-imsU)` and `(?flags: )`. `(?x`, `(?=`, `(?!`, `(?<=`,
//!   `(?'n'`, `(?P=n)` and other Perl syntax are refused.
//!
//! Go also refuses patterns whose parse tree nests deeper than 1000, whose program would exceed
//! about 3.3 million instructions, or whose character classes hold more than 32 million code
//! points. None of these can be reached within [`MAX_PATTERN_BYTES`] (nesting costs at least
//! 1.3 bytes a level, program size at most about two instructions a byte times the 1000
//! repetition budget), so longer patterns are refused outright instead of modelled.

use super::go_regex_names::unicode_class_known;

/// Longest path pattern accepted; well below the length where Go's size limits start to matter.
pub(crate) const MAX_PATTERN_BYTES: usize = 1024;

/// Largest count in one repetition, and the budget of a chain of nested repetitions.
const MAX_REPEAT: i64 = 1000;

/// Why Go would refuse a pattern: its error code and the part of the pattern it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoRegexError {
    pub code: &'static str,
    pub expr: String,
}

impl std::fmt::Display for GoRegexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.expr.is_empty() {
            f.write_str(self.code)
        } else {
            write!(f, "{}: `{}`", self.code, self.expr)
        }
    }
}

fn err(code: &'static str, expr: &str) -> GoRegexError {
    GoRegexError {
        code,
        expr: expr.chars().take(64).collect(),
    }
}

const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_RANGE: &str = "invalid character class range";
const MISSING_BRACKET: &str = "missing closing ]";
const MISSING_PAREN: &str = "missing closing )";
const UNEXPECTED_PAREN: &str = "unexpected )";
const MISSING_ARGUMENT: &str = "missing argument to repetition operator";
const NESTED_REPEAT_OP: &str = "invalid nested repetition operator";
const REPEAT_COUNT: &str = "invalid repeat count";
const PERL_OP: &str = "invalid or unsupported Perl syntax";
const NAMED_CAPTURE: &str = "invalid named capture";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const TOO_LONG: &str = "longer than 1024 bytes, the most a path may have";

/// One operand of the parse: only what the nested-repetition rule needs.
#[derive(Debug, Default)]
struct Node {
    /// `(min, max)` of a counted repetition; `max` is -1 for `{n,}`.
    repeat: Option<(i64, i64)>,
    children: Vec<usize>,
}

/// What sits on the parse stack: an operand, or a marker an operator cannot apply to.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Operand(usize),
    OpenGroup,
    Bar,
}

#[derive(Default)]
struct Parser {
    nodes: Vec<Node>,
    stack: Vec<Slot>,
}

impl Parser {
    fn operand(&mut self, children: Vec<usize>) {
        self.nodes.push(Node {
            repeat: None,
            children,
        });
        self.stack.push(Slot::Operand(self.nodes.len() - 1));
    }

    /// Applies a repetition to the operand on top of the stack, as Go's `repeat` does.
    /// Only counted repetitions (`{…}`) take part in the nesting budget.
    fn repeat(&mut self, min: i64, max: i64, text: &str) -> Result<(), GoRegexError> {
        let Some(Slot::Operand(sub)) = self.stack.last().copied() else {
            return Err(err(MISSING_ARGUMENT, text));
        };
        let counted = text.starts_with('{');
        self.nodes.push(Node {
            repeat: counted.then_some((min, max)),
            children: vec![sub],
        });
        let id = self.nodes.len() - 1;
        if let Some(top) = self.stack.last_mut() {
            *top = Slot::Operand(id);
        }
        if counted && (min >= 2 || max >= 2) && !self.repeat_fits(id, MAX_REPEAT) {
            return Err(err(REPEAT_COUNT, text));
        }
        Ok(())
    }

    /// Go's nested-repetition budget, with its integer division.
    fn repeat_fits(&self, id: usize, mut budget: i64) -> bool {
        let node = &self.nodes[id];
        if let Some((min, max)) = node.repeat {
            if max == 0 {
                return true;
            }
            let count = if max < 0 { min } else { max };
            if count > budget {
                return false;
            }
            if count > 0 {
                budget /= count;
            }
        }
        node.children
            .iter()
            .all(|child| self.repeat_fits(*child, budget))
    }

    /// `)`: everything since the matching `(` becomes one operand.
    fn close_group(&mut self, whole: &str) -> Result<(), GoRegexError> {
        let mut children = Vec::new();
        loop {
            match self.stack.pop() {
                Some(Slot::Operand(id)) => children.push(id),
                Some(Slot::Bar) => {}
                Some(Slot::OpenGroup) => break,
                None => return Err(err(UNEXPECTED_PAREN, whole)),
            }
        }
        self.operand(children);
        Ok(())
    }
}

/// Checks `pattern` as Go's `regexp.Compile` would; `Ok` means cloudflared loads it.
pub fn check(pattern: &str) -> Result<(), GoRegexError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(err(TOO_LONG, ""));
    }
    let mut p = Parser::default();
    let mut t = pattern;
    // The text of the repetition operator just read, if the previous token was one.
    let mut last_repeat: Option<&str> = None;
    while let Some(c) = t.chars().next() {
        let mut this_repeat = None;
        match c {
            '(' if t[1..].starts_with('?') => {
                t = perl_group(t, &mut p)?;
            }
            '(' => {
                p.stack.push(Slot::OpenGroup);
                t = &t[1..];
            }
            '|' => {
                p.stack.push(Slot::Bar);
                t = &t[1..];
            }
            ')' => {
                p.close_group(pattern)?;
                t = &t[1..];
            }
            '^' | '$' | '.' => {
                p.operand(Vec::new());
                t = &t[1..];
            }
            '[' => {
                t = class(t)?;
                p.operand(Vec::new());
            }
            '*' | '+' | '?' | '{' => {
                let (min, max, after) = if c == '{' {
                    match parse_repeat(t) {
                        None => {
                            p.operand(Vec::new()); // a literal `{`
                            t = &t[1..];
                            last_repeat = None;
                            continue;
                        }
                        Some((min, max, after)) => {
                            let text = &t[..t.len() - after.len()];
                            if !(0..=MAX_REPEAT).contains(&min)
                                || max > MAX_REPEAT
                                || (max >= 0 && min > max)
                            {
                                return Err(err(REPEAT_COUNT, text));
                            }
                            (min, max, after)
                        }
                    }
                } else {
                    let (min, max) = match c {
                        '*' => (0, -1),
                        '+' => (1, -1),
                        _ => (0, 1),
                    };
                    (min, max, &t[1..])
                };
                let after = after.strip_prefix('?').unwrap_or(after);
                let text = &t[..t.len() - after.len()];
                if let Some(previous) = last_repeat {
                    let joined = &previous[..previous.len() - after.len()];
                    return Err(err(NESTED_REPEAT_OP, joined));
                }
                p.repeat(min, max, text)?;
                this_repeat = Some(t);
                t = after;
            }
            '\\' => {
                t = escape_outside_class(t, &mut p)?;
            }
            _ => {
                p.operand(Vec::new());
                t = &t[c.len_utf8()..];
            }
        }
        last_repeat = this_repeat;
    }
    if p.stack.iter().any(|slot| matches!(slot, Slot::OpenGroup)) {
        return Err(err(MISSING_PAREN, pattern));
    }
    Ok(())
}

/// `(?…`: a named group, a non-capturing group, or a flag change.
fn perl_group<'a>(t: &'a str, p: &mut Parser) -> Result<&'a str, GoRegexError> {
    let named = if t.len() > 4 && t[2..].starts_with("P<") {
        Some(4)
    } else if t.len() > 3 && t[2..].starts_with('<') {
        Some(3)
    } else {
        None
    };
    if let Some(start) = named {
        let Some(end) = t.find('>') else {
            return Err(err(NAMED_CAPTURE, t));
        };
        let name = &t[start..end];
        if name.is_empty() || !name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()) {
            return Err(err(NAMED_CAPTURE, &t[..=end]));
        }
        p.stack.push(Slot::OpenGroup);
        return Ok(&t[end + 1..]);
    }
    let mut negated = false;
    let mut saw_flag = false;
    for (i, c) in t[2..].char_indices() {
        match c {
            'i' | 'm' | 's' | 'U' => saw_flag = true,
            '-' if !negated => {
                negated = true;
                saw_flag = false;
            }
            ':' | ')' if !negated || saw_flag => {
                if c == ':' {
                    p.stack.push(Slot::OpenGroup);
                }
                return Ok(&t[2 + i + 1..]);
            }
            _ => return Err(err(PERL_OP, &t[..2 + i + c.len_utf8()])),
        }
    }
    Err(err(PERL_OP, t))
}

/// `{min}`, `{min,}` or `{min,max}` at the start of `t`, with the rest; `None` if it is none of
/// these (then `{` is a literal). A count too large to read is -1.
fn parse_repeat(t: &str) -> Option<(i64, i64, &str)> {
    let s = t.strip_prefix('{')?;
    let (min, s) = parse_int(s)?;
    let (min, max, s) = if let Some(s) = s.strip_prefix(',') {
        if s.starts_with('}') {
            (min, -1, s)
        } else {
            let (max, s) = parse_int(s)?;
            (if max < 0 { -1 } else { min }, max, s)
        }
    } else {
        (min, min, s)
    };
    let rest = s.strip_prefix('}')?;
    Some((min, max, rest))
}

/// A decimal count without leading zeros; -1 when it has too many digits.
fn parse_int(s: &str) -> Option<(i64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let mut n: i64 = 0;
    for b in s[..digits].bytes() {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(b - b'0');
    }
    Some((n, &s[digits..]))
}

/// A backslash outside a class: an assertion, `\Q…\E`, a class escape or a single character.
fn escape_outside_class<'a>(t: &'a str, p: &mut Parser) -> Result<&'a str, GoRegexError> {
    let next = t[1..].chars().next();
    match next {
        Some('A' | 'b' | 'B' | 'z') => {
            p.operand(Vec::new());
            return Ok(&t[2..]);
        }
        Some('C') => return Err(err(INVALID_ESCAPE, &t[..2])),
        Some('Q') => {
            let quoted = &t[2..];
            let (literal, rest) = quoted.split_once("\\E").unwrap_or((quoted, ""));
            for _ in literal.chars() {
                p.operand(Vec::new());
            }
            return Ok(rest);
        }
        Some('p' | 'P') => {
            let rest = unicode_class(t)?;
            p.operand(Vec::new());
            return Ok(rest);
        }
        _ => {}
    }
    if let Some(rest) = perl_class(t) {
        p.operand(Vec::new());
        return Ok(rest);
    }
    let rest = single_escape(t)?;
    p.operand(Vec::new());
    Ok(rest)
}

fn perl_class(t: &str) -> Option<&str> {
    let b = t.as_bytes();
    (b.len() >= 2 && b[0] == b'\\' && b"dDsSwW".contains(&b[1])).then(|| &t[2..])
}

/// `\pX`, `\p{Name}`, `\PX`, `\p{^Name}` at the start of `t`.
fn unicode_class(t: &str) -> Result<&str, GoRegexError> {
    let after = &t[2..];
    let (seq, name, rest) = match after.chars().next() {
        Some('{') => {
            let Some(end) = t.find('}') else {
                return Err(err(INVALID_RANGE, t));
            };
            (&t[..=end], &t[3..end], &t[end + 1..])
        }
        Some(c) => {
            let len = 2 + c.len_utf8();
            (&t[..len], &t[2..len], &t[len..])
        }
        None => (t, "", ""),
    };
    let name = name.strip_prefix('^').unwrap_or(name);
    if unicode_class_known(name) {
        Ok(rest)
    } else {
        Err(err(INVALID_RANGE, seq))
    }
}

/// One escaped character (`\n`, `\x41`, `\052`, `\.`), with the rest of the pattern.
fn single_escape(t: &str) -> Result<&str, GoRegexError> {
    let rest = &t[1..];
    let Some(c) = rest.chars().next() else {
        return Err(err(TRAILING_BACKSLASH, ""));
    };
    let after = &rest[c.len_utf8()..];
    let invalid = |end: &str| err(INVALID_ESCAPE, &t[..t.len() - end.len()]);
    match c {
        '1'..='7' if !after.starts_with(|d: char| ('0'..='7').contains(&d)) => Err(invalid(after)),
        '0'..='7' => {
            let extra = after
                .bytes()
                .take(2)
                .take_while(|d| (b'0'..=b'7').contains(d))
                .count();
            Ok(&after[extra..])
        }
        'x' => hex_escape(after).ok_or_else(|| invalid(after)),
        'a' | 'f' | 'n' | 'r' | 't' | 'v' => Ok(after),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok(after),
        _ => Err(invalid(after)),
    }
}

/// After `\x`: two hex digits, or `{…}` with at least one hex digit, at most 10FFFF.
fn hex_escape(s: &str) -> Option<&str> {
    if let Some(inner) = s.strip_prefix('{') {
        let end = inner.find('}')?;
        let digits = &inner[..end];
        let mut value: u32 = 0;
        for c in digits.chars() {
            value = value * 16 + c.to_digit(16)?;
            if value > 0x10_FFFF {
                return None;
            }
        }
        return (!digits.is_empty()).then(|| &inner[end + 1..]);
    }
    let mut chars = s.chars();
    let (a, b) = (chars.next()?, chars.next()?);
    (a.is_ascii_hexdigit() && b.is_ascii_hexdigit()).then(|| &s[2..])
}

/// A bracketed class starting at `t` (`[`); returns the rest after its `]`.
fn class(whole: &str) -> Result<&str, GoRegexError> {
    let mut t = &whole[1..];
    if let Some(rest) = t.strip_prefix('^') {
        t = rest;
    }
    let mut first = true;
    while first || !t.starts_with(']') {
        first = false;
        if t.len() > 2
            && t.starts_with("[:")
            && let Some(i) = t[2..].find(":]")
        {
            let name = &t[..i + 4];
            if !posix_class_known(&name[2..name.len() - 2]) {
                return Err(err(INVALID_RANGE, name));
            }
            t = &t[i + 4..];
            continue;
        }
        if t.starts_with("\\p") || t.starts_with("\\P") {
            t = unicode_class(t)?;
            continue;
        }
        if let Some(rest) = perl_class(t) {
            t = rest;
            continue;
        }
        let range_start = t;
        let (lo, rest) = class_char(t, whole)?;
        t = rest;
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (hi, rest) = class_char(&t[1..], whole)?;
            t = rest;
            if hi < lo {
                return Err(err(
                    INVALID_RANGE,
                    &range_start[..range_start.len() - t.len()],
                ));
            }
        }
    }
    Ok(&t[1..])
}

fn posix_class_known(name: &str) -> bool {
    const POSIX: [&str; 14] = [
        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
        "space", "upper", "word", "xdigit",
    ];
    POSIX.contains(&name.strip_prefix('^').unwrap_or(name))
}

/// One character of a class, escaped or not, as a code point.
fn class_char<'a>(t: &'a str, whole: &str) -> Result<(u32, &'a str), GoRegexError> {
    let Some(c) = t.chars().next() else {
        return Err(err(MISSING_BRACKET, whole));
    };
    if c != '\\' {
        return Ok((u32::from(c), &t[c.len_utf8()..]));
    }
    let rest = single_escape(t)?;
    Ok((escaped_value(&t[1..t.len() - rest.len()]), rest))
}

/// The code point of an escape already known to be valid (without its backslash).
fn escaped_value(body: &str) -> u32 {
    let mut chars = body.chars();
    let Some(c) = chars.next() else { return 0 };
    let tail = chars.as_str();
    match c {
        '0'..='7' => u32::from_str_radix(body, 8).unwrap_or(0),
        'x' => {
            let digits = tail.trim_start_matches('{').trim_end_matches('}');
            u32::from_str_radix(digits, 16).unwrap_or(0)
        }
        'a' => 7,
        'f' => 12,
        'n' => 10,
        'r' => 13,
        't' => 9,
        'v' => 11,
        c => u32::from(c),
    }
}

#[cfg(test)]
#[path = "go_regex_tests.rs"]
mod tests;
