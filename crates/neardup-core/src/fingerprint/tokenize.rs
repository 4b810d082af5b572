//! Tokenisers over normalised text. Features are slices of the text, so emitting one allocates
//! nothing.

use std::sync::OnceLock;

use jieba_rs::Jieba;

use super::config::Tokenizer;
use super::normalize::{classify, Class};
use super::seed002;

/// The shared jieba segmenter (its dictionary loads once, on first use).
pub fn jieba() -> &'static Jieba {
    static J: OnceLock<Jieba> = OnceLock::new();
    J.get_or_init(Jieba::new)
}

/// Bytes that are a whole ASCII word char (letters, digits, `_`); bytes >= 0x80 start or
/// continue a multi-byte char and are classified after decoding.
#[cfg(any(test, not(target_arch = "x86_64")))]
const fn ascii_word_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
}

#[cfg(any(test, not(target_arch = "x86_64")))]
static ASCII_WORD: [bool; 256] = ascii_word_table();

/// Bit masks of a 64-byte block: bit `i` of the first is set when byte `i` is an ASCII word
/// char, of the second when byte `i` is >= 0x80.
#[inline]
pub(super) fn block_masks(block: &[u8; 64]) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let (mut word, mut high) = (0u64, 0u64);
        for (k, chunk) in block.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is part of x86_64; `chunk` is 16 readable bytes (unaligned load).
            let (w, v) = unsafe {
                let v = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
                // Unsigned range checks as signed compares after moving the range to -128.
                let digit = _mm_cmplt_epi8(
                    _mm_add_epi8(v, _mm_set1_epi8((0x80u8 - b'0') as i8)),
                    _mm_set1_epi8(-128 + 10),
                );
                let lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
                let alpha = _mm_cmplt_epi8(
                    _mm_add_epi8(lower, _mm_set1_epi8((0x80u8 - b'a') as i8)),
                    _mm_set1_epi8(-128 + 26),
                );
                let under = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8));
                let w = _mm_or_si128(_mm_or_si128(digit, alpha), under);
                (_mm_movemask_epi8(w), _mm_movemask_epi8(v))
            };
            word |= (w as u16 as u64) << (16 * k);
            high |= (v as u16 as u64) << (16 * k);
        }
        (word, high)
    }
    #[cfg(not(target_arch = "x86_64"))]
    block_masks_plain(block)
}

/// [`block_masks`] one byte at a time, on any CPU.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(super) fn block_masks_plain(block: &[u8; 64]) -> (u64, u64) {
    let (mut word, mut high) = (0u64, 0u64);
    for (i, &x) in block.iter().enumerate() {
        word |= (ASCII_WORD[x as usize] as u64) << i;
        high |= ((x >> 7) as u64) << i;
    }
    (word, high)
}

/// Unicode words as byte ranges: runs of word characters; each CJK char on its own.
///
/// All-ASCII 64-byte blocks are cut with bit masks (a word is a run of ones, found with
/// trailing-zero counts), so word boundaries cost no mispredicted branch; other bytes are
/// classified one char at a time.
pub fn for_each_word(text: &str, mut emit: impl FnMut(usize, usize)) {
    let b = text.as_bytes();
    let n = b.len();
    // Start of the word in progress.
    let mut start: Option<usize> = None;
    let mut i = 0usize;
    while i < n {
        // The last block is padded with spaces (not word chars, so they end a word in progress
        // where the text ends).
        let mut padded = [b' '; 64];
        let block = match b[i..].first_chunk::<64>() {
            Some(block) => block,
            None => {
                padded[..n - i].copy_from_slice(&b[i..]);
                &padded
            }
        };
        {
            let (mut m, high) = block_masks(block);
            if high == 0 {
                if let Some(s) = start {
                    // The word in progress runs through the block's leading word bytes.
                    let run = (!m).trailing_zeros();
                    if run == 64 {
                        i += 64;
                        continue;
                    }
                    emit(s, i + run as usize);
                    start = None;
                    m &= m.wrapping_add(1);
                }
                while m != 0 {
                    // Adding the lowest set bit carries through its run of ones: the carry lands
                    // on the run's end, and `m & x` clears the run.
                    let low = m & m.wrapping_neg();
                    let x = m.wrapping_add(low);
                    let s = low.trailing_zeros() as usize;
                    let e = x.trailing_zeros() as usize;
                    if e == 64 {
                        start = Some(i + s);
                        break;
                    }
                    emit(i + s, i + e);
                    m &= x;
                }
                i = (i + 64).min(n);
                continue;
            }
        }
        // One char at a time to the end of this block (a char may end past it).
        let stop = (i + 64).min(n);
        while i < stop {
            let x = b[i];
            let (class, len) = if x < 0x80 {
                (classify(x as char), 1)
            } else {
                match text[i..].chars().next() {
                    Some(c) => (classify(c), c.len_utf8()),
                    None => break,
                }
            };
            match class {
                Class::Word => {
                    if start.is_none() {
                        start = Some(i);
                    }
                }
                Class::Cjk => {
                    if let Some(s) = start.take() {
                        emit(s, i);
                    }
                    emit(i, i + len);
                }
                Class::Space | Class::Other => {
                    if let Some(s) = start.take() {
                        emit(s, i);
                    }
                }
            }
            i += len;
        }
    }
    if let Some(s) = start {
        emit(s, n);
    }
}

/// Length in bytes of the UTF-8 char whose first byte is `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0..=0x7F => 1,
        0x80..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// Char n-gram shingles: every window of `n` consecutive chars, or the whole text when it has
/// at most `n` chars (nothing for the empty text).
fn for_each_char_ngram<'t>(text: &'t str, n: usize, mut emit: impl FnMut(&'t str)) {
    let b = text.as_bytes();
    if b.is_ascii() {
        if b.len() <= n {
            if !b.is_empty() {
                emit(text);
            }
            return;
        }
        for a in 0..=(b.len() - n) {
            // ASCII: every byte is a char boundary.
            emit(&text[a..a + n]);
        }
        return;
    }
    // Two cursors, `n` chars apart, each stepping one char at a time.
    let mut hi = 0usize;
    for _ in 0..n {
        if hi >= b.len() {
            // At most `n` chars (and at least one: the text is not ASCII, so not empty).
            emit(text);
            return;
        }
        hi += utf8_len(b[hi]);
    }
    let mut lo = 0usize;
    loop {
        emit(&text[lo..hi]);
        if hi >= b.len() {
            return;
        }
        lo += utf8_len(b[lo]);
        hi += utf8_len(b[hi]);
    }
}

/// Calls `emit` with every feature of `text` in order, duplicates included.
/// `Seed000` is handled on UTF-16 units elsewhere; here it falls back to the same split over
/// the UTF-16 form.
#[inline]
pub fn for_each_feature(
    tokenizer: Tokenizer,
    ngram: usize,
    text: &str,
    mut emit: impl FnMut(&str),
) {
    match tokenizer {
        Tokenizer::Seed002 => {
            let f = seed002::filtered(text);
            seed002::for_each_window(&f, ngram, emit);
        }
        Tokenizer::Seed000 => {
            // Only reached for UTF-8 output paths; the UTF-16 split is in seed000.rs.
            let units: Vec<u16> = text.encode_utf16().collect();
            super::seed000::for_each_feature(&units, |u| emit(&String::from_utf16_lossy(u)));
        }
        _ => {
            for_each_slice(tokenizer, ngram, text, emit);
        }
    }
}

/// [`for_each_feature`] for the tokenisers whose features are slices of `text` (all but the
/// seed ones, which rewrite the text first: for those it emits nothing and returns false).
pub fn for_each_slice<'t>(
    tokenizer: Tokenizer,
    ngram: usize,
    text: &'t str,
    mut emit: impl FnMut(&'t str),
) -> bool {
    match tokenizer {
        Tokenizer::Chars => for_each_char_ngram(text, ngram, emit),
        Tokenizer::Words => for_each_word(text, |a, b| emit(&text[a..b])),
        Tokenizer::WordNgrams => {
            let mut words: Vec<(usize, usize)> = Vec::new();
            for_each_word(text, |a, b| words.push((a, b)));
            if words.is_empty() {
                return true;
            }
            if words.len() <= ngram {
                emit(&text[words[0].0..words[words.len() - 1].1]);
                return true;
            }
            for w in words.windows(ngram) {
                emit(&text[w[0].0..w[ngram - 1].1]);
            }
        }
        Tokenizer::Jieba => {
            for tok in jieba().cut(text, true) {
                let w = tok.word.trim();
                if w.chars()
                    .any(|c| matches!(classify(c), Class::Word | Class::Cjk))
                {
                    emit(w);
                }
            }
        }
        Tokenizer::Seed002 | Tokenizer::Seed000 => return false,
    }
    true
}
