//! SQL92 selector evaluation against decoded properties(target: at least
//! 5 M evaluations/s on one core for `a > 5 AND b = 'x' OR c IN ('p','q')`):
//! `evaluate_decoded` on a general decoded property set (names looked up per message),
//! `evaluate_slots` on the selector's pre-decoded slots (what the pull path evaluates),
//! `decode_and_evaluate` from the stored text (the pull path's whole cost).
//!
//! ```sh
//! cargo bench -p rmq-broker --bench sql92_eval
//! ```

use broker::services::filter::sql92::{DecodedProperties, Sql92Filter};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

const SELECTOR: &str = "a > 5 AND b = 'x' OR c IN ('p','q')";

/// Properties as a producer leaves them: system ones plus the user's.
fn stored(a: &str, b: &str, c: &str) -> String {
    format!(
        "UNIQ_KEY\u{1}7F0000010F2A18B4AAC2620D3B9C0000\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}order-42\u{2}\
         a\u{1}{a}\u{2}b\u{1}{b}\u{2}c\u{1}{c}\u{2}WAIT\u{1}true\u{2}CLUSTER\u{1}DefaultCluster"
    )
}

fn eval(c: &mut Criterion) {
    let filter = Sql92Filter::compile(SELECTOR).expect("selector compiles");
    let texts = [
        stored("7", "x", "z"), // TRUE by the AND branch
        stored("3", "x", "q"), // TRUE by IN
        stored("3", "y", "z"), // FALSE
        stored("9", "y", "p"), // TRUE by IN after a FALSE AND
    ];
    let decoded: Vec<DecodedProperties<'_>> =
        texts.iter().map(|t| DecodedProperties::parse(t)).collect();
    let mut g = c.benchmark_group("sql92");
    g.throughput(Throughput::Elements(decoded.len() as u64));
    g.bench_function("evaluate_decoded", |bench| {
        bench.iter(|| {
            let mut hits = 0;
            for p in &decoded {
                hits += usize::from(filter.matches(black_box(p)));
            }
            hits
        })
    });
    // The pull path's form of "decoded": the selector's own slots, filled once per
    // message by one pass over the stored text.
    let slots: Vec<_> = texts.iter().map(|t| filter.slots_from_text(t)).collect();
    g.bench_function("evaluate_slots", |bench| {
        bench.iter(|| {
            let mut hits = 0;
            for s in &slots {
                hits += usize::from(filter.matches_slots(black_box(s)));
            }
            hits
        })
    });
    g.bench_function("decode_and_evaluate", |bench| {
        bench.iter(|| {
            let mut hits = 0;
            for t in &texts {
                hits += usize::from(filter.matches_text(black_box(t)));
            }
            hits
        })
    });
    g.bench_function("compile", |bench| {
        bench.iter(|| Sql92Filter::compile(black_box(SELECTOR)).map(|_| ()))
    });
    g.finish();
}

criterion_group!(benches, eval);
criterion_main!(benches);
