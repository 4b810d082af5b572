use super::*;

fn main0(html: &str) -> String {
    main_text(html, DEFAULT_MAX_LINK_DENSITY)
}

#[test]
fn keeps_main_and_drops_boilerplate() {
    let page = "<!DOCTYPE html><html><head><title>t</title><style>p{}</style></head><body>\
        <header><nav><ul><li><a href=/>Home</a></li></ul></nav></header>\
        <main><h1>Title</h1><p>The article &amp; body.</p></main>\
        <div class=\"site-footer\">Copyright</div><script>var x = '</div>';</script></body></html>";
    assert_eq!(main0(page), "Title\nThe article & body.");
    assert_eq!(
        visible_text(page),
        "Home\nTitle\nThe article & body.\nCopyright"
    );
}

#[test]
fn link_dense_blocks_are_dropped() {
    let page = "<html><body><div><a href=1>one</a> <a href=2>two</a></div>\
        <p>Real paragraph with a <a href=4>link</a> inside it.</p></body></html>";
    assert_eq!(main0(page), "Real paragraph with a link inside it.");
    assert_eq!(
        main_text(page, 1.0),
        "one two\nReal paragraph with a link inside it."
    );
}

#[test]
fn class_id_role_and_hidden_attributes() {
    let page = "<body><div id=Main-Menu>menu</div><div class='x comments_box'>c</div>\
        <div class='navigate'>kept</div><div role=' Navigation '>r</div>\
        <div aria-hidden=TRUE>h</div><div hidden>shown</div><p class='\u{17f}hare'>s</p></body>";
    assert_eq!(main0(page), "kept\nshown");
    assert_eq!(visible_text(page), "menu\nc\nkept\nr\nh\nshown\ns");
}

#[test]
fn unclosed_head_ends_at_body_content() {
    assert_eq!(main0("<html><head><title>T</title><body><p>text"), "text");
    assert_eq!(
        main0("<html><head><meta charset=utf-8>Hello <b>you</b>"),
        "Hello you"
    );
    assert_eq!(visible_text("<title>T</title><p>x</p>"), "x");
    // (a title in the body is not shown either)
    assert_eq!(
        visible_text("<body><p>a</p><title>T</title><p>b</p>"),
        "a\nb"
    );
}

#[test]
fn raw_text_comments_and_cdata() {
    let page = "<p>a<!-- <p>hidden</p> -->b</p><script>if (a < b) document.write(\"</p>\")\
        </script><p><![CDATA[gone]]>c</p><textarea>&lt;t&gt; <b></textarea><xmp><i>x</xmp>";
    assert_eq!(visible_text(page), "ab\nc\n<t> <b><i>x");
}

#[test]
fn messy_markup_never_fails() {
    for page in [
        "",
        "<",
        "</>",
        "<p>unterminated <b>bold",
        "<div class=\"x>never closed",
        "</div></div>text</p>",
        "\u{0}<p>\u{0}nul</p>",
        "<svg><p/><text>t</text></svg>after",
    ] {
        let _ = main0(page);
        let _ = visible_text(page);
    }
    assert_eq!(main0("<p>unterminated <b>bold"), "unterminated bold");
    assert_eq!(main0("<svg><p/><text>t</text></svg>after"), "after");
}

#[test]
fn many_equals_one_by_one() {
    let pages: Vec<String> = (0..300)
        .map(|i| {
            format!(
                "<html><body><nav><a href=/>n{i}</a></nav><p>para {i} {}</p></body></html>",
                "word ".repeat(i % 50)
            )
        })
        .collect();
    let many = main_text_many(&pages, 0.5);
    let vis = visible_text_many(&pages);
    for (i, p) in pages.iter().enumerate() {
        assert_eq!(many[i], main0(p));
        assert_eq!(vis[i], visible_text(p));
    }
}

/// Where the time goes (run with `--ignored --nocapture`): the tokenizer alone vs extraction.
#[test]
#[ignore]
fn timing_tokenizer_vs_extraction() {
    struct Noop;
    impl TokenSink for Noop {
        type Handle = ();
        fn process_token(&self, _t: Token, _l: u64) -> TokenSinkResult<()> {
            TokenSinkResult::Continue
        }
    }
    let nav: String = (0..30)
        .map(|i| format!("<li><a href=\"/{i}.html\">Section title number {i} &amp; more</a></li>"))
        .collect();
    let body: String = (0..6)
        .map(|i| format!("<p>Paragraph {i} of the article, with words and words &amp; words.</p>"))
        .collect();
    let page = format!(
        "<!DOCTYPE html><html><head><title>t</title><style>body{{margin:0}}</style></head><body>\
         <header><nav><ul>{nav}</ul></nav></header><main><article><h1>T</h1>{body}</article></main>\
         <aside><ul>{nav}</ul></aside><footer><p>copyright</p></footer>\
         <script>var _track = {{page: 1}};</script></body></html>"
    );
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let tok = Tokenizer::new(Noop, TokenizerOpts::default());
        let input = BufferQueue::default();
        input.push_back(StrTendril::from_slice(&page));
        let _ = tok.feed(&input);
        tok.end();
    }
    let a = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(main_text(&page, 0.5));
    }
    let b = t.elapsed();
    let mb = (n * page.len()) as f64 / 1e6;
    println!(
        "tokenizer only {:.1} MB/s, main_text {:.1} MB/s",
        mb / a.as_secs_f64(),
        mb / b.as_secs_f64()
    );
}

#[test]
fn a_page_of_link_lists_falls_back_to_its_visible_text() {
    let page = "<html><body><nav><a href=a>Alpha</a> <a href=b>Beta</a></nav>\
                <ul><li><a href=c>qemu-img convert</a></li><li><a href=d>qemu-img info</a></li></ul>\
                </body></html>";
    let main = main_text(page, 0.5);
    assert!(
        main.contains("qemu-img convert") && main.contains("Alpha"),
        "{main:?}"
    );
    assert_eq!(main, visible_text(page));
    assert_eq!(
        main_text("<html><body><script>x()</script></body></html>", 0.5),
        ""
    );
    // a page with an article keeps only the article
    let article = "<html><body><nav><a href=a>Alpha</a></nav><p>Body text here.</p></body></html>";
    assert_eq!(main_text(article, 0.5), "Body text here.");
}

#[test]
fn xhtml_self_closing_tags_close() {
    let page = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<html><head>\
        <script src=\"x.js\"/><title>T</title></head><body><p>Intro.</p>\
        <div><h1><a id=\"_the_menu\"/>Heading</h1><div class=\"nav\"/><p>Text.</p></div>";
    assert_eq!(main0(page), "Intro.\nHeading\nText.");
    let ns = "<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><div class=nav/><p>a</p>";
    assert_eq!(main0(ns), "a");
    // In HTML "/>" is ignored: the div holds what follows.
    assert_eq!(
        main0("<html><body><p>b</p><div class=\"nav\"/><p>a</p>"),
        "b"
    );
}

#[test]
fn anchors_without_href_and_unclosed_anchors() {
    assert_eq!(
        main0("<p>Intro.</p><div><a name=x/><h2>Heading</h2><p>Text.</p></div>"),
        "Intro.\nHeading\nText."
    );
    assert_eq!(
        main0("<div><a href=/1>one<p><a href=/2>two</a> and a long sentence.</p></div>"),
        "two and a long sentence."
    );
    assert_eq!(
        main0("<a href=/1><table><tr><td><a href=/2>x</a> y</td></tr></table></a><p>p</p>"),
        "p"
    );
}

#[test]
fn topic_ids_and_sidebars_are_content() {
    let page = "<section id=file-menu><h3 id=menu>File menu</h3><p>Open.</p></section>\
        <div class=sidebar><p>A box.</p></div><div id=menu>x</div>";
    assert_eq!(main0(page), "File menu\nOpen.\nA box.");
}

#[test]
fn lists_and_rows_are_judged_whole() {
    let page = "<table><tr><td><a href=/p>libc6</a></td><td>GNU C Library: shared libs</td></tr>\
        </table><ul><li><a href=/1>Home</a></li><li><a href=/2>News</a></li><li>Blog</li></ul>";
    assert_eq!(main0(page), "libc6\nGNU C Library: shared libs");
}

#[test]
fn left_out_end_tags_end_a_skipped_element() {
    // HTML lets </li>, </p>, </dd>, </td>, </tr> be left out: the next item, block or cell
    // ends a skipped (boilerplate) one, as an end tag of an element around it does.
    let article = "<h2>Headline</h2><p>Body of the story.</p>";
    for (markup, kept) in [
        ("<ul><li class=share>Share<li>Item two</ul>", "Item two\n"),
        ("<p class=promo>Subscribe today", ""),
        ("<p class=share>Share this<div>", ""),
        (
            "<dl><dt>T<dd class=ads>Ad<dt>T2<dd>Definition</dl>",
            "T\nT2\nDefinition\n",
        ),
        (
            "<table><tr><td class=nav>Menu<td>Cell text</table>",
            "Cell text\n",
        ),
        (
            "<table><tr class=pager><td>1 2 3<tr><td>Row text</table>",
            "Row text\n",
        ),
        ("<div>By Ann <span class=social>Follow</div>", "By Ann\n"),
        (
            "<ul><li class=share><ul><li>a<li>b</ul>c<li>Item</ul>",
            "Item\n",
        ),
    ] {
        let page = format!("<body><div>Site</div>{markup}{article}</body>");
        assert_eq!(
            main0(&page),
            format!("Site\n{kept}Headline\nBody of the story."),
            "{markup}"
        );
    }
    // Outside a skip too: an item's end is implied by the next one.
    assert_eq!(
        visible_text("<p>a<ul><li>b<p>c<li>d</ul>e"),
        "a\nb\nc\nd\ne"
    );
}

#[test]
fn post_taxonomy_classes_and_article_classes_are_content() {
    let page = "<body class='tag-menu'><div class=sidebar-widget><a href=/x>Recent</a></div>\
        <article class='post-1 type-post tag-facebook-ads category-social-media'>\
        <p>The post's own text.</p></article></body>";
    assert_eq!(main0(page), "The post's own text.");
    assert_eq!(
        main0("<div class='post-7 hentry tag-ads'>Post text</div><div class='x ads'>Ad</div>"),
        "Post text"
    );
    // (without a post's class a tag- or category- class is read as any other; an article's
    // class is read too: comments are often articles)
    let page = "<p>Text.</p><div class=category-footer>Copyright</div><div class=tag-nav>n</div>\
        <article class=comment>A comment</article>";
    assert_eq!(main0(page), "Text.");
}

#[test]
fn a_layout_tables_article_cell_stays_beside_its_link_column() {
    let page = "<table><tr><td><a href=/1>Home</a><br><a href=/2>News</a><br>\
        <a href=/3>About us and our long history</a></td>\
        <td><h1>Story</h1><p>The text of the story.</p></td></tr></table>";
    assert_eq!(main0(page), "Story\nThe text of the story.");
    // (a short cell beside a row's links goes with the row: a date beside a post's title)
    let recent = "<table><tr><td><a href=/1>A post with a long title</a></td><td>2024-01-02</td>\
        </tr></table><p>Body.</p>";
    assert_eq!(main0(recent), "Body.");
}

/// How many elements are open after reading `html` (before its end).
fn open_elements(html: &str) -> usize {
    let sink = Sink {
        state: RefCell::new(State::new(true)),
    };
    let tok = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tok.feed(&input);
    let open = tok.sink.state.borrow().stack.len();
    open
}

#[test]
fn unclosed_items_do_not_pile_up() {
    // Each <li>, <p>, <td>, <tr> ends the one before, so the open elements stay few (a scan of
    // them per link made pages of 40,000 unclosed items take seconds).
    for item in [
        "<li><a href=/x>item</a> text",
        "<p><a href=/x>p</a>",
        "<td>c<a href=/>l</a>",
    ] {
        let page = "<body><ul><table><tr>".to_string() + &item.repeat(1000);
        assert!(
            open_elements(&page) <= 6,
            "{item}: {}",
            open_elements(&page)
        );
    }
    assert_eq!(open_elements(&"<tr><td>x".repeat(500)), 2);
}

#[test]
fn stray_end_tags_keep_their_scope() {
    // A </p> with none open breaks the block, as the browser's empty paragraph does.
    assert_eq!(
        visible_text("<p>See the list<ul><li>a</ul>and more</p><span>Then this</span>"),
        "See the list\na\nand more\nThen this"
    );
    // A stray end tag inside a skipped list or table does not end it (out of scope there).
    let page = "<ul><li>Item<ul class=share><li><a href=/s>Share</a></li></li>\
        <li><a href=/t>Tweet</a></ul></li></ul><table class=ads><tr><td>Sponsored offer</div>\
        </td></tr></table><p>Body.</p>";
    assert_eq!(main0(page), "Item\nBody.");
    // Table tags inside an svg do not end it.
    assert_eq!(
        visible_text("<p>cell<svg><td>in svg</td></svg>after"),
        "cellafter"
    );
}

#[test]
fn deep_pages_take_linear_time() {
    // Each start tag asks whether a <p>, an item or a cell is open before it walks the open
    // elements: 40,000 unclosed <div> or nested lists used to take seconds.
    for unit in ["<div>x", "<ul><li>x", "<span>x", "<div class=share><span>x"] {
        let page = unit.repeat(40_000) + &"<li>y".repeat(1_000);
        let t = std::time::Instant::now();
        let _ = main0(&page);
        assert!(
            t.elapsed().as_secs_f64() < 30.0,
            "{unit}: {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn tags_past_the_limit_are_cut_after_an_attribute_and_the_page_read_on() {
    // (60,000 attributes on one tag took the tokenizer 4 s: it compares each with the others)
    let attrs: String = (0..60_000).map(|i| format!(" a{i}=\"x>{i}\"")).collect();
    let page = format!("<p>before</p><div{attrs} title='t'>inside</div><p>after</p>");
    let cut = cut_long_tags(&page);
    assert!(cut.len() < MAX_TAG_BYTES + 100, "{}", cut.len());
    assert!(cut.starts_with("<p>before</p><div a0=\"x>0\" a1=\"x>1\""));
    assert!(
        cut.ends_with("\">inside</div><p>after</p>"),
        "{}",
        &cut[cut.len() - 60..]
    );
    assert_eq!(visible_text(&page), "before\ninside\nafter");
    // a tag name or a quoted value that long, with no space to cut at: the tag is dropped
    let page = format!("<p>a</p><x{}>b", "y".repeat(MAX_TAG_BYTES + 1));
    assert_eq!(cut_long_tags(&page), "<p>a</p>b");
    // shorter tags, quoted '>' and stray '<' in text are read as they are
    for page in [
        "<div title=\"a > b\" data-x='<p>'>text</div>",
        "a < b and c<d e",
        "<!-- <div x=1 --><p>t</p>",
    ] {
        assert!(matches!(cut_long_tags(page), Cow::Borrowed(_)));
    }
}
