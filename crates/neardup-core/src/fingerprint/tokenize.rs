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

/// Unicode words as byte ranges: runs of word characters; each CJK char on its own.
pub fn for_each_word(text: &str, mut emit: impl FnMut(usize, usize)) {
    let b = text.as_bytes();
    let mut start: Option<usize> = None;
    let mut i = 0usize;
    while i < b.len() {
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
    if let Some(s) = start {
        emit(s, text.len());
    }
}

/// Calls `emit` with every feature of `text` in order, duplicates included.
/// `Seed000` is handled on UTF-16 units elsewhere; here it falls back to the same split over
/// the UTF-16 form.
pub fn for_each_feature(
    tokenizer: Tokenizer,
    ngram: usize,
    text: &str,
    mut emit: impl FnMut(&str),
) {
    match tokenizer {
        Tokenizer::Chars => {
            if text.is_ascii() {
                let b = text.as_bytes();
                if b.len() <= ngram {
                    if !b.is_empty() {
                        emit(text);
                    }
                    return;
                }
                for a in 0..=(b.len() - ngram) {
                    // ASCII: every byte is a char boundary.
                    emit(&text[a..a + ngram]);
                }
                return;
            }
            let mut bounds: Vec<usize> = Vec::with_capacity(text.len() + 1);
            bounds.extend(text.char_indices().map(|(i, _)| i));
            bounds.push(text.len());
            let chars = bounds.len() - 1;
            if chars <= ngram {
                if chars > 0 {
                    emit(text);
                }
                return;
            }
            for a in 0..=(chars - ngram) {
                emit(&text[bounds[a]..bounds[a + ngram]]);
            }
        }
        Tokenizer::Words => for_each_word(text, |a, b| emit(&text[a..b])),
        Tokenizer::WordNgrams => {
            let mut words: Vec<(usize, usize)> = Vec::new();
            for_each_word(text, |a, b| words.push((a, b)));
            if words.is_empty() {
                return;
            }
            if words.len() <= ngram {
                emit(&text[words[0].0..words[words.len() - 1].1]);
                return;
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
        Tokenizer::Seed002 => {
            let f = seed002::filtered(text);
            seed002::for_each_window(&f, ngram, emit);
        }
        Tokenizer::Seed000 => {
            // Only reached for UTF-8 output paths; the UTF-16 split is in seed000.rs.
            let units: Vec<u16> = text.encode_utf16().collect();
            super::seed000::for_each_feature(&units, |u| emit(&String::from_utf16_lossy(u)));
        }
    }
}
