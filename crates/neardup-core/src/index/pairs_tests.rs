//! The batch self-join against brute force: random, clustered (planted near-copies at
//! distances around k) and skewed data (many equal blocks), every k, forced block plans of
//! every shape, and through the index after removes and expiry.

use super::{all_pairs, join_plan, self_join, self_join_with, JoinBlock};
use crate::index::layout::ball;
use crate::index::tests::Rng;
use crate::index::{IdRef, Index, Options};

fn brute(fps: &[u64], k: u32) -> Vec<(u32, u32, u32)> {
    let mut want = Vec::new();
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            if d <= k {
                want.push((i as u32, j as u32, d));
            }
        }
    }
    want
}

fn random(rng: &mut Rng, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.next()).collect()
}

/// Centres with near-copies at distances spread around `k` (and some exact copies).
fn clustered(rng: &mut Rng, n: usize, k: u32) -> Vec<u64> {
    let centres: Vec<u64> = (0..n / 20 + 1).map(|_| rng.next()).collect();
    (0..n)
        .map(|_| {
            let c = centres[rng.below(centres.len() as u64) as usize];
            let d = (k + 3).saturating_sub(rng.below(u64::from(k) + 7) as u32);
            rng.flip(c, d)
        })
        .collect()
}

/// Skewed: most items share their top 40 bits (or all but a few bits), the rest random.
fn skewed(rng: &mut Rng, n: usize) -> Vec<u64> {
    let common = rng.next();
    (0..n)
        .map(|i| match i % 4 {
            0 | 1 => (common & !0xFF_FFFF) | (rng.next() & 0xFF_FFFF),
            2 => common ^ (rng.next() & rng.next() & rng.next()),
            _ => rng.next(),
        })
        .collect()
}

/// Equal-width blocks with the layout rule's radii (`k = m*r + a`).
fn equal_plan(m: u32, k: u32) -> Vec<JoinBlock> {
    let (r, a) = (k / m, k % m);
    let mut offset = 0;
    let mut plan = Vec::new();
    for i in 0..m {
        let bits = 64 / m + u32::from(i < 64 % m);
        if i <= a || r > 0 {
            plan.push(JoinBlock {
                offset,
                bits,
                radius: if i <= a { r } else { r - 1 },
            });
        }
        offset += bits;
    }
    plan
}

fn check_all(fps: &[u64], k: u32, what: &str) {
    let want = brute(fps, k);
    assert_eq!(self_join(fps, k, false), want, "{what} k={k} auto");
    assert_eq!(self_join(fps, k, true), want, "{what} k={k} auto par");
    assert_eq!(all_pairs(fps, k, true), want, "{what} k={k} all pairs");
    // Forced block plans (small inputs would otherwise be checked pair by pair).
    for m in [3u32, 4, 5, 7, 16] {
        let plan = equal_plan(m, k);
        let masks: f64 = plan.iter().map(|b| ball(b.bits, b.radius)).sum();
        if plan.iter().all(|b| b.bits <= 16) && masks <= 50_000.0 {
            assert_eq!(
                self_join_with(fps, k, &plan, m % 2 == 0),
                want,
                "{what} k={k} m={m}"
            );
        }
    }
    // The shapes the planner picks for large inputs.
    for n in [100_000usize, 1_000_000, 10_000_000] {
        if let Some(plan) = join_plan(n, k) {
            let masks: f64 = plan.iter().map(|b| ball(b.bits, b.radius)).sum();
            if plan.iter().all(|b| b.bits <= 18) && masks <= 50_000.0 {
                assert_eq!(
                    self_join_with(fps, k, &plan, true),
                    want,
                    "{what} k={k} plan for {n}: {plan:?}"
                );
            }
        }
    }
}

#[test]
fn join_matches_brute_force_random() {
    let mut rng = Rng(1);
    let fps = random(&mut rng, 700);
    for k in 0..=20 {
        check_all(&fps, k, "random");
    }
    for k in [24, 28, 32, 40, 64] {
        check_all(&fps[..300], k, "random");
    }
}

#[test]
fn join_matches_brute_force_clustered() {
    let mut rng = Rng(2);
    for k in 0..=20 {
        let fps = clustered(&mut rng, 600, k);
        check_all(&fps, k, "clustered");
    }
    for k in [26, 33, 64] {
        let fps = clustered(&mut rng, 250, k);
        check_all(&fps, k, "clustered");
    }
}

#[test]
fn join_matches_brute_force_skewed() {
    let mut rng = Rng(3);
    let mut fps = skewed(&mut rng, 600);
    // Exact duplicates and the all-zero / all-one fingerprints.
    fps.extend_from_slice(&[0, 0, u64::MAX, u64::MAX, 1, fps[0], fps[1], fps[2]]);
    for k in (0..=20).chain([30, 64]) {
        check_all(&fps, k, "skewed");
    }
}

#[test]
fn join_edge_sizes() {
    for fps in [vec![], vec![7u64], vec![7, 7], vec![0, u64::MAX]] {
        for k in [0, 1, 13, 63, 64] {
            assert_eq!(self_join(&fps, k, true), brute(&fps, k), "{fps:?} k={k}");
            assert_eq!(
                self_join_with(&fps, k, &equal_plan(4, k.min(20)), false),
                brute(&fps, k.min(20))
                    .into_iter()
                    .filter(|p| p.2 <= k)
                    .collect::<Vec<_>>(),
            );
        }
    }
}

#[test]
fn plans_cover_k() {
    for n in [
        0usize,
        2,
        50,
        1000,
        30_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
    ] {
        for k in 0..=64 {
            let Some(plan) = join_plan(n, k) else {
                continue;
            };
            let cover: u32 = plan.iter().map(|b| b.radius + 1).sum();
            assert!(cover > k, "n={n} k={k} {plan:?}");
            let mut end = 0;
            for b in &plan {
                assert!(b.bits >= 1 && b.bits <= super::JOIN_MAX_BITS && b.radius < b.bits);
                assert_eq!(b.offset, end, "blocks are consecutive");
                end += b.bits;
            }
            assert!(end <= 64);
        }
    }
    // Large inputs at the dedup radii take the block join, not all pairs.
    assert!(join_plan(100_000, 13).is_some() && join_plan(1_000_000, 11).is_some());
}

#[test]
fn index_near_pairs_after_removes_and_expiry() {
    let mut rng = Rng(4);
    let mut idx = Index::new(Options {
        k: 3,
        ..Options::default()
    })
    .unwrap();
    let n = 3000usize;
    let fps = clustered(&mut rng, n, 12);
    // Timestamps over three days, out of insertion order: pairs come in time order of the
    // first item.
    let ts: Vec<f64> = (0..n).map(|i| ((i * 7919) % n) as f64 * 60.0).collect();
    for i in 0..n {
        idx.add(IdRef::Int(i as i64), fps[i], ts[i]).unwrap();
    }
    for i in (0..n).step_by(5) {
        idx.remove(IdRef::Int(i as i64)).unwrap();
    }
    idx.expire(600.0 * 60.0).unwrap();
    let mut live: Vec<usize> = (0..n)
        .filter(|i| i % 5 != 0 && ts[*i] >= 600.0 * 60.0)
        .collect();
    // Time order: by timestamp, then insertion order.
    live.sort_by(|&i, &j| ts[i].total_cmp(&ts[j]).then(i.cmp(&j)));
    let live_fps: Vec<u64> = live.iter().map(|&i| fps[i]).collect();
    for k in [0u32, 3, 8, 11, 13, 20] {
        let got: Vec<(i64, i64, u32)> = idx
            .near_pairs_locs(Some(k))
            .unwrap()
            .into_iter()
            .map(|(a, b, d)| match (idx.id_at(a), idx.id_at(b)) {
                (IdRef::Int(a), IdRef::Int(b)) => (a, b, d),
                _ => panic!("int ids"),
            })
            .collect();
        let want: Vec<(i64, i64, u32)> = brute(&live_fps, k)
            .into_iter()
            .map(|(i, j, d)| (live[i as usize] as i64, live[j as usize] as i64, d))
            .collect();
        assert_eq!(got, want, "k={k}");
    }
}
