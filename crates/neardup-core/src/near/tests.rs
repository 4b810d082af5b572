use super::*;
use crate::batch_dedup::sketch;
use crate::verify::jaccard_sorted;

/// The next number of a linear congruential generator (31 bits), for the tests of `near`.
pub(super) fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Texts in families: a base sentence and copies with a few characters changed, plus
/// unrelated texts and empty ones.
fn corpus(n: usize, seed: u64) -> Vec<String> {
    let mut s = seed;
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    ];
    let mut bases: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for i in 0..n {
        let roll = lcg(&mut s) % 10;
        if i % 97 == 5 {
            out.push(String::new());
        } else if roll < 4 || bases.is_empty() {
            let len = 8 + lcg(&mut s) as usize % 30;
            let t: Vec<&str> = (0..len)
                .map(|_| words[lcg(&mut s) as usize % words.len()])
                .collect();
            let t = t.join(" ");
            bases.push(t.clone());
            out.push(t);
        } else {
            let base = &bases[lcg(&mut s) as usize % bases.len()];
            let mut cs: Vec<char> = base.chars().collect();
            for _ in 0..(lcg(&mut s) % 4) {
                let at = lcg(&mut s) as usize % cs.len();
                cs[at] = char::from(b'a' + (lcg(&mut s) % 26) as u8);
            }
            out.push(cs.into_iter().collect());
        }
    }
    out
}

fn fingerprint(text: &str) -> u64 {
    // any fixed function of the text serves the decision's tie-breaks and distances
    xxhash_rust::xxh3::xxh3_64(text.as_bytes()) & 0x0000_0000_00FF_FFFF
}

fn config(verify: bool) -> Config {
    Config {
        bands: 20,
        rows: 5,
        shingle: 5,
        threshold: 0.8,
        verify,
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

fn engine_over(texts: &[String], cfg: Config) -> Engine {
    let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
    let mut e = Engine::new(cfg).unwrap();
    for (chunk, fchunk) in texts.chunks(37).zip(fps.chunks(37)) {
        e.feed(chunk, fchunk).unwrap();
    }
    e
}

fn decide_all(e: &mut Engine, order: &[i64], all_pairs: bool) -> Outcome {
    e.reset();
    for part in order.chunks(50) {
        e.decide(part, all_pairs).unwrap();
    }
    e.outcome()
}

/// The greedy rule written plainly: every kept row that shares a band key (or lies within
/// the radius, without a verifier) is compared; the best passing one wins.
fn brute_force(texts: &[String], cfg: &Config, order: &[i64]) -> Vec<i64> {
    let bands = Bands::new(cfg.bands, cfg.rows).unwrap();
    let sketches: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| sketch(t, cfg.shingle).unwrap())
        .collect();
    let keys: Vec<Vec<u32>> = sketches
        .iter()
        .map(|s| {
            let mut k = vec![0; cfg.bands];
            bands.keys(s, &mut Vec::new(), &mut k);
            k
        })
        .collect();
    let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
    let mut rep: Vec<i64> = (0..texts.len() as i64).collect();
    let mut kept: Vec<usize> = Vec::new();
    for &r in order {
        let r = r as usize;
        if texts[r].is_empty() {
            continue;
        }
        let mut best: Option<(f64, u32, usize, usize)> = None;
        for (pos, &k) in kept.iter().enumerate() {
            let d = (fps[r] ^ fps[k]).count_ones();
            let sim = if cfg.verify {
                if !keys[r].iter().zip(&keys[k]).any(|(a, b)| a == b) {
                    continue;
                }
                let s = jaccard_sorted(&sketches[r], &sketches[k]);
                if s < cfg.threshold {
                    continue;
                }
                s
            } else {
                if d > cfg.radius(texts[r].chars().count()) {
                    continue;
                }
                1.0
            };
            let better = match best {
                None => true,
                Some((s, bd, bp, _)) => sim > s || (sim == s && (d, pos) < (bd, bp)),
            };
            if better {
                best = Some((sim, d, pos, k));
            }
        }
        match best {
            Some((_, _, _, k)) => rep[r] = k as i64,
            None => kept.push(r),
        }
    }
    rep
}

#[test]
fn min_hashes_agree_at_the_rate_of_the_jaccard_similarity() {
    let bands = Bands::new(50, 4).unwrap();
    let mut seed = 11;
    for (shared, own) in [(80u32, 20u32), (50, 50), (20, 80), (300, 30)] {
        let (mut agree, mut total) = (0usize, 0usize);
        for trial in 0..40u32 {
            let base: Vec<u32> = (0..shared).map(|_| lcg(&mut seed) as u32).collect();
            let mut a = base.clone();
            let mut b = base;
            a.extend((0..own).map(|_| lcg(&mut seed) as u32));
            b.extend((0..own).map(|_| lcg(&mut seed) as u32));
            a.sort_unstable();
            b.sort_unstable();
            // compare single min-hashes: bands of one row
            let one = Bands::new(50, 1).unwrap();
            let (mut ka, mut kb) = (vec![0; 50], vec![0; 50]);
            one.keys(&a, &mut Vec::new(), &mut ka);
            one.keys(&b, &mut Vec::new(), &mut kb);
            agree += ka.iter().zip(&kb).filter(|(x, y)| x == y).count();
            total += 50;
            let _ = (trial, &bands);
        }
        let j = f64::from(shared) / f64::from(shared + 2 * own);
        let rate = agree as f64 / total as f64;
        assert!((rate - j).abs() < 0.05, "J {j:.3}: agreement {rate:.3}");
    }
    let p = bands.collision_probability(0.8);
    assert!(p > 0.999 && bands.collision_probability(0.05) < 1e-3);
}

#[test]
fn bands_collide_at_the_rate_the_formula_gives() {
    // Pairs of sets at J = 0.6 share a band (of 20 x 5) with probability 0.55: the bands
    // must be independent for the rate to hold (correlated min-hashes give far fewer).
    let bands = Bands::new(20, 5).unwrap();
    let mut seed = 17;
    let trials = 400;
    let mut hits = 0;
    for _ in 0..trials {
        let base: Vec<u32> = (0..120).map(|_| lcg(&mut seed) as u32).collect();
        let mut a = base.clone();
        let mut b = base;
        a.extend((0..40).map(|_| lcg(&mut seed) as u32));
        b.extend((0..40).map(|_| lcg(&mut seed) as u32));
        a.sort_unstable();
        b.sort_unstable();
        let (mut ka, mut kb) = (vec![0; 20], vec![0; 20]);
        bands.keys(&a, &mut Vec::new(), &mut ka);
        bands.keys(&b, &mut Vec::new(), &mut kb);
        hits += usize::from(ka.iter().zip(&kb).any(|(x, y)| x == y));
    }
    let want = bands.collision_probability(0.6);
    let rate = hits as f64 / trials as f64;
    assert!(
        (rate - want).abs() < 0.08,
        "rate {rate:.3}, formula {want:.3}"
    );
}

#[test]
fn keys_depend_on_the_set_only() {
    let bands = Bands::new(20, 5).unwrap();
    let s = sketch("the same text, twice over", 5).unwrap();
    let (mut a, mut b) = (vec![0; 20], vec![0; 20]);
    bands.keys(&s, &mut Vec::new(), &mut a);
    bands.keys(&s, &mut vec![7; 100], &mut b);
    assert_eq!(a, b);
    assert!(Bands::new(0, 5).is_err() && Bands::new(5, 17).is_err());
}

#[test]
fn decision_is_the_greedy_rule_for_any_order_chunking_and_spill() {
    let texts = corpus(900, 3);
    for verify in [true, false] {
        let cfg = config(verify);
        let mut e = engine_over(&texts, cfg.clone());
        let forward: Vec<i64> = (0..texts.len() as i64).collect();
        let mut shuffled = forward.clone();
        let mut s = 5;
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, lcg(&mut s) as usize % (i + 1));
        }
        for order in [&forward, &shuffled] {
            let got = decide_all(&mut e, order, false);
            let want = brute_force(&texts, &cfg, order);
            assert_eq!(got.representative, want, "verify={verify}");
            assert!(got.stats.documents == texts.len() as u64);
            let dropped = want.iter().enumerate().filter(|(i, r)| **r != *i as i64);
            assert!(dropped.count() > 100, "the corpus has families");
        }
        // the same with sketches spilled to a file after a few kilobytes
        let spilled = engine_over(
            &texts,
            Config {
                memory_budget: 4096,
                ..cfg.clone()
            },
        );
        if verify {
            assert!(spilled.spilled_bytes() > 0);
        }
        let mut spilled = spilled;
        assert_eq!(
            decide_all(&mut spilled, &shuffled, false).representative,
            brute_force(&texts, &cfg, &shuffled)
        );
    }
}

#[test]
fn dropped_rows_point_at_kept_rows_that_pass_under_any_limits() {
    let texts = corpus(700, 9);
    for (bucket_limit, verify_limit) in [(1, 1), (2, 3), (8, 2)] {
        let cfg = Config {
            bucket_limit,
            verify_limit,
            ..config(true)
        };
        let mut e = engine_over(&texts, cfg);
        let order: Vec<i64> = (0..texts.len() as i64).collect();
        let a = decide_all(&mut e, &order, false);
        let b = decide_all(&mut e, &order, false);
        assert_eq!(a.representative, b.representative, "deterministic");
        for (row, &rep) in a.representative.iter().enumerate() {
            if rep != row as i64 {
                let r = rep as usize;
                assert_eq!(a.representative[r], rep, "a representative is kept");
                assert!(r < row);
                let j = jaccard_sorted(
                    &sketch(&texts[row], 5).unwrap(),
                    &sketch(&texts[r], 5).unwrap(),
                );
                assert!((j - a.similarity[row]).abs() < 1e-12 && j >= 0.8);
            }
        }
        assert!(a.stats.compared <= a.stats.documents * verify_limit as u64);
    }
}

#[test]
fn empty_texts_are_never_copies() {
    let texts: Vec<String> = ["", "", "   x", "", "abcdefgh", "abcdefgh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut e = engine_over(&texts, config(true));
    let out = decide_all(&mut e, &[0, 1, 2, 3, 4, 5], false);
    assert_eq!(out.representative, vec![0, 1, 2, 3, 4, 4]);
    assert_eq!(out.stats.empty, 3);
}

#[test]
fn all_pairs_lists_every_verified_pair_sharing_a_band() {
    let texts = corpus(400, 21);
    let cfg = config(true);
    let mut e = engine_over(&texts, cfg.clone());
    let order: Vec<i64> = (0..texts.len() as i64).collect();
    let out = decide_all(&mut e, &order, true);
    assert!(out
        .representative
        .iter()
        .enumerate()
        .all(|(i, &r)| r == i as i64));
    let mut got: Vec<(u32, u32)> = out.pairs.iter().map(|p| (p.0, p.1)).collect();
    got.sort_unstable();
    let bands = Bands::new(cfg.bands, cfg.rows).unwrap();
    let sk: Vec<Vec<u32>> = texts.iter().map(|t| sketch(t, 5).unwrap()).collect();
    let keys: Vec<Vec<u32>> = sk
        .iter()
        .map(|s| {
            let mut k = vec![0; cfg.bands];
            bands.keys(s, &mut Vec::new(), &mut k);
            k
        })
        .collect();
    let mut want = Vec::new();
    for j in 0..texts.len() {
        for i in 0..j {
            if sk[i].is_empty() || sk[j].is_empty() {
                continue;
            }
            let share = keys[i].iter().zip(&keys[j]).any(|(a, b)| a == b);
            if share && jaccard_sorted(&sk[i], &sk[j]) >= 0.8 {
                want.push((i as u32, j as u32));
            }
        }
    }
    want.sort_unstable();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

#[test]
fn bad_arguments_are_refused() {
    let mut e = Engine::new(config(true)).unwrap();
    assert!(e.feed(&["a"], &[1, 2]).is_err());
    e.feed(&["abc"], &[1]).unwrap();
    assert!(e.decide(&[1], false).is_err());
    e.decide(&[0], false).unwrap();
    assert!(e.decide(&[0], false).is_err(), "a row visited twice");
    e.feed(&["x"], &[1]).unwrap(); // (rows may come while a decision is under way)
    e.decide(&[1], false).unwrap();
    assert!(e.decide(&[2], true).is_err(), "all_pairs changed midway");
    assert!(e.check_and_add(&[5]).is_err() && e.forget(&[-1]).is_err());
    assert!(Engine::new(Config {
        verify_limit: 0,
        ..config(true)
    })
    .is_err());
}

/// Template messages: a fixed frame with numbers filled in (similar, rarely copies), so that
/// band buckets hold many kept rows.
fn templated(n: usize, seed: u64) -> Vec<String> {
    let mut s = seed;
    (0..n)
        .map(|i| match i % 3 {
            0 => format!(
                "your code is {} and it expires in {} minutes, do not share it",
                lcg(&mut s) % 1_000_000,
                lcg(&mut s) % 60
            ),
            1 => format!(
                "parcel {} is waiting at locker {} until {}",
                lcg(&mut s) % 100_000,
                lcg(&mut s) % 500,
                lcg(&mut s) % 31
            ),
            _ => format!(
                "debit of {} on card ending {}",
                lcg(&mut s) % 10_000,
                lcg(&mut s) % 10_000
            ),
        })
        .collect()
}

/// The decision with limits, written plainly: per band the newest `bucket_limit` kept rows
/// with the row's key, those estimated within 5 deviations (at J = max(t, 0.5)) of the
/// threshold ranked by the estimate,
/// distance and age, the first `verify_limit` verified.
fn brute_force_limited(texts: &[String], cfg: &Config) -> Vec<i64> {
    let bands = Bands::new(cfg.bands, cfg.rows).unwrap();
    let sketches: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| sketch(t, cfg.shingle).unwrap())
        .collect();
    let (keys, bytes): (Vec<Vec<u32>>, Vec<Vec<u8>>) = sketches
        .iter()
        .map(|s| {
            let mut k = vec![0; cfg.bands];
            let mut b = vec![0; cfg.bands * cfg.rows];
            bands.keys_and_bytes(s, &mut Vec::new(), &mut k, &mut b);
            (k, b)
        })
        .unzip();
    let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
    let mut rep: Vec<i64> = (0..texts.len() as i64).collect();
    let mut kept: Vec<usize> = Vec::new();
    for r in 0..texts.len() {
        if sketches[r].is_empty() {
            continue;
        }
        // per kept row: (full buckets that hold it, other buckets that hold it)
        let mut shared: std::collections::BTreeMap<usize, (usize, usize)> = Default::default();
        for (band, key) in keys[r].iter().enumerate() {
            let same: Vec<usize> = kept
                .iter()
                .copied()
                .filter(|&k| keys[k][band] == *key)
                .collect();
            let full = same.len() >= cfg.bucket_limit;
            for &k in same.iter().rev().take(cfg.bucket_limit) {
                let e = shared.entry(k).or_default();
                if full {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
            }
        }
        let pos = |k: usize| kept.iter().position(|&x| x == k).unwrap();
        let mut ranked: Vec<(std::cmp::Reverse<u32>, u32, usize, usize)> = shared
            .iter()
            .filter(|(_, &(full, other))| other > 0 || full >= cfg.full_bucket_quorum)
            .filter_map(|(&k, _)| {
                let est = minhash::estimate(&bytes[r], &bytes[k]);
                let score = std::cmp::Reverse((est * 1000.0) as u32);
                let j = cfg.threshold.max(0.5);
                let deviation = (j * (1.0 - j) / (cfg.bands * cfg.rows) as f64).sqrt();
                (est >= cfg.threshold - 5.0 * deviation)
                    .then(|| (score, (fps[r] ^ fps[k]).count_ones(), pos(k), k))
            })
            .collect();
        ranked.sort_unstable();
        ranked.truncate(cfg.verify_limit);
        let mut best: Option<(f64, u32, usize, usize)> = None;
        for (_, d, p, k) in ranked {
            let sim = jaccard_sorted(&sketches[r], &sketches[k]);
            if sim < cfg.threshold {
                continue;
            }
            if best.is_none_or(|(s, bd, bp, _)| sim > s || (sim == s && (d, p) < (bd, bp))) {
                best = Some((sim, d, p, k));
            }
        }
        match best {
            Some((_, _, _, k)) => rep[r] = k as i64,
            None => kept.push(r),
        }
    }
    rep
}

#[test]
fn limits_mean_the_newest_rows_per_band_and_the_best_ranked_candidates() {
    // ... and a row that only full buckets hold needs `full_bucket_quorum` of them
    let texts = templated(1500, 4);
    let mut outcomes = Vec::new();
    for (bucket_limit, verify_limit, threshold, full_bucket_quorum) in [
        (3, 2, 0.8, 2),
        (12, 5, 0.6, 2),
        (40, 9, 0.5, 2),
        (12, 5, 0.6, 1),
        (12, 5, 0.6, 3),
    ] {
        let cfg = Config {
            bucket_limit,
            verify_limit,
            threshold,
            full_bucket_quorum,
            ..config(true)
        };
        let mut e = engine_over(&texts, cfg.clone());
        let order: Vec<i64> = (0..texts.len() as i64).collect();
        let got = decide_all(&mut e, &order, false);
        assert_eq!(got.representative, brute_force_limited(&texts, &cfg));
        assert!(
            got.stats.buckets_cut > 0 && got.stats.capped > 0,
            "the limits were reached"
        );
        assert_eq!(got.stats.unconfirmed > 0, full_bucket_quorum > 1);
        if bucket_limit == 12 {
            outcomes.push((got.stats.candidates, got.representative));
        }
    }
    // the quorum leaves candidates out, and that changes a decision here (pushed in the
    // order quorum 2, 1, 3)
    assert!(outcomes[2].0 < outcomes[0].0 && outcomes[0].0 < outcomes[1].0);
    assert!(outcomes[0].1 != outcomes[1].1 || outcomes[0].1 != outcomes[2].1);
}

#[test]
fn low_bytes_estimate_the_similarity() {
    let bands = Bands::new(20, 5).unwrap();
    let mut seed = 23;
    for (shared, own) in [(160u32, 20u32), (100, 50), (40, 80)] {
        let mut total = 0.0;
        for _ in 0..50 {
            let base: Vec<u32> = (0..shared).map(|_| lcg(&mut seed) as u32).collect();
            let (mut a, mut b) = (base.clone(), base);
            a.extend((0..own).map(|_| lcg(&mut seed) as u32));
            b.extend((0..own).map(|_| lcg(&mut seed) as u32));
            a.sort_unstable();
            b.sort_unstable();
            let (mut ka, mut kb) = (vec![0; 20], vec![0; 20]);
            let (mut ba, mut bb) = (vec![0; 100], vec![0; 100]);
            bands.keys_and_bytes(&a, &mut Vec::new(), &mut ka, &mut ba);
            bands.keys_and_bytes(&b, &mut Vec::new(), &mut kb, &mut bb);
            total += minhash::estimate(&ba, &bb);
        }
        let j = f64::from(shared) / f64::from(shared + 2 * own);
        assert!(
            (total / 50.0 - j).abs() < 0.03,
            "J {j:.3}: mean estimate {:.3}",
            total / 50.0
        );
    }
}

#[test]
fn online_calls_are_the_batch_decision() {
    // Rows fed and checked-and-added a few at a time give the batch decision; a check of a
    // text sees what a visit would; a forgotten row is no longer anybody's match.
    let texts = corpus(600, 31);
    let cfg = Config {
        bucket_limit: 6,
        verify_limit: 3,
        ..config(true)
    };
    let mut batch = engine_over(&texts, cfg.clone());
    let order: Vec<i64> = (0..texts.len() as i64).collect();
    let want = decide_all(&mut batch, &order, false);
    let mut online = Engine::new(cfg).unwrap();
    let mut reps = Vec::new();
    for (start, chunk) in texts.chunks(7).enumerate() {
        let first = (start * 7) as i64;
        let fps: Vec<u64> = chunk.iter().map(|t| fingerprint(t)).collect();
        let checked = online.check(chunk, &fps).unwrap();
        online.feed(chunk, &fps).unwrap();
        let rows: Vec<i64> = (first..first + chunk.len() as i64).collect();
        let got = online.check_and_add(&rows).unwrap();
        for (i, (m, c)) in got.iter().zip(&checked).enumerate() {
            reps.push(m.first().map_or(first + i as i64, |x| i64::from(x.0)));
            if i == 0 {
                assert_eq!(m, c, "the first of a chunk sees what its check saw");
            }
        }
    }
    assert_eq!(reps, want.representative);
    // forget every kept row: nothing matches any more
    let kept: Vec<i64> = (0..texts.len() as i64)
        .filter(|&r| reps[r as usize] == r)
        .collect();
    let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
    assert!(online
        .check(&texts, &fps)
        .unwrap()
        .iter()
        .any(|m| !m.is_empty()));
    online.forget(&kept).unwrap();
    assert!(online
        .check(&texts, &fps)
        .unwrap()
        .iter()
        .all(|m| m.is_empty()));
    // a row kept unchecked is a candidate again
    online.feed(&texts[..1], &fps[..1]).unwrap();
    let n = online.len() as i64;
    online.keep(&[n - 1]).unwrap();
    let again = online.check(&texts[..1], &fps[..1]).unwrap();
    assert_eq!(again[0].first().map(|m| m.0), Some((n - 1) as u32));
}

#[test]
fn check_and_keep_stores_only_what_it_keeps() {
    let texts = corpus(500, 41);
    let cfg = Config {
        bucket_limit: 5,
        verify_limit: 2,
        ..config(true)
    };
    let mut batch = engine_over(&texts, cfg.clone());
    let order: Vec<i64> = (0..texts.len() as i64).collect();
    let want = decide_all(&mut batch, &order, false);
    let kept_rows: Vec<usize> = (0..texts.len())
        .filter(|&r| want.representative[r] == r as i64)
        .collect();
    let mut online = Engine::new(cfg).unwrap();
    let mut row_of_text = Vec::new();
    for chunk in texts.chunks(11) {
        let fps: Vec<u64> = chunk.iter().map(|t| fingerprint(t)).collect();
        for (m, row) in online.check_and_keep(chunk, &fps).unwrap() {
            assert_eq!(m.is_empty(), row >= 0);
            row_of_text.push((row, m.first().map(|x| x.0)));
        }
    }
    assert_eq!(online.len(), kept_rows.len(), "only kept texts are stored");
    // the same decision: kept texts in the same order, each dropped one's match is the row
    // its representative was stored as
    let stored: Vec<usize> = (0..texts.len())
        .filter(|&t| row_of_text[t].0 >= 0)
        .collect();
    assert_eq!(stored, kept_rows);
    for (t, &(row, rep)) in row_of_text.iter().enumerate() {
        if row < 0 {
            let rep_text = want.representative[t] as usize;
            assert_eq!(rep, Some(row_of_text[rep_text].0 as u32));
        }
    }
}

#[test]
fn forgotten_rows_make_room_before_live_ones() {
    // 70 rows share every band with the first; once forgotten, they must not push it out of
    // the busy buckets (bucket_limit 64).
    let cfg = Config {
        bucket_limit: 64,
        ..config(true)
    };
    let mut e = Engine::new(cfg).unwrap();
    let a = "the quick brown fox jumps over the lazy dog near the river bank on a sunny day";
    let texts: Vec<&str> = std::iter::repeat_n(a, 71).collect();
    let fps = vec![7u64; 71];
    e.feed(&texts, &fps).unwrap();
    let rows: Vec<i64> = (0..71).collect();
    e.keep(&rows).unwrap();
    e.forget(&rows[1..]).unwrap();
    // a new row into the same buckets: the forgotten ones go first
    e.feed(&texts[..1], &fps[..1]).unwrap();
    e.keep(&[71]).unwrap();
    let found = e.check(&texts[..1], &fps[..1]).unwrap();
    let got: Vec<u32> = found[0].iter().map(|m| m.0).collect();
    assert_eq!(got, vec![0, 71]);
}

#[test]
fn a_failed_spill_leaves_the_rows_as_they_were() {
    let dir = std::env::temp_dir().join(format!("neardup-spill-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = Config {
        memory_budget: 0,
        spill_dir: dir.clone(),
        ..config(true)
    };
    let mut e = Engine::new(cfg).unwrap();
    let (x, a) = (
        "another text entirely, about rivers",
        "a text about the quick brown fox",
    );
    assert!(e.check_and_keep(&[x], &[1]).is_err()); // (no such directory)
    assert_eq!(e.len(), 0);
    std::fs::create_dir_all(&dir).unwrap();
    let kept = e.check_and_keep(&[a], &[2]).unwrap();
    assert_eq!(kept[0].1, 0);
    let found = e.check(&[a], &[2]).unwrap();
    assert_eq!(found[0].first().map(|m| m.0), Some(0));
    assert!(e.check(&[x], &[1]).unwrap()[0].is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The counters that must not depend on how rows are chunked.
fn counters(s: &Stats) -> Vec<u64> {
    let mut v = vec![
        s.documents,
        s.candidates,
        s.compared,
        s.estimated_out,
        s.capped,
        s.buckets_cut,
        s.empty,
    ];
    v.extend(&s.distance_passed);
    v.extend(&s.distance_failed);
    v.extend(&s.similarity);
    v
}

#[test]
fn many_rows_at_once_give_the_decision_of_one_row_at_a_time() {
    // A call of many rows (a decision, a check-and-keep) visits them one after another: the
    // same outcome, matches and counters as calls of one row each, limits binding or not.
    let mut texts = templated(1500, 7);
    texts.extend(corpus(900, 8));
    let order: Vec<i64> = (0..texts.len() as i64).rev().collect();
    for (bucket_limit, verify_limit, all_pairs) in [(64, 32, false), (3, 2, false), (8, 4, true)] {
        let cfg = Config {
            bucket_limit,
            verify_limit,
            ..config(true)
        };
        let mut e = engine_over(&texts, cfg.clone());
        e.reset();
        for &r in &order {
            e.decide(&[r], all_pairs).unwrap();
        }
        let one = e.outcome();
        e.reset();
        e.decide(&order, all_pairs).unwrap();
        let many = e.outcome();
        assert_eq!(many.representative, one.representative);
        assert_eq!(many.distance, one.distance);
        assert_eq!(many.similarity, one.similarity);
        assert_eq!(many.pairs, one.pairs);
        assert_eq!(counters(&many.stats), counters(&one.stats));
        assert!(one.stats.documents as usize == texts.len());

        // check-and-keep of many texts at once is the same as one at a time
        let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
        let mut a = Engine::new(cfg.clone()).unwrap();
        let one: Vec<(Vec<Found>, i64)> = texts
            .iter()
            .zip(&fps)
            .flat_map(|(t, &f)| a.check_and_keep(&[t], &[f]).unwrap())
            .collect();
        let mut b = Engine::new(cfg).unwrap();
        let many = b.check_and_keep(&texts, &fps).unwrap();
        assert_eq!(many, one);
        assert_eq!(counters(&b.outcome().stats), counters(&a.outcome().stats));
    }
}

#[test]
fn the_estimate_margin_is_five_deviations_of_a_pair_at_the_threshold() {
    assert!((rule::estimate_margin(0.8, 100) - 0.2).abs() < 1e-12);
    // fewer min-hashes or a lower threshold: a wider margin; below 0.5, that of J = 0.5
    assert!(rule::estimate_margin(0.8, 25) > 0.39);
    assert!(rule::estimate_margin(0.3, 100) == rule::estimate_margin(0.5, 100));
    assert_eq!(rule::estimate_margin(1.0, 100), 0.0);
}

#[test]
fn compacting_drops_forgotten_rows_and_decides_as_before() {
    let texts = templated(1200, 11);
    let fps: Vec<u64> = texts.iter().map(|t| fingerprint(t)).collect();
    for (bucket_limit, verify_limit) in [(64, 32), (3, 2)] {
        let cfg = Config {
            bucket_limit,
            verify_limit,
            memory_budget: 8192, // (some sketches in the temporary file)
            ..config(true)
        };
        let (first, later) = (&texts[..800], &texts[800..]);
        let mut a = Engine::new(cfg.clone()).unwrap();
        let mut b = Engine::new(cfg).unwrap();
        let kept_a = a.check_and_keep(first, &fps[..800]).unwrap();
        b.check_and_keep(first, &fps[..800]).unwrap();
        // forget two thirds of the kept rows (texts that expired)
        let rows: Vec<i64> = kept_a.iter().map(|x| x.1).filter(|&r| r >= 0).collect();
        let gone: Vec<i64> = rows.iter().copied().filter(|r| r % 3 != 0).collect();
        a.forget(&gone).unwrap();
        b.forget(&gone).unwrap();
        let before = b.len();
        let spilled = b.spilled_bytes();
        let new_row = b.compact().unwrap();
        assert_eq!(b.len(), before - gone.len());
        assert!(b.spilled_bytes() < spilled || spilled == 0);
        assert!(gone.iter().all(|&r| new_row[r as usize] == -1));
        // later texts find the same kept texts (renumbered), with the same counters
        let rename = |found: Vec<(Vec<Found>, i64)>, map: &dyn Fn(u32) -> u32| {
            found
                .into_iter()
                .map(|(m, r)| {
                    (
                        m.into_iter().map(|(x, d, s)| (map(x), d, s)).collect(),
                        r >= 0,
                    )
                })
                .collect::<Vec<(Vec<Found>, bool)>>()
        };
        let want = a.check_and_keep(later, &fps[800..]).unwrap();
        let got = b.check_and_keep(later, &fps[800..]).unwrap();
        let n_old = before as u32;
        let old_of_new: Vec<u32> = {
            let mut v = vec![0u32; b.len()];
            for (old, &new) in new_row.iter().enumerate() {
                if new >= 0 {
                    v[new as usize] = old as u32;
                }
            }
            v
        };
        // a row kept after the compaction is `n_old + k` in one and `len_after + k` in the other
        let after = (before - gone.len()) as u32;
        let to_old = |x: u32| {
            if x < after {
                old_of_new[x as usize]
            } else {
                n_old + (x - after)
            }
        };
        assert_eq!(rename(got, &to_old), rename(want, &|x| x));
        // (buckets cut: a ring counts the rows it ever held, a rebuilt one the live rows only)
        let (mut got, mut want) = (counters(&b.outcome().stats), counters(&a.outcome().stats));
        assert!(got[5] <= want[5]);
        (got[5], want[5]) = (0, 0);
        assert_eq!(got, want);
    }
}
