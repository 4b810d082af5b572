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

/// ASCII and CJK unified ideographs are NFKC-stable starters that never compose with a
/// neighbour, so NFKC can be applied to the runs between them alone.
#[inline]
fn nfkc_inert(c: char) -> bool {
    (c as u32) < 0x80 || ('\u{4e00}'..='\u{9fff}').contains(&c)
}

/// NFKC with a fast path: only the stretches holding other characters go through the
/// normaliser (a stable char right before such a stretch joins it, as it may compose with it).
pub fn nfkc(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| !nfkc_inert(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.char_indices().peekable();
    let mut slow_start: Option<usize> = None;
    let mut fast_start = 0usize;
    while let Some((i, c)) = chars.next() {
        let next_inert = chars.peek().is_none_or(|&(_, n)| nfkc_inert(n));
        if nfkc_inert(c) && next_inert {
            if let Some(s) = slow_start.take() {
                out.extend(text[s..i].nfkc());
                fast_start = i;
            }
        } else if slow_start.is_none() {
            out.push_str(&text[fast_start..i]);
            slow_start = Some(i);
        }
    }
    match slow_start {
        Some(s) => out.extend(text[s..].nfkc()),
        None => out.push_str(&text[fast_start..]),
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

#[inline]
pub fn classify(c: char) -> Class {
    if c.is_ascii() {
        return if c.is_ascii_alphanumeric() || c == '_' {
            Class::Word
        } else if c.is_ascii_whitespace() {
            Class::Space
        } else {
            Class::Other
        };
    }
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
    let mut out = String::with_capacity(cur.len());
    // Collapsing: pending space is emitted only before the next kept character.
    let mut pending_space = false;
    let push = |out: &mut String, c: char, pending: &mut bool| {
        if *pending {
            if !out.is_empty() {
                out.push(' ');
            }
            *pending = false;
        }
        out.push(c);
    };
    for c in cur.chars() {
        let space_like = if c.is_ascii() {
            c.is_ascii_whitespace()
                || (config.strip_punctuation && !(c.is_ascii_alphanumeric() || c == '_'))
        } else {
            c.is_whitespace() || (config.strip_punctuation && classify(c) == Class::Other)
        };
        if space_like {
            if config.collapse_whitespace {
                pending_space = true;
            } else {
                out.push(if c.is_whitespace() { c } else { ' ' });
            }
            continue;
        }
        if config.casefold {
            if c.is_ascii() {
                push(&mut out, c.to_ascii_lowercase(), &mut pending_space);
            } else {
                for l in c.to_lowercase() {
                    push(&mut out, l, &mut pending_space);
                }
            }
        } else {
            push(&mut out, c, &mut pending_space);
        }
    }
    Cow::Owned(out)
}
