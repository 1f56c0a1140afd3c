//! The budget: client-sized selectors are refused with the limit's key before any
//! recursion can outgrow a stack, and what fits is evaluated, cloned and dropped on a
//! small one.

use super::*;

fn refused_by(expr: &str, limits: &Sql92Limits) -> Budget {
    match Sql92Filter::compile_within(expr, limits) {
        Ok(_) => panic!("{} compiled", &expr[..expr.len().min(60)]),
        Err(e) => {
            let budget = e
                .budget
                .unwrap_or_else(|| panic!("refused without a budget: {e}"));
            assert!(e.message.contains(budget.key()), "{e}");
            budget
        }
    }
}

/// Runs `f` on a thread with `kib` KiB of stack, so an unbounded recursion shows as a
/// crash of the test, not a pass.
fn on_small_stack<T: Send + 'static>(kib: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(kib * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the work overflowed or panicked")
}

#[test]
fn the_reported_crashes_are_refused_by_depth() {
    let d = Sql92Limits::default();
    let parens = format!("{}a = 1{}", "(".repeat(1000), ")".repeat(1000));
    assert_eq!(refused_by(&parens, &d), Budget::Depth);
    let nots = format!("{}a = 1", "NOT ".repeat(100_000));
    assert_eq!(
        refused_by(
            &nots,
            &Sql92Limits {
                max_length: usize::MAX,
                ..d
            }
        ),
        Budget::Depth
    );
    let minus = format!("{}a > 1", "- ".repeat(10_000));
    assert_eq!(
        refused_by(
            &minus,
            &Sql92Limits {
                max_length: usize::MAX,
                ..d
            }
        ),
        Budget::Depth
    );
    let plus = format!("{}a > 1", "+ ".repeat(10_000));
    assert_eq!(
        refused_by(
            &plus,
            &Sql92Limits {
                max_length: usize::MAX,
                ..d
            }
        ),
        Budget::Depth
    );
    // `=` and IS NULL chain left-deep, as in 4.9: each link is a level.
    let eqs = format!("a = 1{}", " = TRUE".repeat(10_000));
    assert_eq!(
        refused_by(
            &eqs,
            &Sql92Limits {
                max_length: usize::MAX,
                ..d
            }
        ),
        Budget::Depth
    );
    let is_null = format!("a{}", " IS NULL".repeat(10_000));
    assert_eq!(
        refused_by(
            &is_null,
            &Sql92Limits {
                max_length: usize::MAX,
                ..d
            }
        ),
        Budget::Depth
    );
}

#[test]
fn long_chains_cost_nodes_not_depth() {
    let unlimited = Sql92Limits {
        max_length: usize::MAX,
        max_depth: 64,
        max_nodes: u32::MAX,
    };
    // 100,000 ANDs: a flat node, so parse, evaluate, clone and drop stay on a 256 KiB
    // stack even in a debug build.
    let chain = vec!["a = 1"; 100_000].join(" AND ");
    let matched = on_small_stack(256, move || {
        let f = Sql92Filter::compile_within(&chain, &unlimited).expect("compiles");
        let copy = f.clone();
        let r = copy.matches_text("a\u{1}1") && !copy.matches_text("a\u{1}2");
        drop(copy);
        drop(f);
        r
    });
    assert!(matched);
    // Under the default budget the same chain is refused by its node count.
    let chain = vec!["a = 1"; 100_000].join(" AND ");
    let big = Sql92Limits {
        max_length: usize::MAX,
        ..Sql92Limits::default()
    };
    assert_eq!(refused_by(&chain, &big), Budget::Nodes);
    let or_chain = vec!["a = 1"; 2_000].join(" OR ");
    assert_eq!(refused_by(&or_chain, &big), Budget::Nodes);
    let items = vec!["'x'"; 5_000].join(",");
    assert_eq!(refused_by(&format!("a IN ({items})"), &big), Budget::Nodes);
    // BETWEEN copies its left side: both copies are charged.
    let tight = Sql92Limits {
        max_nodes: 8,
        ..Sql92Limits::default()
    };
    assert!(Sql92Filter::compile_within("a BETWEEN 1 AND 2", &tight).is_ok());
    assert_eq!(
        refused_by("-(-(-a)) BETWEEN 1 AND 2", &tight),
        Budget::Nodes
    );
}

#[test]
fn length_is_checked_before_lexing() {
    let limits = Sql92Limits {
        max_length: 10,
        ..Sql92Limits::default()
    };
    assert!(Sql92Filter::compile_within("a = 'xyz'", &limits).is_ok());
    assert_eq!(refused_by("a = 'xyzzy'", &limits), Budget::Length);
    // Not even a lexer error is reported for an over-long text.
    assert_eq!(refused_by("'unterminated string", &limits), Budget::Length);
}

#[test]
fn the_depth_limit_is_exact() {
    let limits = Sql92Limits {
        max_depth: 8,
        ..Sql92Limits::default()
    };
    // NOT^k (a = 1): k NOTs over Eq over two leaves is k + 2 levels.
    let nots = |k: usize| format!("{}(a = 1)", "NOT ".repeat(k));
    assert!(Sql92Filter::compile_within(&nots(6), &limits).is_ok());
    assert_eq!(refused_by(&nots(7), &limits), Budget::Depth);
    // Parentheses alone build no level, but the parser's recursion is bounded too.
    let parens = |k: usize| format!("{}a = 1{}", "(".repeat(k), ")".repeat(k));
    assert!(Sql92Filter::compile_within(&parens(8), &limits).is_ok());
    assert_eq!(refused_by(&parens(9), &limits), Budget::Depth);
    // The position points at the level that did not fit.
    let e = Sql92Filter::compile_within(&parens(9), &limits).unwrap_err();
    assert_eq!((e.line, e.column), (1, 9), "{e}");
}

#[test]
fn the_deepest_configurable_selector_is_safe_on_a_small_stack() {
    let ceiling = Sql92Limits::new(usize::MAX, u32::MAX, u32::MAX);
    assert_eq!(ceiling.max_depth, Sql92Limits::DEPTH_CEILING);
    let depth = Sql92Limits::DEPTH_CEILING as usize;
    // The deepest each way: parentheses (parser recursion) and NOT (tree levels).
    let parens = format!("{}a = 1{}", "(".repeat(depth), ")".repeat(depth));
    let nots = format!("{}(a = 1)", "NOT ".repeat(depth - 2));
    // Release builds (what ships) use about 4 KiB of stack per level, so the ceiling
    // needs a quarter of this; unoptimised test builds use about 30 KiB per level.
    let kib = if cfg!(debug_assertions) { 4096 } else { 512 };
    for expr in [parens, nots] {
        let ok = on_small_stack(kib, move || {
            let f = Sql92Filter::compile_within(&expr, &ceiling).unwrap_or_else(|e| panic!("{e}"));
            let g = f.clone();
            let _ = g.matches_text("a\u{1}1");
            f == g
        });
        assert!(ok);
    }
}

#[test]
fn flat_chains_evaluate_as_4_9_left_deep_ones() {
    // NULL operands, a decisive operand after them, and an error past the decisive one
    // (not reached) or before it (reached).
    let cases: &[(&str, Option<Option<bool>>)] = &[
        ("x = 1 AND a = 1 AND b = 1", Some(None)),
        ("x = 1 AND a = 2 AND b = 1", Some(Some(false))),
        ("a = 2 AND s > 1 AND b = 1", Some(Some(false))),
        ("a = 1 AND s > 1 AND b = 2", None),
        ("x = 1 OR a = 1 OR s > 1", Some(Some(true))),
        ("x = 1 OR a = 2 OR b = 2", Some(None)),
        ("a = 2 OR b = 2", Some(Some(false))),
        ("a = 2 OR s > 1 OR a = 1", None),
        ("a = 1 AND b = 1 AND a = 1", Some(Some(true))),
    ];
    let props: std::collections::HashMap<String, String> = [("a", "1"), ("b", "1"), ("s", "abc")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (expr, want) in cases {
        let got = Sql92Filter::compile(expr).unwrap().evaluate(&props).ok();
        assert_eq!(got, *want, "{expr}");
    }
}
