//! Parser and evaluator cases. The tables follow the semantics that 4.9's own filter tests
//! (`ExpressionTest`, `ParserTest`, `SqlFilterIT`) pin down, with our own expressions.

use super::*;

/// `T`/`F`/`N` (NULL), `E` (evaluation error, not matched).
#[derive(Debug, PartialEq, Clone, Copy)]
enum R {
    T,
    F,
    N,
    E,
}

fn props(spec: &str) -> DecodedProperties<'_> {
    DecodedProperties::from_pairs(
        spec.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect(),
    )
}

fn run(expr: &str, spec: &str) -> R {
    let f = Sql92Filter::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    match f.evaluate(&props(spec)) {
        Ok(Some(true)) => R::T,
        Ok(Some(false)) => R::F,
        Ok(None) => R::N,
        Err(_) => R::E,
    }
}

#[test]
fn evaluation_table() {
    use R::*;
    let cases: &[(&str, &str, R)] = &[
        // Logic chains with mixed keyword case.
        ("x=7 aNd y<>8 AND z>9 and w<=1", "x=7 y=1 z=10 w=0", T),
        ("x=7 aNd y<>8 AND z>9 and w<=1", "x=6 y=1 z=10 w=0", F),
        ("x=7 or y<>8 oR z>9 OR w<=1", "x=7", T),
        ("x=7 or y<>8 oR z>9 OR w<=1", "x=1 y=2", T),
        ("x=7 or y<>8 oR z>9 OR w<=1", "x=1 y=8 z=3 w=1", T),
        ("x=7 or y<>8 oR z>9 OR w<=1", "x=1 y=8 z=3 w=2", F),
        // IN / NOT IN: exact, case-sensitive strings.
        ("k in ('p', 'q', 'r')", "k=q", T),
        ("k in ('p', 'q', 'r')", "k=Q", F),
        ("k in ('1')", "k=01", F),
        ("k not in ('p', 'q', 'r')", "k=s", T),
        ("k not in ('p', 'q', 'r')", "k=p", F),
        ("k in ('p')", "", N),
        ("k not in ('p')", "", N),
        // BETWEEN is inclusive at both ends.
        ("n between 5 and 7", "n=5", T),
        ("n between 5 and 7", "n=7", T),
        ("n between 5 and 7", "n=8", F),
        ("n not between 5 and 7", "n=4", T),
        ("n not between 5 and 7", "n=6", F),
        ("n between 5 and 7", "n=6.5", E),
        ("n between 5.0 and 7.0", "n=6.5", T),
        // The upper bound is an Integer, so "6.5" fails Integer.valueOf there.
        ("n between 5.0 and 7", "n=6.5", E),
        ("n between 1 and 3 and m='1'", "n=2 m=1", T),
        // IS [NOT] NULL.
        ("p is null", "q=1", T),
        ("p is null", "p=1", F),
        ("p IS NOT NULL", "p=1", T),
        ("p is not null", "q=1", F),
        ("p is not null and p='hi'", "p=hi", T),
        ("p is not null and p='hi'", "", F),
        ("p is null or p='hi'", "", T),
        ("p is null or p='hi'", "p=ho", F),
        // Booleans and strings.
        ("f=TRUE or g=false", "f=TRUE g=true", T),
        ("f=TRUE or g=false", "f=no g=true", F),
        ("TAGS is not null and TAGS='''x'''", "TAGS='x'", T),
        // Numbers: the constant's type decides the parse.
        ("v > 3.1E10", "v=3.2e10", T),
        ("v > 2.5", "v=2.51", T),
        ("v > 5", "v=5.5", E),
        ("v > 5", "v=3000000000", E),
        ("v > 5L", "v=3000000000", E),
        ("v > 3000000000", "v=3000000001", T),
        ("v > 5.0", "v=5.5", T),
        ("v = 5", "v=abc", E),
        ("v = '5'", "v=5", T),
        ("v <> '5'", "v=5.0", T),
        ("v > -1", "v=0", T),
        ("-v > 1", "v=5", N),
        // Two properties compare as doubles.
        ("s > t", "s=3 t=20", F),
        ("s > t", "s=20 t=3", T),
        ("s = t", "s=1.5 t=1.5", T),
        ("s <> t", "s=1.5 t=1.50", T),
        ("s > t", "s=x t=1", E),
        ("v between lo and hi", "v=2", N),
        ("v between lo and hi", "v=2 lo=x hi=y", E),
        // NULL asymmetry of '='.
        ("v = 'x'", "", N),
        ("'x' = v", "", F),
        ("'x' <> v", "", T),
        // Order decides whether an error is reached.
        ("v='x' OR w>1", "v=x w=x", T),
        ("w>1 OR v='x'", "v=x w=x", E),
        ("v = 1 AND w = 2", "v=1", N),
        ("v = 1 AND w = 2", "v=2", F),
        ("v > 5 OR TRUE", "", T),
        ("FALSE OR NULL", "", N),
        ("TRUE", "", T),
        ("NULL", "", N),
        // Bare property: boolean cast.
        ("v", "v=true", F),
        ("v", "", N),
        ("NOT v", "v=1", T),
        ("NOT (v > 5)", "v=3", T),
        ("NOT v = 1", "v=1", F),
        ("TRUE = v", "v=true", E),
        ("v = TRUE", "v=TrUe", T),
        ("1 = TRUE", "", F),
        // Comments and case-insensitive keywords.
        ("v /* c */ = 'a' -- end", "v=a", T),
        ("v Is NuLl", "", T),
        ("v = 1 = TRUE", "v=1", T),
    ];
    for (expr, spec, want) in cases {
        assert_eq!(run(expr, spec), *want, "{expr} with {spec:?}");
    }
}

#[test]
fn properties_are_looked_up_by_exact_name() {
    assert_eq!(run("A = '1'", "a=1"), R::N);
    assert_eq!(run("a = '1'", "a=1"), R::T);
    // A repeated name reads as its last value.
    assert_eq!(run("a = '2'", "a=1 a=2"), R::T);
}

#[test]
fn compile_errors() {
    let bad = [
        "",
        "   ",
        "a and between 2 and 10",
        "a > 100000000000000000000000",
        "a > 9223372036854775808",
        "a > -9223372036854775808",
        "a between 10 and 0",
        "a between 1 and 'x'",
        "a between 10,20",
        "a = NULL",
        "NULL = a",
        "TRUE = 1",
        "a > 'x'",
        "a > TRUE",
        "a > 1 > 0",
        "NOT a > 5",
        "a in (1, 2)",
        "a in ()",
        "'x' in ('x')",
        "1",
        "'abc'",
        "-a",
        "a = 0.0",
        "a = 1e-400",
        "a = 1e400",
        "in = '1'",
        "a == 1",
        "a != 1",
        "a = \"x\"",
        "a = 'x",
        "a like 'x%'",
        "a = 1 b = 2",
        "a = 1 )",
        "a = 1 #",
        "a.b = 1",
        "(a = 1",
        "a is 1",
        "a not like 'x'",
    ];
    for expr in bad {
        assert!(Sql92Filter::compile(expr).is_err(), "{expr:?} compiled");
    }
    let good = [
        "a <= now",
        "a = 9223372036854775807",
        "a = 1l",
        "a > .5e1",
        "a > 2.",
        "-5 < a",
        "a = -1.5",
        "NOT (a > 5)",
        "1 = TRUE",
        "$x_1 = 'y'",
        "a between -5 and 5",
        "(TAGS is not null and TAGS in ('TagA', 'TagB'))",
        "a = 'it''s' AND b = '\\n'",
    ];
    for expr in good {
        if let Err(e) = Sql92Filter::compile(expr) {
            panic!("{expr:?}: {e}");
        }
    }
}

#[test]
fn errors_carry_the_position() {
    let e = Sql92Filter::compile("a = 1 AND\n  b ! 2").unwrap_err();
    assert_eq!((e.line, e.column), (2, 5), "{e}");
    let e = Sql92Filter::compile("a between 10 and 0").unwrap_err();
    assert_eq!((e.line, e.column), (1, 3), "{e}");
    assert!(e.to_string().ends_with("at line 1, column 3"), "{e}");
    let e = Sql92Filter::compile("a = 1 b").unwrap_err();
    assert_eq!((e.line, e.column), (1, 7));
}

#[test]
fn decoded_properties_from_the_stored_text() {
    let text = "a\u{1}6\u{2}b\u{1}x\u{2}TAGS\u{1}T1";
    let p = DecodedProperties::parse(text);
    let f = Sql92Filter::compile("a > 5 AND b = 'x' AND TAGS = 'T1'").unwrap();
    assert!(f.matches(&p));
}

#[test]
fn slots_hold_only_named_properties_and_the_last_repeated_value() {
    let f = Sql92Filter::compile("a > 5 AND (b = 'x' OR a < 0)").unwrap();
    // `a` appears twice in the text; the last value counts, as in 4.9's HashMap decode.
    assert!(f.matches_text("a\u{1}1\u{2}z\u{1}q\u{2}b\u{1}x\u{2}a\u{1}6"));
    assert!(!f.matches_text("a\u{1}6\u{2}b\u{1}x\u{2}a\u{1}1"));
    assert!(!f.matches_text("b\u{1}x"));
    assert!(!f.matches_text(""));
}

#[test]
fn selectors_naming_more_properties_than_fit_inline_spill() {
    let names: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
    let expr = names
        .iter()
        .map(|n| format!("{n} = '{n}'"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let f = Sql92Filter::compile(&expr).unwrap();
    let all: String = names
        .iter()
        .map(|n| format!("{n}\u{1}{n}"))
        .collect::<Vec<_>>()
        .join("\u{2}");
    assert!(f.matches_text(&all));
    assert!(f.matches(&DecodedProperties::parse(&all)));
    let missing_last = all.replace("p11\u{1}p11", "p11\u{1}no");
    assert!(!f.matches_text(&missing_last));
}

#[test]
fn raw_properties_decode_as_the_text_does() {
    let f = Sql92Filter::compile("a = 'v' AND ab IS NULL").unwrap();
    let cases: &[(&str, bool)] = &[
        ("a\u{1}v", true),                // first segment
        ("a\u{1}w\u{2}a\u{1}v", true),    // a later duplicate wins
        ("a\u{1}v\u{2}a\u{1}", true),     // ... unless its value is empty
        ("a\u{1}v\u{2}ab\u{1}x", false),  // `ab` is another name, not `a`
        ("ab\u{1}v", false),              // `a` is not a prefix match
        ("a\u{1}v\u{1}x", false),         // the value runs to U+0002: "v\u{1}x"
        ("\u{2}\u{2}a\u{1}v\u{2}", true), // empty segments
        ("x\u{1}a\u{1}v", false),         // `a` inside a value
    ];
    for (text, want) in cases {
        assert_eq!(f.matches_text(text), *want, "text path {text:?}");
        assert_eq!(f.matches_raw(text.as_bytes()), *want, "raw path {text:?}");
    }
    // A kept value that is not UTF-8 makes the record unmatched, never a panic.
    assert!(!f.matches_raw(b"a\x01\xff"));
}
