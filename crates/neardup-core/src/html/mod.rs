//! The main visible text of an HTML page, without its site boilerplate.
//!
//! Two pages of one site share menus, link lists, sidebars and footers; two copies of one article
//! on two sites share only the article. [`main_text`] keeps the article:
//!
//! 1. markup that is never visible is dropped (`head`, `script`, `style`, `noscript`, `template`,
//!    `svg`, `iframe`, `object`, comments);
//! 2. when the page marks its content (`<main>`, `<article>`, `role="main"`) only that is kept;
//! 3. boilerplate containers are dropped: `nav`, `header`, `footer`, `aside`, `form`, `button`,
//!    `select`, `menu`, and elements whose `class`/`id`/`role` names navigation, menus, sidebars,
//!    footers, related links, breadcrumbs, banners, comments, sharing or cookie notices, or that
//!    are marked `hidden="hidden"`/`"true"` or `aria-hidden="true"`;
//! 4. blocks whose text is mostly link text (link density above a limit) are dropped.
//!
//! The markup is read by html5ever's tokenizer (the WHATWG tokenizer: character references,
//! comments, CDATA, raw-text and script-data states, quoted attributes). Elements are then kept
//! on a tolerant open-element stack rather than a full DOM: an end tag closes up to its matching
//! open element and is ignored when none is open; a start tag that cannot live in `<head>` (or
//! non-blank text there) ends the head, as the tree builder does. Text is cut into blocks at
//! block-level tags, one output line per block, whitespace runs collapsed to one space.

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
    let main = join(extract(html, true), |b| {
        b.link_chars as f64 <= max_link_density * b.chars as f64
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

/// One block of text: collapsed text, its length and link-text length in characters, and
/// whether it lies in the page's marked main content.
struct Block {
    text: String,
    chars: usize,
    link_chars: usize,
    in_main: bool,
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
    input.push_back(StrTendril::from_slice(html));
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
/// browsers do not show.
fn is_hidden(tag: &str) -> bool {
    matches!(
        tag,
        "head"
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

const BOILER_WORDS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "navheader",
    "navfooter",
    "menu",
    "footer",
    "sidebar",
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
/// `-`) is a boilerplate word, compared case-insensitively.
fn names_boilerplate(value: &str) -> bool {
    value
        .split(|c: char| is_space(c) || c == '_' || c == '-')
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

fn is_boiler_role(value: &str) -> bool {
    let v = value.trim_matches(is_space).to_lowercase();
    matches!(
        v.as_str(),
        "navigation" | "banner" | "contentinfo" | "complementary" | "search"
    )
}

struct Open {
    tag: String,
    boiler: bool,
    main: bool,
}

/// An element whose content is dropped whole (hidden or boilerplate): its tokens are only read
/// to find its end tag (same-name elements nested in it are counted) and to keep the tokenizer
/// in the right raw-text state. Blocks do not break inside it.
struct Skip {
    tag: String,
    depth: usize,
    /// `svg`/`math`: self-closing syntax closes an element there.
    foreign: bool,
    /// Inside `head`: the elements open in it (head content ends at the first start tag that
    /// cannot live in a head, or non-blank text, while none is open).
    head_inner: Vec<String>,
}

struct State {
    drop: bool,
    stack: Vec<Open>,
    hidden_depth: usize,
    main_depth: usize,
    link_depth: usize,
    foreign_depth: usize,
    skip: Option<Skip>,
    saw_main: bool,
    /// Before any body content: a `<title>` there belongs to the (possibly implied) head.
    before_body: bool,
    blocks: Vec<Block>,
    /// Text of the current block, as read (collapsed when the block ends).
    parts: String,
    link_chars: usize,
    block_in_main: bool,
    /// Character tokens since the last other token: one piece of text between two tags.
    run: String,
}

impl State {
    fn new(drop: bool) -> Self {
        State {
            drop,
            stack: Vec::new(),
            hidden_depth: 0,
            main_depth: 0,
            link_depth: 0,
            foreign_depth: 0,
            skip: None,
            saw_main: false,
            before_body: true,
            blocks: Vec::new(),
            parts: String::new(),
            link_chars: 0,
            block_in_main: false,
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
                });
            }
            self.parts.clear();
        }
        self.link_chars = 0;
        self.block_in_main = self.main_depth > 0;
    }

    fn is_boiler(&self, tag: &str, attrs: &[html5ever::Attribute]) -> bool {
        if is_hidden(tag) || (tag == "title" && self.before_body) {
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
                "class" | "id" => names_boilerplate(value),
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
            if sk.tag == "head" && sk.head_inner.is_empty() && !blank {
                // Text cannot live in <head>: the tree builder ends the head here.
                self.end_tag("head");
            }
        }
        if self.skip.is_none() {
            if !blank {
                self.before_body = false;
            }
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
        if let Some(sk) = &mut self.skip {
            if sk.tag == "head" && sk.head_inner.is_empty() && !in_head_allowed(name) {
                // A body element ends a head that was never closed.
                self.end_tag("head");
            } else {
                if name == sk.tag && name != "head" && !(tag.self_closing && sk.foreign) {
                    sk.depth += 1;
                }
                if sk.tag == "head" && !is_void(name) && name != "head" {
                    sk.head_inner.push(name.to_string());
                }
                return if sk.foreign { None } else { raw_kind(name) };
            }
        }
        if self.before_body && !in_head_allowed(name) {
            self.before_body = false;
        }
        if is_block(name) {
            self.flush();
        }
        if is_void(name) || (tag.self_closing && self.foreign_depth > 0) {
            return None;
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
        match name {
            "a" => self.link_depth += 1,
            "svg" | "math" => self.foreign_depth += 1,
            _ => {}
        }
        self.stack.push(Open {
            tag: name.to_string(),
            boiler,
            main,
        });
        if self.foreign_depth > 0 {
            if boiler {
                self.skip = Some(Skip {
                    tag: name.to_string(),
                    depth: 1,
                    foreign: true,
                    head_inner: Vec::new(),
                });
            }
            return None;
        }
        if boiler {
            self.skip = Some(Skip {
                tag: name.to_string(),
                depth: 1,
                foreign: false,
                head_inner: Vec::new(),
            });
        }
        raw_kind(name)
    }

    /// An end tag while an element is skipped: only its own end tag matters.
    fn skipped_end_tag(&mut self, name: &str) {
        let Some(sk) = &mut self.skip else {
            return;
        };
        if name == sk.tag {
            sk.depth -= 1;
            if sk.depth == 0 {
                self.skip = None;
                self.end_tag(name);
            }
        } else if let Some(i) = sk.head_inner.iter().rposition(|t| t == name) {
            sk.head_inner.truncate(i);
        }
    }

    fn pop_effects(&mut self, o: &Open) {
        if o.boiler {
            self.hidden_depth -= 1;
        }
        if o.main {
            self.main_depth -= 1;
        }
        match o.tag.as_str() {
            "a" => self.link_depth -= 1,
            "svg" | "math" => self.foreign_depth -= 1,
            _ => {}
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
        let Some(i) = self.stack.iter().rposition(|o| o.tag == name) else {
            return;
        };
        if is_block(name) || self.stack[i..].iter().any(|o| is_block(&o.tag)) {
            self.flush();
        }
        let closed: Vec<Open> = self.stack.drain(i..).collect();
        for o in closed.iter().rev() {
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
            Token::CommentToken(_) | Token::DoctypeToken(_) => st.take_run(),
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
