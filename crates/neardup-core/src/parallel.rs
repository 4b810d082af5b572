//! The crate's one rayon pool for batch calls (fingerprints, HTML, verify, index), safe after
//! `fork()`.
//!
//! A forked child has none of its parent's threads, so the parent's pool would wait forever.
//! The pool remembers the process id it was made in; a child that finds another id makes its
//! own pool (the inherited one is leaked, never joined). If the pool's lock was held at the
//! fork (or is busy), the call runs sequentially instead of waiting.
//! `NEARDUP_NUM_THREADS` sets the number of threads (read when a pool is made; `1` means
//! sequential). [`set_enabled`]`(false)` turns parallelism off for the whole process.
//!
//! Parallel code must run inside [`run`] / [`install`] (never on rayon's global pool, which
//! does not survive a fork): `par_iter` and `par_sort` nested inside `install` use this pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

use rayon::prelude::*;
use rayon::ThreadPool;

struct Pool {
    pid: u32,
    pool: Arc<ThreadPool>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Slices at least this long are sorted on the pool by [`sort_unstable`].
const PAR_SORT_MIN: usize = 1 << 14;

/// Allows or forbids the pool in every batch call of this process (an explicit off switch;
/// a forked child does not need it).
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::SeqCst);
}

/// Whether batch calls may use the pool (see [`set_enabled`]).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::SeqCst)
}

/// Threads to use: `NEARDUP_NUM_THREADS` when set to a positive integer, else the CPUs.
pub fn num_threads() -> usize {
    std::env::var("NEARDUP_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn current() -> Option<Arc<ThreadPool>> {
    if !enabled() {
        return None;
    }
    let threads = num_threads();
    if threads <= 1 {
        return None;
    }
    let mut guard = match POOL.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    let pid = std::process::id();
    if let Some(p) = guard.as_ref() {
        if p.pid == pid && p.pool.current_num_threads() == threads {
            return Some(Arc::clone(&p.pool));
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("neardup-{i}"))
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    if let Some(old) = guard.replace(Pool {
        pid,
        pool: Arc::clone(&pool),
    }) {
        if old.pid != pid {
            // Its threads live in another process: dropping it would wait on them.
            std::mem::forget(old);
        }
    }
    Some(pool)
}

/// Runs `f` with the pool, or with `None` when it should run sequentially.
pub fn run<R>(f: impl FnOnce(Option<&ThreadPool>) -> R) -> R {
    match current() {
        Some(pool) => f(Some(&pool)),
        None => f(None),
    }
}

/// Runs `f(true)` inside the pool (so its `par_iter`s use it) when `wanted` and the pool is
/// available, else `f(false)` on this thread; `f(false)` must not use rayon.
pub fn install<R: Send>(wanted: bool, f: impl FnOnce(bool) -> R + Send) -> R {
    if !wanted {
        return f(false);
    }
    match current() {
        Some(pool) => pool.install(|| f(true)),
        None => f(false),
    }
}

/// `f` of each item, in order: on the pool when `wanted` and the pool is available (at least
/// `min_len` items per task), else on this thread.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    wanted: bool,
    min_len: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    install(wanted, |par| {
        if par {
            items.par_iter().with_min_len(min_len).map(&f).collect()
        } else {
            items.iter().map(&f).collect()
        }
    })
}

/// `v.sort_unstable()`, on the pool for long slices.
pub fn sort_unstable<T: Ord + Send>(v: &mut [T]) {
    install(v.len() >= PAR_SORT_MIN, |par| {
        if par {
            v.par_sort_unstable();
        } else {
            v.sort_unstable();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_pool_thread() -> bool {
        std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("neardup-"))
    }

    #[test]
    fn install_runs_on_the_pool_or_on_this_thread() {
        assert!(!install(false, |par| par || on_pool_thread()));
        // `par` is false when the pool is off, single-threaded or busy; when true, the work
        // (and rayon nested in it) runs on the crate's pool, not rayon's global one.
        let (par, inner) = install(true, |par| {
            let inner: Vec<bool> = if par {
                (0..64).into_par_iter().map(|_| on_pool_thread()).collect()
            } else {
                vec![on_pool_thread()]
            };
            (par, inner)
        });
        if par {
            assert!(inner.iter().all(|&t| t));
        } else {
            assert_eq!(inner, vec![false]);
        }
    }

    #[test]
    fn sort_unstable_matches_the_sequential_sort() {
        let mut x: u64 = 7;
        let mut v: Vec<(u32, u32)> = (0..3 * PAR_SORT_MIN as u32)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as u32 % 1000, i)
            })
            .collect();
        let mut want = v.clone();
        want.sort();
        sort_unstable(&mut v);
        assert_eq!(v, want);
        let mut short = vec![3, 1, 2];
        sort_unstable(&mut short);
        assert_eq!(short, vec![1, 2, 3]);
    }
}
