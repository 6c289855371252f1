//! A deterministic corpus of path patterns around the edges of Go's regexp rules: repetition
//! counts near 1000 and their nesting, Unicode, Perl and POSIX classes, flags, groups, anchors,
//! escapes Go refuses, and random compositions of all of these.

/// Class names: every general category, alias and script Go has, spellings it ignores, and
/// names other engines know but Go does not.
const NAMES: &[&str] = &[
    "L",
    "Lu",
    "Ll",
    "Lt",
    "Lm",
    "Lo",
    "LC",
    "Lc",
    "lc",
    "M",
    "Mn",
    "Mc",
    "Me",
    "N",
    "Nd",
    "Nl",
    "No",
    "P",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "S",
    "Sm",
    "Sc",
    "Sk",
    "So",
    "Z",
    "Zs",
    "Zl",
    "Zp",
    "C",
    "Cc",
    "Cf",
    "Cs",
    "Co",
    "Cn",
    "Any",
    "any",
    "ASCII",
    "Ascii",
    "Assigned",
    "Letter",
    "letter",
    "Uppercase_Letter",
    "uppercase letter",
    "Upper-Case-Letter",
    "Lowercase_Letter",
    "Titlecase_Letter",
    "Cased_Letter",
    "Modifier_Letter",
    "Other_Letter",
    "Mark",
    "Combining_Mark",
    "Nonspacing_Mark",
    "Spacing_Mark",
    "Enclosing_Mark",
    "Number",
    "Decimal_Number",
    "Letter_Number",
    "Other_Number",
    "Punctuation",
    "punct",
    "Connector_Punctuation",
    "Dash_Punctuation",
    "Open_Punctuation",
    "Close_Punctuation",
    "Initial_Punctuation",
    "Final_Punctuation",
    "Other_Punctuation",
    "Symbol",
    "Math_Symbol",
    "Currency_Symbol",
    "Modifier_Symbol",
    "Other_Symbol",
    "Separator",
    "Space_Separator",
    "Line_Separator",
    "Paragraph_Separator",
    "Other",
    "Control",
    "cntrl",
    "digit",
    "Format",
    "Surrogate",
    "Private_Use",
    "Unassigned",
    "Greek",
    "greek",
    "GREEK",
    "Latin",
    "Han",
    "Hangul",
    "Cyrillic",
    "Arabic",
    "Hebrew",
    "Common",
    "Inherited",
    "Kawi",
    "Nko",
    "Yi",
    "Braille",
    "Old_Italic",
    "OldItalic",
    "old italic",
    "SignWriting",
    "Signwriting",
    "Nag_Mundari",
    "Katakana_Or_Hiragana",
    "Unknown",
    "Zzzz",
    "Alphabetic",
    "Emoji",
    "White_Space",
    "gc=L",
    "Script=Greek",
    "Garay",
    "Sidetic",
    "Todhri",
    "Lx",
    "Letters",
    "",
    "^",
    "^L",
    "^Greek",
    "^Letter",
    "L u",
    "-L-",
    "_greek_",
];

const SCRIPTS_MORE: &[&str] = &[
    "Adlam",
    "Ahom",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Buginese",
    "Buhid",
    "Carian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Deseret",
    "Devanagari",
    "Dogra",
    "Duployan",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Gujarati",
    "Gurmukhi",
    "Hanunoo",
    "Hatran",
    "Hiragana",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kharoshthi",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Lepcha",
    "Limbu",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Medefaidrin",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nandinagari",
    "Newa",
    "Nushu",
    "Ogham",
    "Oriya",
    "Osage",
    "Osmanya",
    "Palmyrene",
    "Phoenician",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "Sinhala",
    "Sogdian",
    "Soyombo",
    "Sundanese",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Yezidi",
    "Linear_B",
    "Ol_Chiki",
    "Tai_Le",
];

/// Atoms: one operand each, valid or not in Go.
const ATOMS: &[&str] = &[
    "a",
    "/",
    "-",
    "_",
    "x",
    "é",
    "😀",
    ".",
    "^",
    "$",
    "\\.",
    "\\/",
    "\\-",
    "\\_",
    "\\<",
    "\\>",
    "\\d",
    "\\D",
    "\\s",
    "\\S",
    "\\w",
    "\\W",
    "\\b",
    "\\B",
    "\\A",
    "\\z",
    "\\Z",
    "\\C",
    "\\e",
    "\\pL",
    "\\PL",
    "\\pN",
    "\\pX",
    "\\p",
    "\\pé",
    "\\p{Greek}",
    "\\P{^Lu}",
    "\\p{Letter}",
    "\\x41",
    "\\x4",
    "\\xZZ",
    "\\x{1F600}",
    "\\x{10FFFF}",
    "\\x{110000}",
    "\\x{}",
    "\\x{12",
    "\\0",
    "\\01",
    "\\012",
    "\\0123",
    "\\1",
    "\\12",
    "\\18",
    "\\7",
    "\\8",
    "\\9",
    "\\a",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\v",
    "\\Q.*\\E",
    "\\Q\\E",
    "\\Qab",
    "\\k<n>",
    "\\g1",
    "\\R",
    "\\h",
    "\\K",
    "\\X",
    "\\N",
    "\\G",
    "\\é",
    "[a-z]",
    "[^/]",
    "[]a]",
    "[^]a]",
    "[]",
    "[^]",
    "[a",
    "[a-]",
    "[-a]",
    "[z-a]",
    "[a-\\d]",
    "[\\d-z]",
    "[a-b-c]",
    "[[:alpha:]]",
    "[[:^digit:]]",
    "[[:word:]]",
    "[[:foo:]]",
    "[[:alpha:]",
    "[[:a]b:]]",
    "[[:]]",
    "[\\b]",
    "[\\Q]",
    "[\\pL]",
    "[\\p{Foo}]",
    "[\\x{41}-\\x{5A}]",
    "[\\x5A-\\x41]",
    "[\\n-\\r]",
    "[é-à]",
    "[à-é]",
    "[\\-]",
    "[\\]]",
    "[\\[]",
    "[&&]",
    "[a&&b]",
    "[[a]]",
    "[a-z&&[^x]]",
    "{",
    "}",
    "{}",
    "{,}",
    "{a}",
    "\\{",
    "\\}",
    "\\",
    "()",
    "(?:)",
    "(",
    ")",
    "|",
    "*",
    "+",
    "?",
];

const QUANTIFIERS: &[&str] = &[
    "*",
    "+",
    "?",
    "*?",
    "+?",
    "??",
    "**",
    "*+",
    "++",
    "?*",
    "{2}",
    "{0}",
    "{1}",
    "{0,}",
    "{1,}",
    "{2,}",
    "{0,1}",
    "{1000}",
    "{1001}",
    "{999}",
    "{1000,}",
    "{1001,}",
    "{0,1000}",
    "{0,1001}",
    "{999,1000}",
    "{1000,999}",
    "{5,4}",
    "{01}",
    "{0,01}",
    "{,5}",
    "{ 5}",
    "{5 }",
    "{5,,}",
    "{99999999999}",
    "{1,99999999999}",
    "{2}{3}",
    "{2}*",
    "*{2}",
    "{2}?",
    "{2}??",
];

const GROUP_OPENERS: &[&str] = &[
    "(",
    "(?:",
    "(?i:",
    "(?s:",
    "(?m:",
    "(?U:",
    "(?i-s:",
    "(?-i:",
    "(?P<n>",
    "(?<n>",
    "(?P<name_1>",
    "(?<1>",
    "(?<a-b>",
    "(?<>",
    "(?P<>",
    "(?P<é>",
    "(?'n'",
    "(?=",
    "(?!",
    "(?<=",
    "(?<!",
    "(?>",
    "(?x:",
    "(?u:",
    "(?R",
    "(?#",
    "(?--i:",
    "(?i-:",
    "(?:-",
    "(?P=n",
    "(?|",
];

const FLAGS: &[&str] = &[
    "(?i)", "(?m)", "(?s)", "(?U)", "(?ims)", "(?-i)", "(?i-s)", "(?)", "(?x)", "(?u)", "(?i-)",
    "(?-)", "(?ii)", "(?i-i)", "(?^)", "(?a)", "(?n)",
];

/// Nesting around repetition limits: chains whose product is just under, at or over 1000.
fn nested_repeats() -> Vec<String> {
    let mut out = Vec::new();
    for (a, b, c) in [
        (10, 10, 10),
        (10, 10, 11),
        (2, 500, 1),
        (2, 501, 1),
        (3, 3, 111),
        (3, 3, 112),
        (7, 7, 20),
        (7, 8, 18),
        (1000, 1, 1),
        (1, 1000, 1),
        (1000, 0, 1000),
        (0, 1000, 1000),
        (999, 1, 2),
        (31, 32, 1),
        (32, 32, 1),
        (6, 166, 1),
        (6, 167, 1),
        (4, 250, 1),
        (4, 251, 1),
        (1000, 1000, 1),
    ] {
        out.push(format!("(?:(?:a{{{a}}}){{{b}}}){{{c}}}"));
        out.push(format!("((a{{{a}}}){{{b}}}){{{c}}}"));
        out.push(format!("(?:(?:a{{{a},}}){{{b}}}){{0,{c}}}"));
        out.push(format!("/(?:x*(?:\\pL{{{a}}})+){{{b}}}y{{{c}}}"));
        out.push(format!("(?:a{{{a}}}|b{{{b}}}){{{c}}}"));
        out.push(format!("a{{{a}}}(?i){{{b}}}"));
    }
    out.push("(a{1000}){1000}".to_owned());
    out.push("\\p{L}{1000}{1000}".to_owned());
    out.push("(\\p{L}{1000}){1000}".to_owned());
    out.push("(a{0}){1000}".to_owned());
    for depth in [1, 5, 50, 100, 200, 300, 400, 500] {
        out.push(format!("{}a{}", "(".repeat(depth), ")".repeat(depth)));
        out.push(format!(
            "{}a{}",
            "(?:".repeat(depth / 2),
            ")*".repeat(depth / 2)
        ));
    }
    out.push(format!("{}a{}", "(".repeat(300), ")".repeat(299)));
    out.push(format!("{}a{}", "(".repeat(299), ")".repeat(300)));
    out
}

/// xorshift64*: a fixed seed keeps the corpus the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A random expression of bounded depth built from the tables above.
fn expression(rng: &mut Rng, depth: usize) -> String {
    let mut out = String::new();
    for _ in 0..1 + rng.below(4) {
        let piece = match rng.below(if depth == 0 { 6 } else { 9 }) {
            0..=2 => rng.pick(ATOMS).to_owned(),
            3 => format!("\\p{{{}}}", rng.pick(NAMES)),
            4 => rng.pick(FLAGS).to_owned(),
            5 => format!("{}{}", rng.pick(ATOMS), rng.pick(QUANTIFIERS)),
            6 | 7 => {
                let inner = expression(rng, depth - 1);
                let close = if rng.below(12) == 0 { "" } else { ")" };
                format!("{}{inner}{close}", rng.pick(GROUP_OPENERS))
            }
            _ => format!(
                "{}|{}",
                expression(rng, depth - 1),
                expression(rng, depth - 1)
            ),
        };
        out.push_str(&piece);
        if rng.below(3) == 0 {
            out.push_str(rng.pick(QUANTIFIERS));
        }
    }
    out
}

/// The whole corpus: fixed edge cases first, then random compositions, no duplicates. Patterns
/// longer than cftunnel's 1,024-byte cap are left out: there cftunnel refuses by length,
/// whatever Go would say.
pub fn corpus() -> Vec<String> {
    let mut patterns: Vec<String> = Vec::new();
    for name in NAMES.iter().chain(SCRIPTS_MORE) {
        patterns.push(format!("\\p{{{name}}}"));
        patterns.push(format!("/[\\P{{{name}}}x]+"));
    }
    for single in ["L", "M", "N", "P", "S", "Z", "C", "X", "l", "{", "^"] {
        patterns.push(format!("\\p{single}"));
        patterns.push(format!("\\P{single}"));
    }
    patterns.extend(ATOMS.iter().map(|a| format!("^/{a}")));
    patterns.extend(QUANTIFIERS.iter().map(|q| format!("^/a{q}")));
    patterns.extend(QUANTIFIERS.iter().map(|q| format!("{q}a")));
    patterns.extend(GROUP_OPENERS.iter().map(|g| format!("{g}a)")));
    patterns.extend(FLAGS.iter().map(|f| format!("{f}a")));
    patterns.extend(FLAGS.iter().map(|f| format!("{f}*")));
    patterns.extend(nested_repeats());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    while patterns.len() < 2600 {
        let pattern = expression(&mut rng, 3);
        if pattern.len() <= 1024 {
            patterns.push(pattern);
        }
    }
    let mut seen = std::collections::HashSet::new();
    patterns.retain(|p| p.len() <= 1024 && seen.insert(p.clone()));
    patterns
}
