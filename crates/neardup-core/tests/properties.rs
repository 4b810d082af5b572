//! Property tests over the core (issue 23, fuzzing): proptest draws the inputs, shrinks a
//! failure to a small case, and the case counts are fixed so that CI time is bounded
//! (`PROPTEST_CASES` raises them for a longer local run).
//!
//! - fingerprints, page text and normalisation: no panic on any string, the same answer twice;
//! - the Hamming index: after any sequence of adds and removes, `query(fp, k)` is exactly the
//!   brute-force set of live items within `k` bits and `near_pairs` every such pair once;
//! - a page whose visible text is not empty never has an empty main text;
//! - the decision engine: every dropped row's representative is kept, earlier in the order and
//!   passes the exact Jaccard verifier with the similarity reported; an empty row is kept; a
//!   text identical to an earlier one is never kept.

use std::collections::{BTreeMap, BTreeSet};

use neardup_core::batch_dedup::sketch;
use neardup_core::fingerprint::Fingerprinter;
use neardup_core::hamming::{hamming, hamming_many};
use neardup_core::html::{fell_back_many, main_text, main_text_and_fallback, visible_text};
use neardup_core::index::{Id, IdRef, Index, Options};
use neardup_core::near::{Config, Engine};
use neardup_core::plain::normalise;
use neardup_core::verify::jaccard_sorted;
use proptest::prelude::*;

fn cases(n: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn hamming_is_the_popcount_of_the_xor(a in any::<u64>(), bs in prop::collection::vec(any::<u64>(), 0..40)) {
        let many = hamming_many(a, &bs);
        for (b, d) in bs.iter().zip(&many) {
            prop_assert_eq!(*d, (a ^ b).count_ones());
            prop_assert_eq!(hamming(a, *b), hamming(*b, a));
        }
    }

    #[test]
    fn any_text_fingerprints_and_prepares_without_panic(text in any::<String>(), markup in page()) {
        let f = Fingerprinter::preset("default").expect("the default preset");
        for t in [text.as_str(), markup.as_str()] {
            prop_assert_eq!(f.fingerprint_str(t), f.fingerprint_str(t));
            prop_assert_eq!(normalise(t), normalise(t));
            let shown = visible_text(t);
            let main = main_text(t, 0.5);
            prop_assert_eq!(&main, &main_text(t, 0.5));
            let (same, fell_back) = main_text_and_fallback(t, 0.5);
            prop_assert_eq!(&same, &main);
            prop_assert_eq!(fell_back_many(&[t], 0.5), vec![fell_back]);
            if fell_back {
                prop_assert_eq!(&main, &shown);
            }
            // the fallback: a page with visible text never comes out empty
            if !shown.trim().is_empty() {
                prop_assert!(!main.trim().is_empty(), "{:?} -> {:?}", t, shown);
            }
        }
    }
}

/// Tag soup: elements that the extractor treats specially, links, text, broken markup.
fn page() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<nav>".to_string()),
        Just("</nav>".to_string()),
        Just("<footer>".to_string()),
        Just("<main>".to_string()),
        Just("<article>".to_string()),
        Just("<p>".to_string()),
        Just("</p>".to_string()),
        Just("<a href=x>".to_string()),
        Just("</a>".to_string()),
        Just("<script>".to_string()),
        Just("</script>".to_string()),
        Just("<li>".to_string()),
        Just("<div class=\"sidebar\">".to_string()),
        Just("</div>".to_string()),
        Just("<!--".to_string()),
        Just("&amp;&#x4e2d;&bogus;".to_string()),
        "[a-z ]{0,12}",
        "\\PC{0,6}",
    ];
    prop::collection::vec(piece, 0..30).prop_map(|p| format!("<html><body>{}", p.concat()))
}

#[derive(Clone, Debug)]
enum Op {
    Add(i64, u64),
    Remove(i64),
}

/// Fingerprints near a few bases (so that queries find items at small distances), and some
/// anywhere.
fn fingerprint() -> impl Strategy<Value = u64> {
    let bases = [0u64, u64::MAX, 0x0123_4567_89ab_cdef];
    prop_oneof![
        (0usize..3, prop::collection::vec(0u32..64, 0..8)).prop_map(move |(b, flips)| {
            flips.iter().fold(bases[b], |fp, bit| fp ^ (1u64 << bit))
        }),
        any::<u64>(),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0i64..24, fingerprint()).prop_map(|(id, fp)| Op::Add(id, fp)),
        1 => (0i64..24).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 0..60)
}

fn id_of(id: &Id) -> i64 {
    match id {
        Id::Int(i) => *i,
        Id::Str(s) => panic!("an int index answered the str id {s:?}"),
    }
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn index_query_and_pairs_are_the_brute_force(
        index_k in 0u32..=16,
        ops in ops(),
        queries in prop::collection::vec((fingerprint(), 0u32..=64), 1..6),
    ) {
        let mut index = Index::new(Options { k: index_k, ..Options::default() }).expect("index");
        let mut live: BTreeMap<i64, u64> = BTreeMap::new();
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Add(id, fp) => {
                    index.add(IdRef::Int(id), fp, n as f64).expect("add");
                    live.insert(id, fp);
                }
                Op::Remove(id) => {
                    let removed = index.remove(IdRef::Int(id));
                    prop_assert_eq!(removed.is_ok(), live.remove(&id).is_some());
                }
            }
        }
        prop_assert_eq!(index.len(), live.len());
        for &(fp, k) in &queries {
            let found = index.query(fp, Some(k)).expect("query");
            let got: BTreeSet<(i64, u32)> = found.iter().map(|(id, d)| (id_of(id), *d)).collect();
            prop_assert_eq!(got.len(), found.len(), "an item answered twice");
            let want: BTreeSet<(i64, u32)> = live
                .iter()
                .map(|(&id, &other)| (id, hamming(fp, other)))
                .filter(|&(_, d)| d <= k)
                .collect();
            prop_assert_eq!(&got, &want);
            let distances: Vec<u32> = found.iter().map(|&(_, d)| d).collect();
            prop_assert!(distances.windows(2).all(|w| w[0] <= w[1]), "not nearest first");
        }
        let k = queries[0].1.min(24);
        let pairs = index.near_pairs_locs(Some(k)).expect("pairs");
        let got: BTreeSet<(i64, i64, u32)> = pairs
            .iter()
            .map(|&(a, b, d)| {
                let (a, b) = (id_of(&index.id_at(a).to_owned()), id_of(&index.id_at(b).to_owned()));
                (a.min(b), a.max(b), d)
            })
            .collect();
        prop_assert_eq!(got.len(), pairs.len(), "a pair answered twice");
        let items: Vec<(i64, u64)> = live.into_iter().collect();
        let mut want = BTreeSet::new();
        for (i, &(a, fa)) in items.iter().enumerate() {
            for &(b, fb) in &items[i + 1..] {
                let d = hamming(fa, fb);
                if d <= k {
                    want.insert((a.min(b), a.max(b), d));
                }
            }
        }
        prop_assert_eq!(got, want);
    }
}

fn config() -> Config {
    Config {
        bands: 20,
        rows: 5,
        shingle: 5,
        threshold: 0.8,
        verify: true,
        k_short: 6,
        k_long: 4,
        short_chars: 100,
        bucket_limit: 1 << 30,
        full_bucket_quorum: 2,
        verify_limit: 1 << 30,
        memory_budget: 1 << 30,
        spill_dir: std::env::temp_dir(),
    }
}

/// Texts of a few words, often repeated or slightly changed, some empty, some of any
/// characters.
fn texts() -> impl Strategy<Value = Vec<String>> {
    let words = prop::sample::select(vec![
        "alpha ", "bravo ", "charlie ", "delta ", "echo ", "码", "编号 ", "12 ", "ünï ",
    ]);
    let text = prop_oneof![
        6 => prop::collection::vec(words, 0..25).prop_map(|w| w.concat()),
        1 => "\\PC{0,30}",
        1 => Just(String::new()),
    ];
    prop::collection::vec(text, 1..40).prop_flat_map(|base| {
        let n = base.len();
        // copies of earlier texts, some with a character changed
        let copies = prop::collection::vec((0..n, any::<bool>(), any::<u8>()), 0..20);
        (Just(base), copies).prop_map(|(mut out, copies)| {
            for (of, change, c) in copies {
                let mut t = out[of].clone();
                if change && !t.is_empty() {
                    let mut cs: Vec<char> = t.chars().collect();
                    let at = usize::from(c) % cs.len();
                    cs[at] = char::from(b'a' + c % 26);
                    t = cs.into_iter().collect();
                }
                out.push(t);
            }
            out
        })
    })
}

proptest! {
    #![proptest_config(cases(96))]

    #[test]
    fn the_decision_keeps_its_promises(texts in texts(), step in 1usize..40) {
        let cfg = config();
        let norms: Vec<String> = texts.iter().map(|t| normalise(t)).collect();
        let fps: Vec<u64> = norms
            .iter()
            .map(|t| xxhash_rust::xxh3::xxh3_64(t.as_bytes()) & 0xFFFF)
            .collect();
        let mut engine = Engine::new(cfg.clone()).expect("engine");
        for (chunk, fchunk) in norms.chunks(step).zip(fps.chunks(step)) {
            engine.feed(chunk, fchunk).expect("feed");
        }
        let order: Vec<i64> = (0..norms.len() as i64).collect();
        engine.reset();
        for part in order.chunks(step) {
            engine.decide(part, false).expect("decide");
        }
        let out = engine.outcome();
        let sketches: Vec<Vec<u32>> = norms
            .iter()
            .map(|t| sketch(t, cfg.shingle).expect("sketch"))
            .collect();
        for row in 0..norms.len() {
            let rep = out.representative[row] as usize;
            if norms[row].is_empty() {
                prop_assert!(out.empty[row] && rep == row, "an empty row was dropped");
                continue;
            }
            if rep == row {
                // a text identical to an earlier kept one is always found (Jaccard 1 shares
                // every band)
                let earlier = (0..row).find(|&e| out.representative[e] as usize == e && norms[e] == norms[row]);
                prop_assert!(earlier.is_none(), "row {} kept beside its copy {:?}", row, earlier);
                continue;
            }
            prop_assert!(rep < row, "representative {} after {}", rep, row);
            prop_assert_eq!(out.representative[rep] as usize, rep, "representative not kept");
            let j = jaccard_sorted(&sketches[row], &sketches[rep]);
            prop_assert!(j >= cfg.threshold - 1e-12, "{} below the threshold", j);
            prop_assert!((j - out.similarity[row]).abs() < 1e-9);
            prop_assert_eq!(out.distance[row], hamming(fps[row], fps[rep]));
        }
    }
}
