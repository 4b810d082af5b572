//! The main visible text of an HTML page, without its site boilerplate.
//!
//! Two pages of one site share menus, link lists, sidebars and footers; two copies of one article
//! on two sites share only the article. [`main_text`] keeps the article:
//!
//! 1. markup that is never visible is dropped (`head`, `script`, `style`, `noscript`, `template`,
//!    `svg`, `iframe`, `object`, comments);
//! 2. when the page marks its content (`<main>`, `<article>`, `role="main"`) only that is kept;
//! 3. boilerplate containers are dropped: `nav`, `header`, `footer`, `aside`, `form`, `button`,
//!    `select`, `menu`, and elements whose `class`/`id`/`role` names navigation, menus,
//!    footers, related links, breadcrumbs, banners, comments, sharing or cookie notices (not the
//!    class/id of an `<a>`, nor the id of a section or heading), or that are marked
//!    `hidden="hidden"`/`"true"` or `aria-hidden="true"`;
//! 4. blocks whose text is mostly link text (the text of `<a href>`; link density above a
//!    limit) are dropped; the items of a list or a table row are judged together.
//!
//! The markup is read by html5ever's tokenizer (the WHATWG tokenizer: character references,
//! comments, CDATA, raw-text and script-data states, quoted attributes). Elements are then kept
//! on a tolerant open-element stack rather than a full DOM: an end tag closes up to its matching
//! open element and is ignored when none is open; a start tag ends the elements whose end tag
//! HTML lets a page leave out (`<li>` an open `<li>`, a block an open `<p>`, a cell a cell), and
//! one that cannot live in `<head>` (or non-blank text there) ends the head, as the tree builder
//! does. Text is cut into blocks at
//! block-level tags, one output line per block, whitespace runs collapsed to one space.

use std::borrow::Cow;
use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use crate::parallel as pool;

/// Default limit of [`main_text`]: a block is dropped when more than half its text is link text.
pub const DEFAULT_MAX_LINK_DENSITY: f64 = 0.5;

/// Batches with fewer bytes than this run on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// Longest tag read whole (see [`cut_long_tags`]).
const MAX_TAG_BYTES: usize = 32 * 1024;

/// All visible text of an HTML page, one line per block (boilerplate included).
pub fn visible_text(html: &str) -> String {
    join(extract(html, false), |_| true)
}

/// The main visible text of an HTML page, one line per block, without navigation, footers and
/// link lists: blocks whose link text exceeds `max_link_density` times their length are dropped.
/// A page where that leaves nothing visible (a reference page made of link lists, a page
/// whose whole body the markup calls navigation) gets its whole visible text instead: an empty
/// main text would make it a copy of every other empty page.
pub fn main_text(html: &str, max_link_density: f64) -> String {
    main_text_and_fallback(html, max_link_density).0
}

/// [`main_text`] and whether it is the page's whole visible text because the extraction left
/// nothing (what a report counts: pages whose main text could not be told apart).
pub fn main_text_and_fallback(html: &str, max_link_density: f64) -> (String, bool) {
    let blocks = extract(html, true);
    // Link and text characters of every list and table row: their items are judged together.
    // (and how many of them hold a link), and of every table cell
    let mut groups: std::collections::HashMap<usize, (usize, usize, usize)> = Default::default();
    let mut cells: std::collections::HashMap<usize, (usize, usize)> = Default::default();
    for b in blocks.iter().filter(|b| b.group != 0) {
        let g = groups.entry(b.group).or_default();
        g.0 += b.link_chars;
        g.1 += b.chars;
        g.2 += usize::from(b.link_chars > 0);
        let c = cells.entry(b.cell).or_default();
        c.0 += b.link_chars;
        c.1 += b.chars;
    }
    // A list item goes with its list; a table cell stays when its row is not mostly link text,
    // or when the cell's own text is not and is at least as long as a link of its row on
    // average (a layout table's article beside a column of links; not a date beside a post's
    // title).
    let passes = |links: usize, chars: usize| links as f64 <= max_link_density * chars as f64;
    let main = join(blocks, |b| {
        if b.group == 0 {
            return passes(b.link_chars, b.chars);
        }
        let (links, chars, linked) = groups[&b.group];
        let (cell_links, cell_chars) = cells[&b.cell];
        passes(links, chars)
            || (b.row
                && b.cell != 0
                && passes(cell_links, cell_chars)
                && (cell_chars - cell_links) * linked.max(1) >= links)
    });
    if main.trim().is_empty() {
        let all = visible_text(html);
        if !all.trim().is_empty() {
            return (all, true);
        }
    }
    (main, false)
}

/// Of many pages, in order, whether [`main_text`] fell back to the visible text (parallel like
/// [`main_text_many`]).
pub fn fell_back_many<S: AsRef<str> + Sync>(pages: &[S], max_link_density: f64) -> Vec<bool> {
    let bytes: usize = pages.iter().map(|p| p.as_ref().len()).sum();
    let wanted = pages.len() >= 2 && bytes >= PARALLEL_MIN_BYTES;
    pool::map(pages, wanted, 4, |p| {
        main_text_and_fallback(p.as_ref(), max_link_density).1
    })
}

/// [`main_text`] of many pages, in order; parallel (the fork-safe pool of the fingerprint
/// engine) for large batches, sequential when `NEARDUP_NUM_THREADS=1`.
pub fn main_text_many<S: AsRef<str> + Sync>(pages: &[S], max_link_density: f64) -> Vec<String> {
    let bytes: usize = pages.iter().map(|p| p.as_ref().len()).sum();
    let wanted = pages.len() >= 2 && bytes >= PARALLEL_MIN_BYTES;
    pool::map(pages, wanted, 4, |p| {
        main_text(p.as_ref(), max_link_density)
    })
}

/// [`visible_text`] of many pages, in order (parallel like [`main_text_many`]).
pub fn visible_text_many<S: AsRef<str> + Sync>(pages: &[S]) -> Vec<String> {
    let bytes: usize = pages.iter().map(|p| p.as_ref().len()).sum();
    let wanted = pages.len() >= 2 && bytes >= PARALLEL_MIN_BYTES;
    pool::map(pages, wanted, 4, |p| visible_text(p.as_ref()))
}

/// One block of text: collapsed text, its length and link-text length in characters, whether
/// it lies in the page's marked main content, and the list or table row it is an item of.
struct Block {
    text: String,
    chars: usize,
    link_chars: usize,
    in_main: bool,
    /// The innermost `ul`/`ol`/`dl`/`tr` open around the block (numbered from 1 in document
    /// order), 0 for none: the link density of a list or a row is that of all its items, so a
    /// table cell or list item that is one link (a package name in a table of packages, a term
    /// in a glossary) stays with its row, while a list of links goes whole.
    group: usize,
    /// The group is a table row.
    row: bool,
    /// The innermost `td`/`th` open around the block (numbered from 1), 0 for none.
    cell: usize,
}

fn join(blocks: Vec<Block>, keep: impl Fn(&Block) -> bool) -> String {
    let mut out = String::new();
    for b in blocks.iter().filter(|b| keep(b)) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&b.text);
    }
    out
}

fn extract(html: &str, drop_boilerplate: bool) -> Vec<Block> {
    let sink = Sink {
        state: RefCell::new(State::new(drop_boilerplate)),
    };
    let tok = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(&cut_long_tags(html)));
    // No sink result asks to suspend (no scripts run), so one feed reads everything.
    let _ = tok.feed(&input);
    tok.end();
    let state = tok.sink.state.into_inner();
    let mut blocks = state.blocks;
    if drop_boilerplate && state.saw_main && blocks.iter().any(|b| b.in_main) {
        blocks.retain(|b| b.in_main);
    }
    blocks
}

/// `html` with each tag longer than [`MAX_TAG_BYTES`] cut after its last attribute that ends
/// within the limit. The tokenizer compares each attribute of a tag with all the earlier ones
/// (a repeated name is dropped): a tag of 60,000 attributes took 4 s; no page needs one.
/// A tag is `<` or `</` and a letter, up to the first `>` outside a quoted attribute value.
fn cut_long_tags(html: &str) -> Cow<'_, str> {
    let b = html.as_bytes();
    let mut out = String::new();
    let mut copied = 0; // bytes of `html` already in `out`
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'<') {
        let start = i + off;
        let name = start + 1 + usize::from(b.get(start + 1) == Some(&b'/'));
        i = start + 1;
        if !b.get(name).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        // to the tag's end, noting the last space before the limit outside a quoted value
        let (mut quote, mut after_eq, mut cut, mut j) = (0u8, false, None, name);
        while j < b.len() {
            let c = b[j];
            if quote != 0 {
                if c == quote {
                    quote = 0;
                }
            } else if c == b'>' {
                break;
            } else if after_eq && (c == b'"' || c == b'\'') {
                quote = c;
                after_eq = false;
            } else if c == b'=' {
                after_eq = true;
            } else if c.is_ascii_whitespace() {
                if j - start <= MAX_TAG_BYTES {
                    cut = Some(j);
                }
            } else {
                after_eq = false;
            }
            j += 1;
        }
        if j - start > MAX_TAG_BYTES {
            match cut {
                Some(at) => {
                    out.push_str(&html[copied..at]);
                    out.push('>');
                }
                None => out.push_str(&html[copied..start]), // (a name that long: dropped)
            }
            copied = (j + 1).min(b.len());
        }
        i = j.max(i);
    }
    if copied == 0 {
        return Cow::Borrowed(html);
    }
    out.push_str(&html[copied..]);
    Cow::Owned(out)
}

/// Python's `str.isspace` (what the former extractor's `str.split()` used): Rust's Unicode
/// whitespace plus the four ASCII information separators.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_block(tag: &str) -> bool {
    matches!(
        tag,
        "address"
            | "blockquote"
            | "br"
            | "dd"
            | "div"
            | "dl"
            | "dt"
            | "figcaption"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "hr"
            | "li"
            | "ol"
            | "p"
            | "pre"
            | "section"
            | "table"
            | "td"
            | "th"
            | "tr"
            | "ul"
            | "main"
            | "article"
            | "body"
            | "html"
            | "caption"
            | "summary"
            | "details"
            | "figure"
    )
}

fn is_void(tag: &str) -> bool {
    matches!(
        tag,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
            | "param"
            | "basefont"
            | "bgsound"
            | "keygen"
    )
}

/// Never visible: dropped with everything inside. `noembed`/`noframes` are raw text that
/// browsers do not show, nor a `title`, also one written in the body.
fn is_hidden(tag: &str) -> bool {
    matches!(
        tag,
        "head"
            | "title"
            | "script"
            | "style"
            | "noscript"
            | "template"
            | "svg"
            | "iframe"
            | "object"
            | "noembed"
            | "noframes"
    )
}

fn is_boiler_tag(tag: &str) -> bool {
    matches!(
        tag,
        "nav" | "header" | "footer" | "aside" | "form" | "button" | "select" | "menu"
    )
}

/// Elements allowed in `<head>`; any other start tag ends it.
fn in_head_allowed(tag: &str) -> bool {
    matches!(
        tag,
        "title"
            | "meta"
            | "link"
            | "script"
            | "style"
            | "noscript"
            | "template"
            | "base"
            | "basefont"
            | "bgsound"
            | "head"
            | "html"
    )
}

/// The tokenizer state a start tag switches to (the tree builder's choice, scripting enabled).
fn raw_kind(tag: &str) -> Option<RawKind> {
    match tag {
        "title" | "textarea" => Some(RawKind::Rcdata),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => Some(RawKind::Rawtext),
        "script" => Some(RawKind::ScriptData),
        _ => None,
    }
}

/// The tree builder's "special" elements but `address`, `div` and `p`: a `<li>`, `<dd>` or
/// `<dt>` start tag ends an open item of its kind only when none of these lies between them.
fn ends_item_search(tag: &str) -> bool {
    matches!(
        tag,
        "applet"
            | "area"
            | "article"
            | "aside"
            | "base"
            | "basefont"
            | "bgsound"
            | "blockquote"
            | "body"
            | "br"
            | "button"
            | "caption"
            | "center"
            | "col"
            | "colgroup"
            | "dd"
            | "details"
            | "dir"
            | "dl"
            | "dt"
            | "embed"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "frame"
            | "frameset"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "head"
            | "header"
            | "hgroup"
            | "hr"
            | "html"
            | "iframe"
            | "img"
            | "input"
            | "li"
            | "link"
            | "listing"
            | "main"
            | "marquee"
            | "menu"
            | "meta"
            | "nav"
            | "noembed"
            | "noframes"
            | "noscript"
            | "object"
            | "ol"
            | "param"
            | "plaintext"
            | "pre"
            | "script"
            | "search"
            | "section"
            | "select"
            | "source"
            | "style"
            | "summary"
            | "table"
            | "tbody"
            | "td"
            | "template"
            | "textarea"
            | "tfoot"
            | "th"
            | "thead"
            | "title"
            | "tr"
            | "track"
            | "ul"
            | "wbr"
            | "xmp"
            | "svg"
            | "math"
    )
}

/// Start tags that end an open `<p>` (in button scope).
fn closes_p(tag: &str) -> bool {
    matches!(
        tag,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "center"
            | "details"
            | "dialog"
            | "dir"
            | "div"
            | "dl"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "header"
            | "hgroup"
            | "main"
            | "menu"
            | "nav"
            | "ol"
            | "p"
            | "search"
            | "section"
            | "summary"
            | "ul"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "pre"
            | "listing"
            | "form"
            | "li"
            | "dd"
            | "dt"
            | "plaintext"
            | "table"
            | "hr"
            | "xmp"
    )
}

/// Whether an open element `between` keeps an end tag `name` from closing an element open
/// around it (the tree builder's scopes: a list item's, a button's, a table's).
fn bounds_scope(name: &str, between: &str) -> bool {
    match name {
        "tr" | "tbody" | "thead" | "tfoot" | "td" | "th" => {
            matches!(between, "html" | "table" | "template")
        }
        "table" => matches!(between, "html" | "template"),
        _ => {
            matches!(
                between,
                "applet"
                    | "caption"
                    | "html"
                    | "table"
                    | "td"
                    | "th"
                    | "marquee"
                    | "object"
                    | "template"
                    | "svg"
                    | "math"
            ) || (name == "li" && matches!(between, "ol" | "ul"))
                || (name == "p" && between == "button")
        }
    }
}

/// Where a start tag `name` implies the end of open elements whose end tag the page left out,
/// as the tree builder does (HTML lets `</li>`, `</p>`, `</dd>`, `</dt>`, `</td>`, `</tr>` be
/// omitted): the depth from the top of the open elements (`open`, innermost first) of the
/// outermost element it ends, all those above it ending with it; None when it ends none.
fn implied_end<'a>(
    name: &str,
    open: impl Iterator<Item = &'a str> + Clone,
    is_open: impl Fn(&str) -> bool,
) -> Option<usize> {
    // The first element of `targets` from the top, unless one of `stops` comes first.
    let find = |targets: &[&str], stops: &dyn Fn(&str) -> bool| {
        if !targets.iter().any(|t| is_open(t)) {
            return None;
        }
        for (depth, tag) in open.clone().enumerate() {
            if targets.contains(&tag) {
                return Some(depth);
            }
            if stops(tag) {
                return None;
            }
        }
        None
    };
    let table_scope = |t: &str| matches!(t, "html" | "table" | "template" | "svg" | "math");
    let item = match name {
        "li" => find(&["li"], &ends_item_search),
        "dd" | "dt" => find(&["dd", "dt"], &ends_item_search),
        "td" | "th" => find(&["td", "th"], &|t| t == "tr" || table_scope(t)),
        "tr" => find(&["tr"], &|t| {
            matches!(t, "tbody" | "thead" | "tfoot") || table_scope(t)
        }),
        // (ends the table section open, with its rows and cells)
        "tbody" | "thead" | "tfoot" => find(&["table"], &|t| {
            matches!(t, "html" | "template" | "svg" | "math")
        })
        .and_then(|d| d.checked_sub(1)),
        _ => None,
    };
    let p = if closes_p(name) {
        let button_scope = |t: &str| {
            matches!(
                t,
                "applet"
                    | "caption"
                    | "html"
                    | "table"
                    | "td"
                    | "th"
                    | "marquee"
                    | "object"
                    | "template"
                    | "button"
                    | "svg"
                    | "math"
            )
        };
        find(&["p"], &button_scope)
    } else {
        None
    };
    // A heading start tag ends a heading that is the current element.
    let heading = |t: &str| matches!(t, "h1" | "h2" | "h3" | "h4" | "h5" | "h6");
    let h = (heading(name) && open.clone().next().is_some_and(heading)).then_some(0);
    item.max(p).max(h)
}

const BOILER_WORDS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "navheader",
    "navfooter",
    "menu",
    "footer",
    "sphinxsidebar",
    "related",
    "breadcrumb",
    "breadcrumbs",
    "banner",
    "masthead",
    "comment",
    "comments",
    "share",
    "social",
    "copyright",
    "cookie",
    "advert",
    "ads",
    "promo",
    "subscribe",
    "toc",
    "pagination",
    "pager",
];

/// A class or id value names boilerplate when one of its words (split at whitespace, `_` and
/// `-`) is a boilerplate word, compared case-insensitively. The tag and category classes of a
/// post (`tag-social-media`, `category-ads` beside `hentry`, `type-post` or `post-123`:
/// WordPress's) name its topic.
fn names_boilerplate(value: &str) -> bool {
    let post = value.split(is_space).any(is_post_class);
    value
        .split(is_space)
        .filter(|class| !(post && is_taxonomy(class)))
        .flat_map(|class| class.split(['_', '-']))
        .any(|word| {
            if word.is_empty() || word.len() > 24 {
                return false;
            }
            if word.is_ascii() {
                return BOILER_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word));
            }
            // Case-insensitive as Python's `re.I`: long s and dotless i match s and i.
            let folded: String = word
                .chars()
                .flat_map(char::to_lowercase)
                .map(|c| match c {
                    '\u{17f}' => 's',
                    '\u{131}' => 'i',
                    c => c,
                })
                .collect();
            BOILER_WORDS.contains(&folded.as_str())
        })
}

fn starts_with_ci(class: &str, prefix: &str) -> bool {
    class
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

fn is_taxonomy(class: &str) -> bool {
    starts_with_ci(class, "tag-") || starts_with_ci(class, "category-")
}

/// A class that marks a post: `hentry`, `type-*`, `post-<number>`.
fn is_post_class(class: &str) -> bool {
    class.eq_ignore_ascii_case("hentry")
        || starts_with_ci(class, "type-")
        || (starts_with_ci(class, "post-")
            && class.len() > 5
            && class[5..].bytes().all(|b| b.is_ascii_digit()))
}

fn is_boiler_role(value: &str) -> bool {
    let v = value.trim_matches(is_space).to_lowercase();
    matches!(
        v.as_str(),
        "navigation" | "banner" | "contentinfo" | "complementary" | "search"
    )
}

/// How many elements of each name are open (the tree builder's scope searches walk the open
/// elements; a page of many unclosed ones made each such walk long: asking the tally first
/// keeps the reading linear).
#[derive(Default)]
struct Tally(std::collections::HashMap<String, u32>);

impl Tally {
    fn add(&mut self, tag: &str) {
        *self.0.entry(tag.to_string()).or_default() += 1;
    }

    fn remove(&mut self, tag: &str) {
        if let Some(n) = self.0.get_mut(tag) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(tag);
            }
        }
    }

    fn has(&self, tag: &str) -> bool {
        self.0.contains_key(tag)
    }
}

struct Open {
    tag: String,
    /// A list or table row: the [`Block::group`] of the blocks inside it.
    group: usize,
    /// A table cell: the [`Block::cell`] of the blocks inside it.
    cell: usize,
    boiler: bool,
    main: bool,
    /// An `<a>` with an `href`: a hyperlink, whose text is link text. An `<a>` without one is a
    /// placeholder or a fragment target (`<a id=x>`, `<a name=x>`), its text ordinary text.
    link: bool,
}

/// An element whose content is dropped whole (hidden or boilerplate): its tokens are only read
/// to find where it ends and to keep the tokenizer in the right raw-text state. It ends at its
/// own end tag, at an end tag of an element open around it, or where a start tag implies its
/// end (`<li>` ends a skipped `<li class=share>` whose `</li>` is left out, `<h2>` a skipped
/// `<p>`): the elements opened in it are kept apart for that. Blocks do not break inside it.
struct Skip {
    tag: String,
    /// `svg`/`math`: self-closing syntax closes an element there.
    foreign: bool,
    /// The elements open inside it (in `head`: head content ends at the first start tag that
    /// cannot live in a head, or non-blank text, while none is open), and their tally.
    inner: Vec<String>,
    tally: Tally,
}

impl Skip {
    fn new(tag: &str, foreign: bool) -> Self {
        Skip {
            tag: tag.to_string(),
            foreign,
            inner: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// Close the inner element at index `i` and those opened in it.
    fn close_inner(&mut self, i: usize) {
        for t in self.inner.drain(i..) {
            self.tally.remove(&t);
        }
    }
}

struct State {
    drop: bool,
    /// An XHTML document (an XML declaration before the first tag, or the XHTML namespace on
    /// `<html>`): self-closing syntax closes any element, as its author's XML meant
    /// (`<a id="x"/>`, `<script src="x"/>`, `<div class="nav"/>` are empty).
    xhtml: bool,
    /// No start tag seen yet (an XML declaration only counts before the first tag).
    at_start: bool,
    stack: Vec<Open>,
    /// The names on `stack`.
    open: Tally,
    hidden_depth: usize,
    main_depth: usize,
    link_depth: usize,
    /// `<a>` elements on the stack (with or without `href`).
    anchors: usize,
    foreign_depth: usize,
    skip: Option<Skip>,
    saw_main: bool,
    blocks: Vec<Block>,
    /// Text of the current block, as read (collapsed when the block ends).
    parts: String,
    link_chars: usize,
    block_in_main: bool,
    /// Groups opened so far; the innermost open one.
    groups_opened: usize,
    group: usize,
    /// Cells opened so far; the innermost open one.
    cells_opened: usize,
    cell: usize,
    /// Of every group opened, whether it is a table row.
    group_rows: Vec<bool>,
    /// Character tokens since the last other token: one piece of text between two tags.
    run: String,
}

impl State {
    fn new(drop: bool) -> Self {
        State {
            drop,
            xhtml: false,
            at_start: true,
            stack: Vec::new(),
            open: Tally::default(),
            hidden_depth: 0,
            main_depth: 0,
            link_depth: 0,
            anchors: 0,
            foreign_depth: 0,
            skip: None,
            saw_main: false,
            blocks: Vec::new(),
            parts: String::new(),
            link_chars: 0,
            block_in_main: false,
            groups_opened: 0,
            group: 0,
            cells_opened: 0,
            cell: 0,
            group_rows: Vec::new(),
            run: String::new(),
        }
    }

    fn flush(&mut self) {
        if !self.parts.is_empty() {
            let mut text = String::with_capacity(self.parts.len());
            let mut chars = 0usize;
            for word in self.parts.split(is_space).filter(|w| !w.is_empty()) {
                if !text.is_empty() {
                    text.push(' ');
                    chars += 1;
                }
                text.push_str(word);
                chars += word.chars().count();
            }
            if !text.is_empty() {
                self.blocks.push(Block {
                    text,
                    chars,
                    link_chars: self.link_chars,
                    in_main: self.block_in_main,
                    group: self.group,
                    row: self.group != 0 && self.group_rows[self.group - 1],
                    cell: self.cell,
                });
            }
            self.parts.clear();
        }
        self.link_chars = 0;
        self.block_in_main = self.main_depth > 0;
    }

    fn is_boiler(&self, tag: &str, attrs: &[html5ever::Attribute]) -> bool {
        // The class or id of an `<a>` names a link or the place it marks, never a container of
        // the page's furniture (links are judged by link density). The id of a section or a
        // heading is a fragment target that documentation generators derive from the heading's
        // text (Sphinx's `<section id="file-menu-shell-and-editor">`, DocBook's
        // `<a id="_the_menu_system"/>`, Markdown's `<h2 id="comments">`): it names the topic.
        // The page's own containers are never furniture, whatever their classes say
        // (WordPress's `<body class="... has-nav-menu">`).
        let page = matches!(tag, "html" | "body");
        let class_names = tag != "a" && !page;
        let id_names = !page
            && !matches!(
                tag,
                "a" | "section" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"
            );
        if is_hidden(tag) {
            return true;
        }
        if !self.drop {
            return false;
        }
        if is_boiler_tag(tag) {
            return true;
        }
        attrs.iter().any(|a| {
            let value: &str = &a.value;
            if value.is_empty() {
                return false;
            }
            match &*a.name.local {
                "class" => class_names && names_boilerplate(value),
                "id" => id_names && names_boilerplate(value),
                "role" => is_boiler_role(value),
                "hidden" | "aria-hidden" => {
                    let v = value.to_lowercase();
                    v == "true" || v == "hidden"
                }
                _ => false,
            }
        })
    }

    /// The text between two tags: what the former extractor's `handle_data` got.
    fn take_run(&mut self) {
        if self.run.is_empty() {
            return;
        }
        let run = std::mem::take(&mut self.run);
        let blank = run.chars().all(is_space);
        if let Some(sk) = &self.skip {
            if sk.tag == "head" && sk.inner.is_empty() && !blank {
                // Text cannot live in <head>: the tree builder ends the head here.
                self.end_tag("head");
            }
        }
        if self.skip.is_none() {
            self.data(&run);
        }
        self.run = run;
        self.run.clear();
    }

    fn data(&mut self, text: &str) {
        if self.hidden_depth > 0 {
            return;
        }
        if self.main_depth > 0 {
            self.block_in_main = true;
        }
        self.parts.push_str(text);
        if self.link_depth > 0 {
            self.link_chars += text.trim_matches(is_space).chars().count();
        }
    }

    fn start_tag(&mut self, tag: &Tag) -> Option<RawKind> {
        let name: &str = &tag.name;
        if self.at_start {
            self.at_start = false;
            if name == "html" {
                self.xhtml |= tag.attrs.iter().any(|a| {
                    &*a.name.local == "xmlns"
                        && a.value.trim_matches(is_space) == "http://www.w3.org/1999/xhtml"
                });
            }
        }
        // Self-closing syntax closes the element: always in foreign content (`svg`, `math`),
        // and in an XHTML document for every element.
        let xml_closed = tag.self_closing && self.xhtml;
        if let Some(sk) = &mut self.skip {
            if sk.tag == "head" && sk.inner.is_empty() && !in_head_allowed(name) {
                // A body element ends a head that was never closed.
                self.end_tag("head");
            } else {
                let closed = xml_closed || (tag.self_closing && sk.foreign);
                let names = sk
                    .inner
                    .iter()
                    .rev()
                    .chain(self.stack.iter().rev().map(|o| &o.tag));
                // (foreign content has no end tags to imply)
                let end = if sk.foreign {
                    None
                } else {
                    let (inner, open) = (&sk.tally, &self.open);
                    implied_end(name, names.map(String::as_str), |t| {
                        inner.has(t) || open.has(t)
                    })
                };
                match end {
                    Some(depth) if depth >= sk.inner.len() => {
                        // The start tag ends the skipped element (or one open around it).
                        let at = self.stack.len() - 1 - (depth - sk.inner.len());
                        self.skip = None;
                        self.close_at(at);
                    }
                    end => {
                        if let Some(depth) = end {
                            sk.close_inner(sk.inner.len() - 1 - depth);
                        }
                        if !is_void(name) && name != "head" && !closed {
                            sk.inner.push(name.to_string());
                            sk.tally.add(name);
                        }
                        return if sk.foreign || closed {
                            None
                        } else {
                            raw_kind(name)
                        };
                    }
                }
            }
        }
        if self.foreign_depth == 0 {
            let open = self.stack.iter().rev().map(|o| o.tag.as_str());
            if let Some(depth) = implied_end(name, open, |t| self.open.has(t)) {
                self.close_at(self.stack.len() - 1 - depth);
            }
        }
        if is_block(name) {
            self.flush();
        }
        if is_void(name) || xml_closed || (tag.self_closing && self.foreign_depth > 0) {
            return None;
        }
        if name == "a" {
            self.close_open_link();
        }
        let boiler = self.is_boiler(name, &tag.attrs);
        let main = matches!(name, "main" | "article")
            || tag
                .attrs
                .iter()
                .any(|a| &*a.name.local == "role" && a.value.to_lowercase() == "main");
        if boiler {
            self.hidden_depth += 1;
        }
        if main {
            self.main_depth += 1;
            self.saw_main = true;
            self.block_in_main = true;
        }
        let link = name == "a" && tag.attrs.iter().any(|a| &*a.name.local == "href");
        let group = if matches!(name, "ul" | "ol" | "dl" | "tr") {
            self.groups_opened += 1;
            self.group_rows.push(name == "tr");
            self.groups_opened
        } else {
            0
        };
        if group != 0 {
            self.group = group;
        }
        let cell = if matches!(name, "td" | "th") {
            self.cells_opened += 1;
            self.cell = self.cells_opened;
            self.cell
        } else {
            0
        };
        if link {
            self.link_depth += 1;
        }
        if name == "a" {
            self.anchors += 1;
        }
        if matches!(name, "svg" | "math") {
            self.foreign_depth += 1;
        }
        self.open.add(name);
        self.stack.push(Open {
            tag: name.to_string(),
            group,
            cell,
            boiler,
            main,
            link,
        });
        if self.foreign_depth > 0 {
            if boiler {
                self.skip = Some(Skip::new(name, true));
            }
            return None;
        }
        if boiler {
            self.skip = Some(Skip::new(name, false));
        }
        raw_kind(name)
    }

    /// An end tag while an element is skipped: it closes an element opened inside the skipped
    /// one, or ends the skip when it is the skipped element's own or that of an element open
    /// around it; any other is ignored.
    fn skipped_end_tag(&mut self, name: &str) {
        let Some(sk) = &mut self.skip else {
            return;
        };
        if sk.tally.has(name) {
            if let Some(i) = sk.inner.iter().rposition(|t| t == name) {
                sk.close_inner(i);
            }
            return;
        }
        if !self.open.has(name) {
            return;
        }
        // An end tag of an element open around the skipped one ends the skip, unless an element
        // between them bounds its scope (a stray </li> in a skipped <ul>, a </div> in a
        // skipped <table>: the tree builder ignores those).
        let between = sk
            .inner
            .iter()
            .rev()
            .chain(self.stack.iter().rev().map(|o| &o.tag));
        for tag in between {
            if tag == name {
                self.skip = None;
                self.end_tag(name);
                return;
            }
            if bounds_scope(name, tag) {
                return;
            }
        }
    }

    fn pop_effects(&mut self, o: &Open) {
        if o.boiler {
            self.hidden_depth -= 1;
        }
        if o.main {
            self.main_depth -= 1;
        }
        if o.link {
            self.link_depth -= 1;
        }
        if o.tag == "a" {
            self.anchors -= 1;
        }
        if matches!(o.tag.as_str(), "svg" | "math") {
            self.foreign_depth -= 1;
        }
        if o.group != 0 {
            self.group = self
                .stack
                .iter()
                .rev()
                .map(|o| o.group)
                .find(|&g| g != 0)
                .unwrap_or(0);
        }
        if o.cell != 0 {
            self.cell = self
                .stack
                .iter()
                .rev()
                .map(|o| o.cell)
                .find(|&c| c != 0)
                .unwrap_or(0);
        }
    }

    /// An `<a>` start tag ends the `<a>` still open in the same cell or object (the tree
    /// builder's adoption agency: links do not nest, so a forgotten `</a>` or an HTML reading of
    /// XHTML's `<a id="x"/>` ends at the next link). The elements opened inside it stay open.
    fn close_open_link(&mut self) {
        if self.anchors == 0 {
            return;
        }
        for i in (0..self.stack.len()).rev() {
            match self.stack[i].tag.as_str() {
                "a" => {
                    let o = self.stack.remove(i);
                    self.open.remove(&o.tag);
                    self.pop_effects(&o);
                    return;
                }
                "td" | "th" | "caption" | "object" | "applet" | "marquee" | "template" => return,
                _ => {}
            }
        }
    }

    fn end_tag(&mut self, name: &str) {
        if self
            .skip
            .as_ref()
            .is_some_and(|sk| sk.tag == "head" && name == "head")
        {
            self.skip = None;
        }
        if is_void(name) {
            if is_block(name) {
                self.flush();
            }
            return;
        }
        if !self.open.has(name) {
            if name == "p" {
                self.flush(); // (a </p> with none open: the browser makes an empty paragraph)
            }
            return;
        }
        if let Some(i) = self.stack.iter().rposition(|o| o.tag == name) {
            self.close_at(i);
        }
    }

    /// Closes the open element at stack index `i` and every element opened inside it.
    fn close_at(&mut self, i: usize) {
        if self.stack[i..].iter().any(|o| is_block(&o.tag)) {
            self.flush();
        }
        let closed: Vec<Open> = self.stack.drain(i..).collect();
        for o in closed.iter().rev() {
            self.open.remove(&o.tag);
            self.pop_effects(o);
        }
        self.block_in_main = self.main_depth > 0;
    }
}

struct Sink {
    state: RefCell<State>,
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut st = self.state.borrow_mut();
        match token {
            Token::CharacterTokens(t) => st.run.push_str(&t),
            // NUL in text is dropped, as the tree builder drops it in the body.
            Token::NullCharacterToken | Token::ParseError(_) => {}
            Token::TagToken(tag) => {
                st.take_run();
                match tag.kind {
                    TagKind::StartTag => {
                        if let Some(kind) = st.start_tag(&tag) {
                            return TokenSinkResult::RawData(kind);
                        }
                    }
                    TagKind::EndTag if st.skip.is_some() => st.skipped_end_tag(&tag.name),
                    TagKind::EndTag => st.end_tag(&tag.name),
                }
            }
            Token::CommentToken(c) => {
                // `<?xml ...?>` is read as a bogus comment "?xml ...".
                if st.at_start && c.starts_with("?xml") && c[4..].starts_with(is_space) {
                    st.xhtml = true;
                }
                st.take_run();
            }
            Token::DoctypeToken(_) => st.take_run(),
            Token::EOFToken => {
                st.take_run();
                st.flush();
            }
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests;
