//! Text normalisation: HTML visible text, NFKC, case folding, punctuation removal, whitespace.

use ego_tree::iter::Edge;
use scraper::{Html, Node};
use unicode_general_category::{get_general_category, GeneralCategory as Gc};
use unicode_normalization::UnicodeNormalization;

use super::config::Config;

/// Visible text of an HTML document or fragment: text nodes outside script, style, template,
/// noscript, head and comments; block-level elements separate their text with a space.
pub fn html_visible_text(html: &str) -> String {
    let doc = Html::parse_document(html);
    let mut out = String::with_capacity(html.len() / 2);
    let mut hidden = 0usize;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(e) => {
                    if is_hidden(e.name()) {
                        hidden += 1;
                    } else if !is_inline(e.name()) {
                        out.push(' ');
                    }
                }
                Node::Text(t) if hidden == 0 => out.push_str(t),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(e) = node.value() {
                    if is_hidden(e.name()) {
                        hidden = hidden.saturating_sub(1);
                    } else if !is_inline(e.name()) {
                        out.push(' ');
                    }
                }
            }
        }
    }
    out
}

fn is_hidden(name: &str) -> bool {
    matches!(
        name,
        "script" | "style" | "template" | "noscript" | "head" | "title" | "iframe" | "object"
    )
}

fn is_inline(name: &str) -> bool {
    matches!(
        name,
        "a" | "abbr"
            | "b"
            | "bdi"
            | "bdo"
            | "cite"
            | "code"
            | "data"
            | "dfn"
            | "em"
            | "font"
            | "i"
            | "kbd"
            | "mark"
            | "q"
            | "rp"
            | "rt"
            | "ruby"
            | "s"
            | "samp"
            | "small"
            | "span"
            | "strong"
            | "sub"
            | "sup"
            | "time"
            | "u"
            | "var"
            | "wbr"
            | "del"
            | "ins"
    )
}

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
            i += 1;
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

/// NFKC with a fast path: inert chars are copied, full-width ASCII is mapped, and only the
/// stretches holding other characters go through the normaliser (a char right before such a
/// stretch joins it, as it may compose with it). Equal to full NFKC (tested).
pub fn nfkc(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(first) = first_non_inert(text) else {
        return std::borrow::Cow::Borrowed(text);
    };
    // The char before the first non-inert one may compose with it: start there.
    let start = text[..first]
        .char_indices()
        .next_back()
        .map_or(0, |(i, _)| i);
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..start]);
    let rest = &text[start..];
    let mut chars = rest.char_indices().peekable();
    let mut slow_start: Option<usize> = None;
    while let Some((i, c)) = chars.next() {
        let kind = nfkc_kind(c);
        let next_ok = chars
            .peek()
            .is_none_or(|&(_, n)| nfkc_kind(n) != NfkcKind::Other);
        if kind != NfkcKind::Other && next_ok {
            if let Some(s) = slow_start.take() {
                out.extend(rest[s..i].nfkc());
            }
            match kind {
                NfkcKind::Wide => out.push(char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)),
                _ => out.push(c),
            }
        } else if slow_start.is_none() {
            slow_start = Some(i);
        }
    }
    if let Some(s) = slow_start {
        out.extend(rest[s..].nfkc());
    }
    std::borrow::Cow::Owned(out)
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

const fn keep_table(strip: bool) -> [bool; 128] {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if strip {
            c.is_ascii_alphanumeric() || c == b'_'
        } else {
            !c.is_ascii_whitespace()
        };
        b += 1;
    }
    t
}

/// ASCII bytes written through unchanged (up to case) with and without punctuation removal.
static KEEP_STRIP: [bool; 128] = keep_table(true);
static KEEP_ALL: [bool; 128] = keep_table(false);

/// Applies the configured normalisation steps (HTML first, then NFKC, case, punctuation,
/// whitespace). Returns the text unchanged (borrowed) when no step is on.
pub fn normalize<'a>(text: &'a str, config: &Config) -> std::borrow::Cow<'a, str> {
    use std::borrow::Cow;
    let mut cur: Cow<'a, str> = Cow::Borrowed(text);
    if config.html {
        cur = Cow::Owned(html_visible_text(&cur));
    }
    if config.nfkc {
        if let Cow::Owned(s) = nfkc(&cur) {
            cur = Cow::Owned(s);
        }
    }
    if !(config.casefold || config.strip_punctuation || config.collapse_whitespace) {
        return cur;
    }
    let mut out: Vec<u8> = Vec::with_capacity(cur.len());
    // Collapsing: a pending space is written only before the next kept character.
    let mut pending = false;
    let collapse = config.collapse_whitespace;
    let strip = config.strip_punctuation;
    let fold = config.casefold;
    let b = cur.as_bytes();
    let mut i = 0usize;
    let mut buf = [0u8; 4];
    let keep: &[bool; 128] = if strip { &KEEP_STRIP } else { &KEEP_ALL };
    while i < b.len() {
        let x = b[i];
        if x < 0x80 && keep[x as usize] {
            // A run of kept ASCII bytes is copied in one go (lowercased when folding).
            let start = i;
            while i < b.len() && b[i] < 0x80 && keep[b[i] as usize] {
                i += 1;
            }
            if pending {
                if !out.is_empty() {
                    out.push(b' ');
                }
                pending = false;
            }
            if fold {
                out.extend(b[start..i].iter().map(u8::to_ascii_lowercase));
            } else {
                out.extend_from_slice(&b[start..i]);
            }
            continue;
        }
        if x < 0x80 {
            i += 1;
            let space_like =
                x.is_ascii_whitespace() || (strip && !(x.is_ascii_alphanumeric() || x == b'_'));
            if space_like {
                if collapse {
                    pending = true;
                } else {
                    out.push(if x.is_ascii_whitespace() { x } else { b' ' });
                }
                continue;
            }
            if pending {
                if !out.is_empty() {
                    out.push(b' ');
                }
                pending = false;
            }
            out.push(if fold { x.to_ascii_lowercase() } else { x });
            continue;
        }
        let Some(c) = cur[i..].chars().next() else {
            break;
        };
        let len = c.len_utf8();
        i += len;
        if is_cjk(c) {
            if pending {
                if !out.is_empty() {
                    out.push(b' ');
                }
                pending = false;
            }
            out.extend_from_slice(&b[i - len..i]);
            continue;
        }
        let space_like = c.is_whitespace() || (strip && classify(c) == Class::Other);
        if space_like {
            if collapse {
                pending = true;
            } else {
                out.extend_from_slice(
                    if c.is_whitespace() { c } else { ' ' }
                        .encode_utf8(&mut buf)
                        .as_bytes(),
                );
            }
            continue;
        }
        if pending {
            if !out.is_empty() {
                out.push(b' ');
            }
            pending = false;
        }
        if fold && !is_cjk(c) {
            for l in c.to_lowercase() {
                out.extend_from_slice(l.encode_utf8(&mut buf).as_bytes());
            }
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    // Only whole chars were written.
    Cow::Owned(String::from_utf8(out).unwrap_or_default())
}
