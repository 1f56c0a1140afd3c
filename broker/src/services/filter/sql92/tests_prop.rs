//! The compiled evaluator agrees with a naive reference on random selectors and property
//! sets. The reference works on the generated tree directly, with the documented 4.9
//! rules written out case by case (missing property → NULL, the constant's type decides
//! the parse, Kleene AND/OR short-circuiting left to right, errors never match).

use std::collections::HashMap;

use proptest::prelude::*;

use super::Sql92Filter;

const NAMES: [&str; 3] = ["a", "b", "TAGS"];
const VALUES: [&str; 10] = ["1", "5", "-3", "2.5", "abc", "x", "p", "true", "10", "0"];

#[derive(Debug, Clone, Copy)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone)]
enum R {
    Lit(Option<bool>),
    CmpInt(usize, Op, i32),
    CmpDouble(usize, Op, f64),
    EqStr(usize, String, bool),
    In(usize, Vec<String>, bool),
    Between(usize, i32, i32, bool),
    IsNull(usize, bool),
    Not(Box<R>),
    And(Box<R>, Box<R>),
    Or(Box<R>, Box<R>),
}

type Outcome = Result<Option<bool>, ()>;

fn cmp<T: PartialOrd>(op: Op, a: T, b: T) -> bool {
    match op {
        Op::Gt => a > b,
        Op::Ge => a >= b,
        Op::Lt => a < b,
        Op::Le => a <= b,
    }
}

fn reference(e: &R, props: &HashMap<String, String>) -> Outcome {
    let get = |i: &usize| props.get(NAMES[*i]);
    match e {
        R::Lit(v) => Ok(*v),
        R::CmpInt(p, op, k) => match get(p) {
            None => Ok(None),
            Some(v) => v
                .parse::<i32>()
                .map(|v| Some(cmp(*op, v, *k)))
                .map_err(|_| ()),
        },
        R::CmpDouble(p, op, k) => match get(p) {
            None => Ok(None),
            Some(v) => v
                .parse::<f64>()
                .map(|v| Some(cmp(*op, v, *k)))
                .map_err(|_| ()),
        },
        R::EqStr(p, s, neg) => Ok(get(p).map(|v| (v == s) ^ neg)),
        R::In(p, items, neg) => Ok(get(p).map(|v| items.contains(v) ^ neg)),
        R::Between(p, lo, hi, neg) => match get(p) {
            None => Ok(None),
            Some(v) => {
                let v: i32 = v.parse().map_err(|_| ())?;
                Ok(Some(if *neg {
                    v < *lo || v > *hi
                } else {
                    *lo <= v && v <= *hi
                }))
            }
        },
        R::IsNull(p, neg) => Ok(Some(get(p).is_none() ^ neg)),
        R::Not(inner) => Ok(reference(inner, props)?.map(|b| !b)),
        R::And(l, r) => {
            let l = reference(l, props)?;
            if l == Some(false) {
                return Ok(Some(false));
            }
            match (l, reference(r, props)?) {
                (_, Some(false)) => Ok(Some(false)),
                (Some(true), Some(true)) => Ok(Some(true)),
                _ => Ok(None),
            }
        }
        R::Or(l, r) => {
            let l = reference(l, props)?;
            if l == Some(true) {
                return Ok(Some(true));
            }
            match (l, reference(r, props)?) {
                (_, Some(true)) => Ok(Some(true)),
                (Some(false), Some(false)) => Ok(Some(false)),
                _ => Ok(None),
            }
        }
    }
}

/// Renders `e` as selector text, keywords in the case chosen by `upper`.
fn render(e: &R, upper: bool) -> String {
    let kw = |k: &str| {
        if upper {
            k.to_uppercase()
        } else {
            k.to_lowercase()
        }
    };
    let op = |o: &Op| match o {
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Lt => "<",
        Op::Le => "<=",
    };
    let not = |neg: &bool| {
        if *neg {
            format!("{} ", kw("not"))
        } else {
            String::new()
        }
    };
    match e {
        R::Lit(None) => kw("null"),
        R::Lit(Some(b)) => kw(if *b { "true" } else { "false" }),
        R::CmpInt(p, o, k) => format!("{} {} {k}", NAMES[*p], op(o)),
        R::CmpDouble(p, o, k) => format!("{}{}{k:?}", NAMES[*p], op(o)),
        R::EqStr(p, s, neg) => format!("{} {} '{s}'", NAMES[*p], if *neg { "<>" } else { "=" }),
        R::In(p, items, neg) => format!(
            "{} {}{} ({})",
            NAMES[*p],
            not(neg),
            kw("in"),
            items
                .iter()
                .map(|i| format!("'{i}'"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        R::Between(p, lo, hi, neg) => format!(
            "{} {}{} {lo} {} {hi}",
            NAMES[*p],
            not(neg),
            kw("between"),
            kw("and")
        ),
        R::IsNull(p, neg) => format!("{} {} {}{}", NAMES[*p], kw("is"), not(neg), kw("null")),
        R::Not(inner) => format!("{} ({})", kw("not"), render(inner, !upper)),
        R::And(l, r) => format!(
            "({}) {} ({})",
            render(l, upper),
            kw("and"),
            render(r, !upper)
        ),
        R::Or(l, r) => format!(
            "({}) {} ({})",
            render(l, !upper),
            kw("or"),
            render(r, upper)
        ),
    }
}

fn leaf() -> impl Strategy<Value = R> {
    let prop = 0..NAMES.len();
    let op = prop_oneof![Just(Op::Gt), Just(Op::Ge), Just(Op::Lt), Just(Op::Le)];
    let word = proptest::sample::select(VALUES.to_vec()).prop_map(str::to_owned);
    prop_oneof![
        proptest::option::of(any::<bool>()).prop_map(R::Lit),
        (prop.clone(), op.clone(), -10i32..12).prop_map(|(p, o, k)| R::CmpInt(p, o, k)),
        (
            prop.clone(),
            op,
            proptest::sample::select(vec![0.5, 2.5, 5.0, 10.25])
        )
            .prop_map(|(p, o, k)| R::CmpDouble(p, o, k)),
        (prop.clone(), word.clone(), any::<bool>()).prop_map(|(p, s, n)| R::EqStr(p, s, n)),
        (
            prop.clone(),
            proptest::collection::vec(word, 1..4),
            any::<bool>()
        )
            .prop_map(|(p, s, n)| R::In(p, s, n)),
        (prop.clone(), -5i32..6, 0i32..8, any::<bool>()).prop_map(|(p, lo, span, n)| R::Between(
            p,
            lo,
            lo + span,
            n
        )),
        (prop, any::<bool>()).prop_map(|(p, n)| R::IsNull(p, n)),
    ]
}

fn expr() -> impl Strategy<Value = R> {
    leaf().prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| R::Not(Box::new(e))),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| R::And(Box::new(l), Box::new(r))),
            (inner.clone(), inner).prop_map(|(l, r)| R::Or(Box::new(l), Box::new(r))),
        ]
    })
}

fn properties() -> impl Strategy<Value = HashMap<String, String>> {
    proptest::collection::vec(
        proptest::option::of(proptest::sample::select(VALUES.to_vec())),
        3,
    )
    .prop_map(|vals| {
        NAMES
            .iter()
            .zip(vals)
            .filter_map(|(n, v)| v.map(|v| ((*n).to_owned(), v.to_owned())))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn evaluator_agrees_with_the_reference(e in expr(), props in properties(), upper in any::<bool>()) {
        let text = render(&e, upper);
        let compiled = Sql92Filter::compile(&text)
            .map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        let got = compiled.evaluate(&props).map_err(|_| ());
        prop_assert_eq!(got, reference(&e, &props), "{}", text);
        // The pull path decodes the stored text straight into slots; noise around the
        // named properties must not change the result.
        let mut stored = String::from("UNIQ_KEY\u{1}u\u{2}KEYS\u{1}k");
        for (name, value) in &props {
            stored.push_str(&format!("\u{2}{name}\u{1}{value}"));
        }
        let from_text = compiled.evaluate_slots(&compiled.slots_from_text(&stored)).map_err(|_| ());
        prop_assert_eq!(from_text, got, "{} on {:?}", text, stored);
        let raw = compiled.slots_from_raw(stored.as_bytes()).expect("UTF-8 values");
        prop_assert_eq!(compiled.evaluate_slots(&raw).map_err(|_| ()), got, "raw {}", text);
    }
}
