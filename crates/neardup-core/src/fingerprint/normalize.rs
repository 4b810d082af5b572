//! Text normalisation: HTML visible text (through `crate::html`), NFKC, Traditional ->
//! Simplified Chinese, case folding, punctuation removal, whitespace.

use std::sync::OnceLock;

use unicode_general_category::{get_general_category, GeneralCategory as Gc};
use unicode_normalization::UnicodeNormalization;

use super::config::Config;

/// How NFKC treats a char, for the fast path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NfkcKind {
    /// NFKC-stable starter that never composes with a neighbour (ASCII, CJK ideographs, common
    /// CJK punctuation without decomposition).
    Inert,
    /// Full-width ASCII (U+FF01-FF5E): NFKC maps it to `c - 0xFEE0`.
    Wide,
    /// Anything else: through the normaliser.
    Other,
}

#[inline]
fn nfkc_kind(c: char) -> NfkcKind {
    match c as u32 {
        0..=0x7F
        | 0x4E00..=0x9FFF
        | 0x3001..=0x3002
        | 0x3008..=0x3011
        | 0x2018..=0x201D
        | 0x2014 => NfkcKind::Inert,
        0xFF01..=0xFF5E => NfkcKind::Wide,
        _ => NfkcKind::Other,
    }
}

/// Byte offset of the first char that is not NFKC-inert, scanning ASCII bytes without decoding.
fn first_non_inert(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x80 {
            i += ascii_prefix_len(&b[i..]);
            continue;
        }
        let c = text[i..].chars().next()?;
        if nfkc_kind(c) != NfkcKind::Inert {
            return Some(i);
        }
        i += c.len_utf8();
    }
    None
}

/// Length of the ASCII prefix of `b`, eight bytes at a time.
#[inline]
pub fn ascii_prefix_len(b: &[u8]) -> usize {
    let mut i = 0;
    let mut chunks = b.chunks_exact(8);
    for c in chunks.by_ref() {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let high = u64::from_le_bytes(w) & 0x8080_8080_8080_8080;
        if high != 0 {
            return i + (high.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + chunks
        .remainder()
        .iter()
        .position(|&x| x >= 0x80)
        .unwrap_or(chunks.remainder().len())
}

/// What [`nfkc_walk`] hands on, in text order.
enum Piece<'a> {
    /// ASCII, NFKC-stable as it is.
    Ascii(&'a str),
    /// CJK ideographs U+4E00..=U+9FFF, NFKC-stable as they are.
    Ideographs(&'a str),
    /// A char already in its NFKC form (full-width ASCII mapped).
    Char(char),
    /// A stretch still to go through the normaliser.
    Stretch(&'a str),
}

/// Walks `text` as the NFKC fast path sees it: inert chars are handed on as they are (ASCII and
/// ideographs in whole runs), full-width ASCII mapped, and only the stretches holding other
/// characters are left to the normaliser (a char right before such a stretch joins it, as it
/// may compose with it). Normalising each [`Piece::Stretch`] and joining the pieces in order
/// gives full NFKC (tested).
fn nfkc_walk<'a>(text: &'a str, mut emit: impl FnMut(Piece<'a>)) {
    let b = text.as_bytes();
    let mut slow_start: Option<usize> = None;
    let mut i = 0usize;
    while i < b.len() {
        if slow_start.is_none() {
            // A run of ASCII or of ideographs: all but its last char are followed by a char of
            // the run and go as they are; the last one is decided below by what follows it.
            if b[i] < 0x80 {
                let run = ascii_prefix_len(&b[i..]);
                if run > 1 {
                    emit(Piece::Ascii(&text[i..i + run - 1]));
                    i += run - 1;
                }
            } else if b[i] >= 0xE4 {
                let run = ideograph_run_len(&b[i..]);
                if run > 3 {
                    emit(Piece::Ideographs(&text[i..i + run - 3]));
                    i += run - 3;
                }
            }
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        let next = i + c.len_utf8();
        let kind = nfkc_kind(c);
        let next_ok = text[next..]
            .chars()
            .next()
            .is_none_or(|n| nfkc_kind(n) != NfkcKind::Other);
        if kind != NfkcKind::Other && next_ok {
            if let Some(s) = slow_start.take() {
                emit(Piece::Stretch(&text[s..i]));
            }
            emit(match kind {
                NfkcKind::Wide => Piece::Char(char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)),
                _ if c.is_ascii() => Piece::Ascii(&text[i..next]),
                _ if (0x4E00..=0x9FFF).contains(&(c as u32)) => Piece::Ideographs(&text[i..next]),
                _ => Piece::Char(c),
            });
        } else if slow_start.is_none() {
            slow_start = Some(i);
        }
        i = next;
    }
    if let Some(s) = slow_start {
        emit(Piece::Stretch(&text[s..]));
    }
}

/// Writes the NFKC form of `text` into `out` and returns true, or returns false (leaving `out`
/// alone) when `text` is already NFKC by the fast path's rules ([`nfkc_walk`]). Equal to full
/// NFKC (tested).
pub fn nfkc_into(text: &str, out: &mut String) -> bool {
    let Some(first) = first_non_inert(text) else {
        return false;
    };
    // The char before the first non-inert one may compose with it: start there.
    let start = text[..first]
        .char_indices()
        .next_back()
        .map_or(0, |(i, _)| i);
    out.clear();
    out.reserve(text.len() + 8);
    out.push_str(&text[..start]);
    nfkc_walk(&text[start..], |piece| match piece {
        Piece::Ascii(s) | Piece::Ideographs(s) => out.push_str(s),
        Piece::Char(c) => out.push(c),
        Piece::Stretch(s) => out.extend(s.nfkc()),
    });
    true
}

/// NFKC of `text` (borrowed when it is already NFKC by the fast path's rules).
pub fn nfkc(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    if nfkc_into(text, &mut out) {
        std::borrow::Cow::Owned(out)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// What a character is for tokenising.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    /// Letters, digits, marks and connectors: part of a word.
    Word,
    /// Han ideographs and kana: a word of their own.
    Cjk,
    Space,
    /// Punctuation, symbols, controls and everything else.
    Other,
}

#[inline]
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0x20000..=0x3134F)
}

const fn ascii_classes() -> [Class; 128] {
    let mut t = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() || c == b'_' {
            Class::Word
        } else if c.is_ascii_whitespace() {
            Class::Space
        } else {
            Class::Other
        };
        b += 1;
    }
    t
}

static ASCII_CLASS: [Class; 128] = ascii_classes();

#[inline(always)]
pub fn classify(c: char) -> Class {
    if (c as u32) < 128 {
        return ASCII_CLASS[c as usize];
    }
    classify_non_ascii(c)
}

#[inline(never)]
fn classify_non_ascii(c: char) -> Class {
    if is_cjk(c) {
        return Class::Cjk;
    }
    if c.is_whitespace() {
        return Class::Space;
    }
    match get_general_category(c) {
        Gc::UppercaseLetter
        | Gc::LowercaseLetter
        | Gc::TitlecaseLetter
        | Gc::ModifierLetter
        | Gc::OtherLetter
        | Gc::NonspacingMark
        | Gc::SpacingMark
        | Gc::EnclosingMark
        | Gc::DecimalNumber
        | Gc::LetterNumber
        | Gc::OtherNumber
        | Gc::ConnectorPunctuation => Class::Word,
        _ => Class::Other,
    }
}

/// Flag of a separator in [`ascii_map`]: whitespace, and punctuation when stripping.
const SEP: u8 = 0x80;

/// What each ASCII byte becomes under case folding (`fold`) and punctuation removal (`strip`):
/// the byte written (lowercased when folding; a stripped byte becomes a space), with [`SEP`]
/// set on separators, which whitespace collapsing merges into one space.
const fn ascii_map(fold: bool, strip: bool) -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        let space = c.is_ascii_whitespace();
        t[b] = if space || (strip && !(c.is_ascii_alphanumeric() || c == b'_')) {
            SEP | if space { c } else { b' ' }
        } else if fold {
            c.to_ascii_lowercase()
        } else {
            c
        };
        b += 1;
    }
    t
}

/// [`ascii_map`] for each (fold, strip), indexed by `fold as usize | (strip as usize) << 1`.
static ASCII_MAPS: [[u8; 128]; 4] = [
    ascii_map(false, false),
    ascii_map(true, false),
    ascii_map(false, true),
    ascii_map(true, true),
];

/// Buffers reused from text to text by normalisation (one set per thread in batches), so a
/// text costs no allocation once they have grown.
#[derive(Default, Debug)]
pub struct Buffers {
    html: String,
    nfkc: String,
    t2s: String,
    out: Vec<u8>,
}

/// The shared Traditional -> Simplified converter (OpenCC's t2s: TSPhrases then TSCharacters,
/// longest match first), loaded once; None if its built-in tables fail to load.
pub fn t2s_converter() -> Option<&'static ferrous_opencc::OpenCC> {
    static T2S: OnceLock<Option<ferrous_opencc::OpenCC>> = OnceLock::new();
    T2S.get_or_init(|| {
        ferrous_opencc::OpenCC::from_config(ferrous_opencc::config::BuiltinConfig::T2s).ok()
    })
    .as_ref()
}

/// Applies the configured normalisation steps (HTML first, then NFKC, Traditional ->
/// Simplified, case, punctuation, whitespace) using `bufs`; returns `text` itself when no step changes it.
pub fn normalize_with<'a>(text: &'a str, config: &Config, bufs: &'a mut Buffers) -> &'a str {
    let Buffers {
        html,
        nfkc,
        t2s,
        out,
    } = bufs;
    let mut cur: &'a str = text;
    if config.html {
        // (the `html` option: the page's visible text, read by the one HTML reader)
        *html = crate::html::visible_text(cur);
        let html: &'a String = html;
        cur = html;
    }
    let folds = config.casefold || config.strip_punctuation || config.collapse_whitespace;
    // ASCII is NFKC-stable: only texts with other bytes go through NFKC; without t2s between
    // them, NFKC and the folding steps run as one pass.
    if config.nfkc && !config.t2s && folds && !cur.is_ascii() {
        let flags = (
            config.casefold,
            config.strip_punctuation,
            config.collapse_whitespace,
        );
        nfkc_fold_strip_collapse(cur, flags, out, nfkc);
        return utf8_written(out);
    }
    if config.nfkc && !cur.is_ascii() && nfkc_into(cur, nfkc) {
        let nfkc: &'a String = nfkc;
        cur = nfkc;
    }
    // Only texts with non-ASCII chars can hold Traditional Chinese.
    if config.t2s && !cur.is_ascii() {
        if let Some(conv) = t2s_converter() {
            *t2s = conv.convert(cur);
            let t2s: &'a String = t2s;
            cur = t2s;
        }
    }
    if !folds {
        return cur;
    }
    fold_strip_collapse(
        cur,
        config.casefold,
        config.strip_punctuation,
        config.collapse_whitespace,
        out,
    );
    utf8_written(out)
}

/// `out` as text: only whole chars were written to it. Checked all the same, with SIMD (std's
/// check cost more than the normalisation itself on Chinese text).
fn utf8_written(out: &[u8]) -> &str {
    simdutf8::basic::from_utf8(out).unwrap_or_default()
}

/// Applies the configured normalisation steps (HTML first, then NFKC, Traditional ->
/// Simplified, case, punctuation, whitespace). Returns the text unchanged (borrowed) when no step changes it.
pub fn normalize<'a>(text: &'a str, config: &Config) -> std::borrow::Cow<'a, str> {
    let mut bufs = Buffers::default();
    let out = normalize_with(text, config, &mut bufs);
    if std::ptr::eq(out, text) {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(out.to_owned())
    }
}

/// Case folding, punctuation removal and whitespace collapsing, fed a piece at a time: runs
/// of ASCII bytes ([`Folder::ascii`]) and single chars ([`Folder::char`]); the output only
/// depends on the sequence of chars fed, not on how it was cut.
struct Folder {
    map: &'static [u8; 128],
    fold: bool,
    strip: bool,
    collapse: bool,
    /// At the start and after a separator: no space is due before the next separator.
    after_sep: bool,
}

impl Folder {
    fn new(fold: bool, strip: bool, collapse: bool) -> Folder {
        Folder {
            map: &ASCII_MAPS[fold as usize | (strip as usize) << 1],
            fold,
            strip,
            collapse,
            after_sep: true,
        }
    }

    /// A run of ASCII bytes, through [`ASCII_MAPS`] without branching on the bytes: when
    /// collapsing, a separator after a kept char writes a space at once and later separators
    /// write nothing (the index advances by 0).
    #[inline]
    fn ascii(&mut self, src: &[u8], out: &mut Vec<u8>) {
        let map = self.map;
        let base = out.len();
        out.resize(base + src.len(), 0);
        let dst = &mut out[base..];
        if self.collapse {
            let mut w = 0usize;
            let mut after = self.after_sep as usize;
            for &x in src {
                let e = map[(x & 0x7f) as usize];
                let sep = (e >> 7) as usize;
                dst[w] = if sep == 1 { b' ' } else { e };
                w += 1 - (sep & after);
                after = sep;
            }
            self.after_sep = after == 1;
            out.truncate(base + w);
        } else if !self.strip {
            // Case folding alone: a plain ASCII lowercase, which vectorises.
            dst.copy_from_slice(src);
            if self.fold {
                dst.make_ascii_lowercase();
            }
        } else {
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = map[(x & 0x7f) as usize] & !SEP;
            }
        }
    }

    /// One char (any; ASCII ones go through [`Folder::ascii`]).
    #[inline]
    fn char(&mut self, c: char, out: &mut Vec<u8>) {
        if c.is_ascii() {
            self.ascii(&[c as u8], out);
            return;
        }
        let mut buf = [0u8; 4];
        if is_cjk(c) {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            self.after_sep = false;
            return;
        }
        let space = c.is_whitespace();
        if space || (self.strip && classify(c) == Class::Other) {
            if self.collapse {
                if !self.after_sep {
                    out.push(b' ');
                }
                self.after_sep = true;
            } else if space {
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            } else {
                out.push(b' ');
            }
            return;
        }
        self.after_sep = false;
        if self.fold {
            for l in c.to_lowercase() {
                out.extend_from_slice(l.encode_utf8(&mut buf).as_bytes());
            }
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }

    /// All of `text`: ASCII runs a run at a time, other chars one by one.
    fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        let b = text.as_bytes();
        let mut i = 0usize;
        while i < b.len() {
            let run = ascii_prefix_len(&b[i..]);
            if run > 0 {
                self.ascii(&b[i..i + run], out);
                i += run;
                continue;
            }
            let Some(c) = text[i..].chars().next() else {
                break;
            };
            self.char(c, out);
            i += c.len_utf8();
        }
    }

    /// Ends the text: a separator at the end wrote a space that nothing follows.
    fn finish(&self, out: &mut Vec<u8>) {
        if self.collapse && self.after_sep && !out.is_empty() {
            out.pop();
        }
    }
}

/// Case folding, punctuation removal and whitespace collapsing in one pass, into `out`.
fn fold_strip_collapse(text: &str, fold: bool, strip: bool, collapse: bool, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(text.len());
    let mut f = Folder::new(fold, strip, collapse);
    f.text(text, out);
    f.finish(out);
}

/// Bytes at the start of `b` (valid UTF-8) taken by CJK ideographs U+4E00..=U+9FFF (three
/// bytes each, lead byte 0xE4 with a second byte from 0xB8, or 0xE5..=0xE9).
#[inline]
fn ideograph_run_len(b: &[u8]) -> usize {
    let mut i = 0;
    while i + 2 < b.len() {
        let (lead, second) = (b[i], b[i + 1]);
        if !((0xE5..=0xE9).contains(&lead) || (lead == 0xE4 && second >= 0xB8)) {
            break;
        }
        i += 3;
    }
    i
}

/// NFKC followed by [`fold_strip_collapse`] in one pass, into `out` (`stretch` is scratch).
///
/// The chars NFKC leaves alone by the fast path's rules ([`nfkc_into`]) go straight to the
/// folder (ASCII in whole runs, CJK ideographs copied); only stretches holding other chars (with
/// the char before them, which may compose) go through the normaliser first. The folder sees
/// exactly the chars of `nfkc(text)`, in order, so the output equals the two passes (tested).
fn nfkc_fold_strip_collapse(
    text: &str,
    (fold, strip, collapse): (bool, bool, bool),
    out: &mut Vec<u8>,
    stretch: &mut String,
) {
    out.clear();
    out.reserve(text.len());
    let mut f = Folder::new(fold, strip, collapse);
    nfkc_walk(text, |piece| match piece {
        Piece::Ascii(a) => f.ascii(a.as_bytes(), out),
        Piece::Ideographs(s) => {
            // Kept as they are by every folding step.
            out.extend_from_slice(s.as_bytes());
            f.after_sep = false;
        }
        Piece::Char(c) => f.char(c, out),
        Piece::Stretch(s) => {
            stretch.clear();
            stretch.extend(s.nfkc());
            f.text(stretch, out);
        }
    });
    f.finish(out);
}
