//! The text both stages of a dedup policy see (`neardup.verify.normalise`): NFKC, then lower
//! case, then whitespace runs collapsed to one space, stripped.
//!
//! Each step keeps Python's meaning, so the result equals
//! `" ".join(unicodedata.normalize("NFKC", t).lower().split())` on every character Python's
//! Unicode database knows (tested over all of them in `tests/test_normalise.py`):
//! - lower case is [`str::to_lowercase`], which, like `str.lower`, maps a capital sigma at the
//!   end of a word to the final form `ς`;
//! - whitespace is what `str.split()` splits at ([`is_py_space`]): Unicode's White_Space
//!   plus the ASCII separators U+001C..U+001F.
//!
//! The Unicode data are the crates' (newer than Python 3.11's 14.0), so the result no longer
//! depends on the Python version that runs it; characters assigned after 14.0 are the only ones
//! where it can differ from the Python expression.

use crate::fingerprint::normalize::nfkc_into;
use crate::parallel as pool;

/// Texts per batch below which one thread is faster than handing work to the pool.
const PARALLEL_MIN_TEXTS: usize = 256;

/// Whether Python's `str.split()` splits at `c` (`str.isspace()`).
#[inline]
pub fn is_py_space(c: char) -> bool {
    matches!(
        c as u32,
        0x09..=0x0D
            | 0x1C..=0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// NFKC, lower case, whitespace runs collapsed to one space, stripped (see the module).
pub fn normalise(text: &str) -> String {
    let mut nfkc = String::new();
    let t: &str = if nfkc_into(text, &mut nfkc) {
        &nfkc
    } else {
        text
    };
    let mut out = String::with_capacity(t.len());
    if t.contains('\u{3A3}') {
        // A capital sigma's form depends on its neighbours: the whole text at once.
        collapse_into(&t.to_lowercase(), &mut out, |c, o| o.push(c));
    } else {
        collapse_into(t, &mut out, push_lower);
    }
    out
}

/// Writes the words of `t` (runs between [`is_py_space`] chars) to `out`, one space between
/// them, each char through `push`.
fn collapse_into(t: &str, out: &mut String, push: impl Fn(char, &mut String)) {
    let mut pending = false; // a space is due before the next char
    for c in t.chars() {
        if is_py_space(c) {
            pending = !out.is_empty();
            continue;
        }
        if pending {
            out.push(' ');
            pending = false;
        }
        push(c, out);
    }
}

/// The lower case of `c` (any char but a capital sigma), skipping the case tables for
/// ASCII and for the caseless CJK ideographs and kana.
#[inline]
fn push_lower(c: char, out: &mut String) {
    match c as u32 {
        0..=0x7F => out.push(c.to_ascii_lowercase()),
        0x3040..=0x30FF | 0x4E00..=0x9FFF => out.push(c),
        _ => out.extend(c.to_lowercase()),
    }
}

/// [`normalise`] of each text, on the pool for large batches.
pub fn normalise_many<S: AsRef<str> + Sync>(texts: &[S]) -> Vec<String> {
    pool::map(texts, texts.len() >= PARALLEL_MIN_TEXTS, 64, |t| {
        normalise(t.as_ref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfkc_then_lower_then_collapse() {
        assert_eq!(normalise("  Hello\t\tWORLD \n"), "hello world");
        assert_eq!(normalise(""), "");
        assert_eq!(normalise(" \u{3000}\x1c "), "");
        // full-width letters and the ideographic space (NFKC), then lower case
        assert_eq!(normalise("ＡＢＣ\u{3000}中文，好"), "abc 中文,好");
        // U+001C..U+001F and U+0085 split, as in Python; U+200B (not White_Space) does not
        assert_eq!(normalise("a\x1fb\u{85}c\u{200b}d"), "a b c\u{200b}d");
        // the ligature ﬁ is "fi" under NFKC
        assert_eq!(normalise("ﬁne"), "fine");
    }

    #[test]
    fn capital_sigma_takes_its_final_form_at_the_end_of_a_word() {
        assert_eq!(normalise("ΟΔΟΣ ΣΑΣ"), "οδος σας");
        assert_eq!(normalise("Σ"), "σ");
        // Python: 'İ'.lower() is 'i' + U+0307
        assert_eq!(normalise("İ"), "i\u{307}");
    }

    #[test]
    fn many_equals_one_by_one_on_and_off_the_pool() {
        let texts: Vec<String> = (0..1000)
            .map(|i| format!("Text  {i}\u{3000}ＡΣ ΣΑΣ\t{}", "x".repeat(i % 7)))
            .collect();
        let one: Vec<String> = texts.iter().map(|t| normalise(t)).collect();
        assert_eq!(normalise_many(&texts), one);
        assert_eq!(normalise_many(&texts[..10]), one[..10]);
    }
}
