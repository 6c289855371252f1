//! Answers recorded from cloudflared 2026.8.2 (`ingress validate`); the differential test in
//! tests/go_regex_cloudflared.rs checks thousands more against the binary itself.
use super::*;

fn code(pattern: &str) -> Option<&'static str> {
    check(pattern).err().map(|e| e.code)
}

#[test]
fn accepts_what_go_accepts() {
    for pattern in [
        "^/api(/|$)",
        "a{1000}",
        "(?:(?:a{10}){10}){10}",
        "((a{3}){3}){111}",
        "a{2}(?i){500}",
        "a*(?i)*",
        "a{,5}",
        "a{01}",
        "{",
        "$*",
        "^*",
        "\\b*",
        "x*?",
        "(?)",
        "(?-i)",
        "(?i-s:a)",
        "(?<1a>x)",
        "(?P<n>a)(?P<n>b)",
        "\\Qa.b\\E",
        "a\\Q\\E*",
        "\\0",
        "\\12",
        "\\<",
        "\\_",
        "\\x{10FFFF}",
        "\\x41",
        "[[:word:]]",
        "[[:^alpha:]]",
        "[]a]",
        "[^]a]",
        "[a-]",
        "[\\d-z]",
        "[a-b-c]",
        "\\p{Letter}",
        "\\p{greek}",
        "\\P{^Greek}",
        "\\p{L u}",
        "\\pL{1000}",
        "()*",
        "(?:)*",
    ] {
        assert_eq!(check(pattern), Ok(()), "{pattern}");
    }
}

#[test]
fn refuses_what_go_refuses_with_its_reason() {
    for (pattern, expected) in [
        ("(a{1000}){1000}", REPEAT_COUNT),
        ("\\p{L}{1000}{1000}", NESTED_REPEAT_OP),
        ("a{1001}", REPEAT_COUNT),
        ("a{1000000000}", REPEAT_COUNT),
        ("a{5,4}", REPEAT_COUNT),
        ("((a{3}){3}){112}", REPEAT_COUNT),
        ("a{3}(?i){500}", REPEAT_COUNT),
        ("{1001}", REPEAT_COUNT),
        ("x**", NESTED_REPEAT_OP),
        ("x*??", NESTED_REPEAT_OP),
        ("x{2}{3}", NESTED_REPEAT_OP),
        ("*", MISSING_ARGUMENT),
        ("(*)", MISSING_ARGUMENT),
        ("(|*)", MISSING_ARGUMENT),
        ("(?i)*", MISSING_ARGUMENT),
        ("{5}", MISSING_ARGUMENT),
        ("(?x)a", PERL_OP),
        ("(?=a)", PERL_OP),
        ("(?P=n)", PERL_OP),
        ("(?'n'a)", PERL_OP),
        ("(?i-)", PERL_OP),
        ("(?--i)", PERL_OP),
        ("(?i", PERL_OP),
        ("(?<é>x)", NAMED_CAPTURE),
        ("(?<>x)", NAMED_CAPTURE),
        ("(?<a", NAMED_CAPTURE),
        ("\\C", INVALID_ESCAPE),
        ("\\Z", INVALID_ESCAPE),
        ("\\8", INVALID_ESCAPE),
        ("\\18", INVALID_ESCAPE),
        ("\\é", INVALID_ESCAPE),
        ("\\xg1", INVALID_ESCAPE),
        ("\\x4", INVALID_ESCAPE),
        ("\\x{}", INVALID_ESCAPE),
        ("\\x{110000}", INVALID_ESCAPE),
        ("[\\b]", INVALID_ESCAPE),
        ("a\\", TRAILING_BACKSLASH),
        ("\\p{Old_Italic}", INVALID_RANGE),
        ("\\p{Alphabetic}", INVALID_RANGE),
        ("\\p{gc=L}", INVALID_RANGE),
        ("\\p{}", INVALID_RANGE),
        ("\\p", INVALID_RANGE),
        ("\\pX", INVALID_RANGE),
        ("\\p{L", INVALID_RANGE),
        ("[[:foo:]]", INVALID_RANGE),
        ("[z-a]", INVALID_RANGE),
        ("[a", MISSING_BRACKET),
        ("[]", MISSING_BRACKET),
        ("(a", MISSING_PAREN),
        ("a)", UNEXPECTED_PAREN),
    ] {
        assert_eq!(code(pattern), Some(expected), "{pattern}");
    }
}

#[test]
fn errors_name_the_offending_text() {
    assert_eq!(
        check("/x(a{1000}){1000}").map_err(|e| e.to_string()),
        Err("invalid repeat count: `{1000}`".to_owned())
    );
    assert_eq!(
        check("\\p{L}{1000}{1000}").map_err(|e| e.to_string()),
        Err("invalid nested repetition operator: `{1000}{1000}`".to_owned())
    );
}

#[test]
fn long_patterns_are_refused_before_parsing() {
    assert_eq!(check(&"a".repeat(MAX_PATTERN_BYTES)), Ok(()));
    assert_eq!(
        check(&"a".repeat(MAX_PATTERN_BYTES + 1)).map_err(|e| e.to_string()),
        Err("longer than 1024 bytes, the most a path may have".to_owned())
    );
}

#[test]
fn deep_nesting_within_the_limit_is_accepted() {
    let depth = MAX_PATTERN_BYTES / 2 - 1;
    let pattern = format!("{}a{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(check(&pattern), Ok(()));
}
