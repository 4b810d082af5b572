//! Seed 000 (Java `mysimhash`) tokenising, over UTF-16 units as Java does.
//!
//! Java splits with one regex that is an alternation of literals; Java tries the alternatives
//! left to right at each position and takes the first that matches (leftmost-first), so e.g.
//! `/` wins over `/html` and `<` over `<script`. The literals are matched here in the same order.
//! `String.split` drops empty pieces at the end and the loop skips the empty ones elsewhere, so
//! only non-empty pieces count. A piece holding any unit in the five "Chinese" ranges is split
//! into single UTF-16 units (so a surrogate pair becomes two features).
//! Java's fixed `String[100000]` token array throws past 100000 tokens; here there is no limit
//! (the value is what Java would give with a larger array).

/// The separator literals in the order of the Java regex.
const SEPARATORS: &[&str] = &[
    "=",
    ".",
    "。",
    "，",
    "\"",
    "'",
    "[",
    "]",
    "！",
    "!",
    "?",
    "/",
    "\n",
    "\r",
    " ",
    "<html",
    "/html",
    "<h1",
    "</h1>",
    "<h2",
    "/h2",
    "<h3",
    "/h3",
    "<ul",
    "/ul",
    "<br",
    "/br",
    "<head",
    "/head",
    "<li",
    "/li",
    "<div",
    "/div",
    "<a",
    "/a",
    "<p",
    "/p",
    "<body",
    "/body",
    "-_-",
    ")",
    "(",
    ",",
    "{",
    "}",
    ";",
    ":",
    "--",
    "<",
    ">",
    "<script",
    "/scirpt",
    "<title",
    "/title",
    "<pre",
    "</pre>",
    "<meta",
    "</meta>",
    "<header",
    "</header>",
    "<span",
    "/span",
    "_",
    "#",
    "&",
    "%",
    "-",
];

/// For each first unit (all separators start with a BMP char), its candidates in regex order.
struct Splitter {
    /// (first unit, list of candidate literals as UTF-16)
    by_first: Vec<(u16, Vec<Vec<u16>>)>,
    /// Bitmap of ASCII first units for a quick reject.
    ascii_first: u128,
}

fn splitter() -> &'static Splitter {
    static S: std::sync::OnceLock<Splitter> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let mut by_first: Vec<(u16, Vec<Vec<u16>>)> = Vec::new();
        let mut ascii_first = 0u128;
        for sep in SEPARATORS {
            let units: Vec<u16> = sep.encode_utf16().collect();
            let first = units[0];
            if first < 128 {
                ascii_first |= 1u128 << first;
            }
            match by_first.iter_mut().find(|(f, _)| *f == first) {
                Some((_, list)) => list.push(units),
                None => by_first.push((first, vec![units])),
            }
        }
        Splitter {
            by_first,
            ascii_first,
        }
    })
}

/// Length of the separator matching at `text[i..]`, if any (leftmost-first alternative).
#[inline]
fn separator_at(s: &Splitter, text: &[u16], i: usize) -> usize {
    let c = text[i];
    if c < 128 {
        if s.ascii_first & (1u128 << c) == 0 {
            return 0;
        }
    } else if c != 0x3002 && c != 0xFF0C && c != 0xFF01 {
        return 0;
    }
    for (first, list) in &s.by_first {
        if *first == c {
            for lit in list {
                if text[i..].starts_with(lit) {
                    return lit.len();
                }
            }
            return 0;
        }
    }
    0
}

/// Java `isChinese`: any unit in U+4E00–9FA5, FF00–FFEF, 2E80–2EFF, 3000–303F, 31C0–31EF.
#[inline]
pub fn is_chinese_unit(c: u16) -> bool {
    matches!(c, 0x4E00..=0x9FA5 | 0xFF00..=0xFFEF | 0x2E80..=0x2EFF | 0x3000..=0x303F | 0x31C0..=0x31EF)
}

/// Calls `emit` with every feature (as UTF-16 units) in document order, duplicates included.
pub fn for_each_feature<'a>(text: &'a [u16], mut emit: impl FnMut(&'a [u16])) {
    let s = splitter();
    let mut piece_start = 0usize;
    let mut i = 0usize;
    let n = text.len();
    let piece = |a: usize, b: usize, emit: &mut dyn FnMut(&'a [u16])| {
        if b > a {
            let p = &text[a..b];
            if p.iter().any(|&c| is_chinese_unit(c)) {
                for k in a..b {
                    emit(&text[k..k + 1]);
                }
            } else {
                emit(p);
            }
        }
    };
    while i < n {
        let len = separator_at(s, text, i);
        if len > 0 {
            piece(piece_start, i, &mut emit);
            i += len;
            piece_start = i;
        } else {
            i += 1;
        }
    }
    piece(piece_start, n, &mut emit);
}
