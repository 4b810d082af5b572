use super::config::*;
use super::normalize::nfkc;
use super::simhash::{Acc128, Acc64, AccF};
use super::*;
use unicode_normalization::UnicodeNormalization;

fn naive(hashes: &[(u64, u32)], rule: BitRule) -> u64 {
    let mut v = [0i64; 64];
    for &(h, w) in hashes {
        for (j, x) in v.iter_mut().enumerate() {
            if (h >> j) & 1 == 1 {
                *x += w as i64
            } else {
                *x -= w as i64
            }
        }
    }
    v.iter().enumerate().fold(0, |fp, (j, &x)| {
        let on = match rule {
            BitRule::Positive => x > 0,
            BitRule::NonNegative => x >= 0,
        };
        fp | ((on as u64) << j)
    })
}

fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    xxhash_rust::xxh3::xxh3_64(&state.to_le_bytes())
}

#[test]
fn byte_lane_accumulator_matches_naive_voting() {
    let mut s = 1u64;
    for n in [0usize, 1, 2, 3, 254, 255, 256, 257, 1000, 5000] {
        for weights in [[1u32, 1], [3, 1], [200, 7], [1000, 1]] {
            let hashes: Vec<(u64, u32)> = (0..n).map(|i| (lcg(&mut s), weights[i % 2])).collect();
            for rule in [BitRule::Positive, BitRule::NonNegative] {
                let mut acc = Acc64::default();
                let mut acc128 = Acc128::default();
                let mut accf = AccF::new(64);
                for &(h, w) in &hashes {
                    acc.add(h, w);
                    acc128.add(h as u128 | ((h as u128) << 64), w);
                    accf.add(h as u128, w as f64);
                }
                let want = naive(&hashes, rule);
                assert_eq!(acc.finish(rule), want, "n={n} w={weights:?}");
                let wide = acc128.finish(rule);
                assert_eq!(wide as u64, want);
                assert_eq!((wide >> 64) as u64, want);
                assert_eq!(accf.finish(rule) as u64, want);
            }
        }
    }
}

#[test]
fn seed000_hash_is_the_java_polynomial() {
    // Java: x = c0 << 7; x = (x * 1000003 ^ c) & mask; x ^= len.
    let units: Vec<u16> = "ab".encode_utf16().collect();
    let mut x: u128 = 97 << 7;
    x = (x * 1_000_003) ^ 97;
    x = ((x * 1_000_003) ^ 98) & u64::MAX as u128;
    assert_eq!(hash::seed000_units(&units, 64), x ^ 2);
    assert_eq!(hash::seed000_units64(&units) as u128, x ^ 2);
    assert_eq!(hash::seed000_str64("ab") as u128, x ^ 2);
    assert_eq!(hash::seed000_units(&[], 64), 0);
    // A single char never sets bits above ~43: (c << 7) * 1000003 < 2**43 for c < 2**16.
    for c in [1u16, 0x4e00, 0xffff] {
        assert!(hash::seed000_units64(&[c]) < 1 << 44);
    }
}

#[test]
fn seed000_fingerprints_of_the_seed_pair_match_java() {
    // Printed by the seed's Java class (tests/seeds/seed000) for the seed 003 pair.
    let f = Fingerprinter::preset("seed000").unwrap();
    let a = f.fingerprint_str("你妈妈喊你回家吃饭哦，回家罗回家罗");
    let b = f.fingerprint_str("你妈妈叫你回家吃饭啦，回家罗回家罗");
    assert_eq!(
        to_bitstring(a, 64),
        "1110101111011010011011111110110111011001010000000000000000000000"
    );
    assert_eq!(
        to_bitstring(b, 64),
        "1110111111011000011011111110110111011001010000000000000000000000"
    );
    assert_eq!(f.fingerprint_str(""), u64::MAX as u128);
    assert_eq!(from_bitstring(&to_bitstring(a, 64)).unwrap(), a);
}

#[test]
fn seed000_split_follows_java_alternation_order() {
    let units: Vec<u16> = "x/htmly<scripts<header>z-_-w--v".encode_utf16().collect();
    let mut got = Vec::new();
    seed000::for_each_feature(&units, |u| got.push(String::from_utf16_lossy(u)));
    // "/" wins over "/html", "<" over "<script", "<head" over "<header".
    assert_eq!(got, ["x", "htmly", "scripts", "er", "z", "w", "v"]);
    let units: Vec<u16> = "ab中😀".encode_utf16().collect();
    let mut got = Vec::new();
    seed000::for_each_feature(&units, |u| got.push(u.to_vec()));
    assert_eq!(got.len(), 5); // a, b, 中, and the two surrogate halves of 😀
}

#[test]
fn nfkc_fast_path_equals_full_nfkc() {
    let samples = [
        "plain ascii",
        "你好，世界！",
        "e\u{301}t\u{e9}",
        "Ａｂｃ１２３",
        "ﬁ①㎏",
        "a\u{301}\u{302}中\u{301}",
        "한국어 한",
        "x\u{0307}İ",
        "",
        "\u{212b}\u{2126}",
        "中文ﾃｽﾄ",
        "你好，世界：Ａ\u{301}ｂ！",
        "「引号」【括号】“双引号”——…",
        "ｶﾞ\u{3099}が\u{3099}",
        "，\u{301}。\u{301}",
        "\u{3000}全角空格\u{3000}",
        "Ｆｕｌｌ\u{FF5E}\u{FF5F}",
        "a\u{301}",
    ];
    for s in samples {
        let want: String = s.nfkc().collect();
        assert_eq!(nfkc(s), want, "{s:?}");
    }
}

#[test]
fn normalization_steps() {
    let c = Config::preset("default").unwrap();
    assert_eq!(
        normalize::normalize("  Hello,\tWORLD!!  你好。 ", &c),
        "hello world 你好"
    );
    assert_eq!(
        normalize::normalize("ＨＥＬＬＯ　ｗｏｒｌｄ", &c),
        "hello world"
    );
    assert_eq!(normalize::normalize("😀 a 😀", &c), "a");
}

#[test]
fn html_visible_text_drops_script_style_and_markup() {
    let t = crate::html::visible_text(
        "<html><head><title>T</title><style>p{}</style></head><body><p>One <b>two</b></p>\
         <script>var x = 1;</script><div>three</div><!-- c --></body></html>",
    );
    let words: Vec<&str> = t.split_whitespace().collect();
    assert_eq!(words, ["One", "two", "three"]);
    let f = Fingerprinter::new(Config {
        html: true,
        ..Config::preset("default").unwrap()
    })
    .unwrap();
    assert_eq!(
        f.fingerprint_str("<p>hello world</p><script>noise()</script>"),
        Fingerprinter::preset("default")
            .unwrap()
            .fingerprint_str("hello world")
    );
}

#[test]
fn features_reproduce_the_fingerprint() {
    let texts = [
        "",
        "a",
        "Hello, world! Hello again.",
        "你妈妈喊你回家吃饭哦，回家罗回家罗",
        "mixed 中文 text 123",
    ];
    for preset in PRESETS {
        for w in [
            Weighting::Tf,
            Weighting::Binary,
            Weighting::Pre,
            Weighting::Suf,
        ] {
            let mut c = Config::preset(preset).unwrap();
            if c.idf != Idf::None {
                continue;
            }
            c.weighting = w;
            let f = Fingerprinter::new(c).unwrap();
            for t in texts {
                let feats = f.features(Text::Str(t));
                assert_eq!(
                    f.fingerprint_features(&feats).unwrap(),
                    f.fingerprint_str(t),
                    "{preset} {w:?} {t:?}"
                );
            }
        }
    }
    let f = Fingerprinter::preset("keywords").unwrap();
    let t = "今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。";
    assert_eq!(
        f.fingerprint_features(&f.features(Text::Str(t))).unwrap(),
        f.fingerprint_str(t)
    );
}

#[test]
fn positional_weights_follow_seed002() {
    let occ: Vec<Feature> = (0..5).map(|i| Feature::Str(i.to_string())).collect();
    let w = |wt| {
        positional(occ.clone(), wt)
            .into_iter()
            .map(|(_, w)| w as u32)
            .collect::<Vec<_>>()
    };
    assert_eq!(w(Weighting::Pre), [3, 3, 3, 1, 1]);
    assert_eq!(w(Weighting::Suf), [1, 1, 3, 3, 3]);
    let one = vec![Feature::Str("x".into())];
    assert_eq!(positional(one, Weighting::Suf)[0].1, 3.0);
}

#[test]
fn config_options_and_errors() {
    let mut m = serde_json::Map::new();
    m.insert("weighting".into(), serde_json::json!("suf"));
    let c = Config::with_options("seed002", &m).unwrap();
    assert_eq!(c.weighting, Weighting::Suf);
    assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
    assert_eq!(
        Config::from_json(r#"{"preset": "seed002", "weighting": "suf"}"#).unwrap(),
        c
    );
    let e = Config::preset("nope").unwrap_err().to_string();
    assert!(e.contains("seed000") && e.contains("default"), "{e}");
    m.insert("colour".into(), serde_json::json!(1));
    let e = Config::with_options("default", &m).unwrap_err().to_string();
    assert!(e.contains("colour") && e.contains("tokenizer"), "{e}");
    let mut m = serde_json::Map::new();
    m.insert("weighting".into(), serde_json::json!("heavy"));
    let e = Config::with_options("default", &m).unwrap_err().to_string();
    assert!(e.contains("weighting") && e.contains("tfidf"), "{e}");
    m.insert("weighting".into(), serde_json::json!("tfidf"));
    assert!(Config::with_options("default", &m).is_err()); // no idf
    let mut m = serde_json::Map::new();
    m.insert("bits".into(), serde_json::json!(32));
    assert!(Config::with_options("default", &m)
        .unwrap_err()
        .to_string()
        .contains("bits"));
}

#[test]
fn fitted_idf_downweights_common_terms() {
    let base = Fingerprinter::preset("words").unwrap();
    let docs: Vec<TextBuf> = (0..50)
        .map(|i| TextBuf::Str(format!("common words here {i} rare{i}")))
        .collect();
    let f = base.fit_idf(&docs, 1).unwrap();
    assert_eq!(f.config().weighting, Weighting::Tfidf);
    let feats = f.features(Text::Str("common rare7 unseen"));
    let w: std::collections::HashMap<String, f64> = feats
        .into_iter()
        .map(|(k, v)| (k.to_string_lossy().into_owned(), v))
        .collect();
    assert!(w["common"] < w["rare7"] && w["rare7"] < w["unseen"]);
    let back = Fingerprinter::new(Config::from_json(&f.config().to_json()).unwrap()).unwrap();
    assert_eq!(back, f);
}

#[test]
fn batch_equals_single_and_handles_utf16() {
    let f = Fingerprinter::preset("default").unwrap();
    let texts: Vec<TextBuf> = (0..3000)
        .map(|i| {
            TextBuf::Str(format!(
                "document number {i} 文档 {} with some words",
                i * 7
            ))
        })
        .chain([TextBuf::Utf16(vec![0xd800, 0x61, 0x62, 0x63, 0x64])])
        .collect();
    let many = f.fingerprint_many(&texts);
    for (t, fp) in texts.iter().zip(&many) {
        assert_eq!(f.fingerprint(t.as_text()), *fp);
    }
    assert_eq!(many[3000], f.fingerprint_str("\u{fffd}abcd"));
}

#[test]
fn hamming_many_matches_pairwise() {
    let fps: Vec<u64> = (0..100u64)
        .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15))
        .collect();
    let d = crate::hamming::hamming_many(fps[3], &fps);
    for (i, &x) in fps.iter().enumerate() {
        assert_eq!(d[i], crate::hamming::hamming(fps[3], x));
    }
}

/// A text of fewer than `max_len` chars drawn from `pool` with the generator state `s`.
fn random_mix(pool: &[char], s: &mut u64, max_len: u64) -> String {
    let len = (lcg(s) % max_len) as usize;
    (0..len)
        .map(|_| pool[(lcg(s) % pool.len() as u64) as usize])
        .collect()
}

#[test]
fn nfkc_fast_path_equals_full_nfkc_on_random_mixes() {
    let pool: Vec<char> = "aZ9 ,.中文国，。、「」【】“”—…：！Ａｚ０～｟\u{3000}\u{301}\u{308}\u{3099}\u{309a}かがｶﾞﾞ한\u{1100}\u{1161}\u{11a8}ﬁ①㎏İ\u{212b}Åe\u{0327}\u{0301}😀"
        .chars()
        .collect();
    let mut s = 7u64;
    for _ in 0..20000 {
        let text = random_mix(&pool, &mut s, 12);
        let want: String = text.nfkc().collect();
        assert_eq!(nfkc(&text), want, "{text:?}");
    }
}

#[test]
fn fused_nfkc_and_folding_equal_the_two_passes_on_random_mixes() {
    // Chars that compose, decompose, widen or fold, around the fast path's inert ones.
    // Ideographs from both ends of U+4E00..=U+9FFF and beside it (U+4DFF, U+A000).
    let pool: Vec<char> = "aZ9 ,.中文国一鿿人民家们\u{4dff}\u{a000}，。、「」【】“”—…：！Ａｚ０～｟\u{3000}\u{301}\u{308}\u{3099}\u{309a}かがｶﾞﾞ한\u{1100}\u{1161}\u{11a8}ﬁ①㎏İ\u{212b}ÅeE\u{0327}\u{0301}Σß😀\t\n"
        .chars()
        .collect();
    let mut s = 11u64;
    let mut bufs = normalize::Buffers::default();
    for mask in 0..8u32 {
        let c = Config {
            casefold: mask & 1 != 0,
            strip_punctuation: mask & 2 != 0,
            // With no folding step at all the fused pass is not taken: mask 0 collapses too.
            collapse_whitespace: mask & 4 != 0 || mask == 0,
            ..Config::preset("default").unwrap()
        };
        for _ in 0..20000 {
            let text = random_mix(&pool, &mut s, 14);
            let want = fold_strip_collapse_reference(&text.nfkc().collect::<String>(), &c);
            assert_eq!(
                normalize::normalize_with(&text, &c, &mut bufs),
                want,
                "mask={mask} {text:?}"
            );
        }
    }
}

/// The normalisation steps after NFKC, one char at a time, as documented: the reference the
/// byte-run implementation must equal.
fn fold_strip_collapse_reference(text: &str, c: &Config) -> String {
    let (fold, strip, collapse) = (c.casefold, c.strip_punctuation, c.collapse_whitespace);
    // ASCII uses the ASCII whitespace set (U+000B is not in it), other chars Unicode's.
    let space = |ch: char| {
        if ch.is_ascii() {
            ch.is_ascii_whitespace()
        } else {
            ch.is_whitespace()
        }
    };
    let mut out = String::new();
    let mut pending = false;
    for ch in text.chars() {
        let cls = if ch.is_ascii() && !space(ch) && !(ch.is_ascii_alphanumeric() || ch == '_') {
            normalize::Class::Other
        } else {
            normalize::classify(ch)
        };
        if space(ch) || (strip && cls == normalize::Class::Other) {
            if collapse {
                pending = true;
            } else {
                out.push(if space(ch) { ch } else { ' ' });
            }
            continue;
        }
        if pending && !out.is_empty() {
            out.push(' ');
        }
        pending = false;
        if fold && !normalize::is_cjk(ch) {
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// Random texts mixing long ASCII runs (more than a 64-byte block), punctuation, every kind of
/// whitespace, CJK, full-width forms, combining marks, case-changing letters and emoji.
fn random_texts(seed: u64, count: usize) -> Vec<String> {
    let pool: Vec<&str> = vec![
        "a",
        "Z",
        "q",
        "9",
        "_",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\u{b}",
        "\u{c}",
        "\u{0}",
        ",",
        ".",
        "!",
        "-",
        "'",
        "\u{7f}",
        "中",
        "文",
        "，",
        "。",
        "「",
        "Ａ",
        "ｚ",
        "０",
        "\u{3000}",
        "\u{a0}",
        "\u{85}",
        "\u{2028}",
        "\u{301}",
        "e\u{301}",
        "İ",
        "Σ",
        "ǅ",
        "ﬁ",
        "①",
        "😀",
        "한",
        "ｶﾞ",
        "Hello",
        "WORLD",
        "the quick brown fox ",
        "snake_case_identifier",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ",
        "                                                                       ",
    ];
    let mut s = seed;
    (0..count)
        .map(|_| {
            let parts = (lcg(&mut s) % 40) as usize;
            (0..parts)
                .map(|_| pool[(lcg(&mut s) % pool.len() as u64) as usize])
                .collect()
        })
        .collect()
}

#[test]
fn normalization_equals_the_per_char_reference_under_every_option() {
    let texts = random_texts(11, 3000);
    let mut bufs = normalize::Buffers::default();
    for mask in 0..16u32 {
        let c = Config {
            nfkc: mask & 1 != 0,
            casefold: mask & 2 != 0,
            strip_punctuation: mask & 4 != 0,
            collapse_whitespace: mask & 8 != 0,
            ..Config::preset("default").unwrap()
        };
        for t in &texts {
            let after_nfkc: String = if c.nfkc {
                t.nfkc().collect()
            } else {
                t.clone()
            };
            let want = if mask & 14 == 0 {
                after_nfkc.clone()
            } else {
                fold_strip_collapse_reference(&after_nfkc, &c)
            };
            assert_eq!(normalize::normalize(t, &c), want, "mask={mask} {t:?}");
            // Reused buffers give the same text.
            assert_eq!(normalize::normalize_with(t, &c, &mut bufs), want, "{t:?}");
        }
    }
}

#[test]
fn word_split_equals_the_per_char_reference() {
    let mut texts = random_texts(12, 3000);
    texts.push("x".repeat(64));
    texts.push(format!("{} {}", "y".repeat(63), "z".repeat(200)));
    texts.push(format!("{}中{}", "w".repeat(64), "v".repeat(64)));
    for t in &texts {
        let mut want: Vec<&str> = Vec::new();
        let mut start: Option<usize> = None;
        for (i, ch) in t.char_indices() {
            match normalize::classify(ch) {
                normalize::Class::Word => {
                    start.get_or_insert(i);
                }
                cls => {
                    if let Some(s) = start.take() {
                        want.push(&t[s..i]);
                    }
                    if cls == normalize::Class::Cjk {
                        want.push(&t[i..i + ch.len_utf8()]);
                    }
                }
            }
        }
        if let Some(s) = start {
            want.push(&t[s..]);
        }
        let mut got: Vec<&str> = Vec::new();
        tokenize::for_each_word(t, |a, b| got.push(&t[a..b]));
        assert_eq!(got, want, "{t:?}");
    }
}

#[test]
fn block_masks_equal_the_per_byte_masks() {
    let mut s = 5u64;
    for _ in 0..2000 {
        let mut block = [0u8; 64];
        for x in block.iter_mut() {
            *x = lcg(&mut s) as u8;
        }
        assert_eq!(
            tokenize::block_masks(&block),
            tokenize::block_masks_plain(&block)
        );
    }
    let all: Vec<u8> = (0..=255u8).collect();
    for chunk in all.chunks_exact(64) {
        let block: &[u8; 64] = chunk.try_into().unwrap();
        assert_eq!(
            tokenize::block_masks(block),
            tokenize::block_masks_plain(block)
        );
    }
}

#[test]
fn char_ngrams_equal_windows_over_chars() {
    for t in random_texts(13, 1000) {
        let chars: Vec<(usize, char)> = t.char_indices().collect();
        for n in 1..=5usize {
            let mut want: Vec<&str> = Vec::new();
            if !chars.is_empty() && chars.len() <= n {
                want.push(&t);
            } else if chars.len() > n {
                for a in 0..=(chars.len() - n) {
                    let end = chars.get(a + n).map_or(t.len(), |&(i, _)| i);
                    want.push(&t[chars[a].0..end]);
                }
            }
            let mut got: Vec<String> = Vec::new();
            tokenize::for_each_feature(Tokenizer::Chars, n, &t, |f| got.push(f.to_string()));
            assert_eq!(got, want, "n={n} {t:?}");
        }
    }
}

#[test]
fn batched_votes_equal_naive_voting_on_every_cpu_path() {
    let mut s = 3u64;
    for n in [0usize, 1, 127, 128, 129, 254, 255, 256, 600, 5000] {
        let hashes: Vec<u64> = (0..n).map(|_| lcg(&mut s)).collect();
        let pairs: Vec<(u64, u32)> = hashes.iter().map(|&h| (h, 1)).collect();
        for rule in [BitRule::Positive, BitRule::NonNegative] {
            let want = naive(&pairs, rule);
            let mut ones = simhash::Ones64::default();
            for &h in &hashes {
                ones.push(h);
            }
            assert_eq!(ones.finish(rule), want, "n={n}");
        }
        // Each lane routine on its own, on slices that keep the byte counters below 256.
        let mut plain = [0u64; 8];
        let mut want = [0u32; 64];
        let part = &hashes[..n.min(255)];
        for &h in part {
            for (j, w) in want.iter_mut().enumerate() {
                *w += ((h >> j) & 1) as u32;
            }
        }
        simhash::add_ones_plain(&mut plain, part);
        let bytes = |l: &[u64; 8]| -> Vec<u32> {
            l.iter()
                .flat_map(|x| x.to_le_bytes())
                .map(u32::from)
                .collect()
        };
        assert_eq!(bytes(&plain), want);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut l = [0u64; 8];
                // SAFETY: AVX2 is present (checked).
                unsafe { simhash::x86::add_ones_avx2(&mut l, part) };
                assert_eq!(bytes(&l), want, "avx2 n={n}");
            }
            if std::arch::is_x86_feature_detected!("avx512bw") {
                let mut l = [0u64; 8];
                // SAFETY: AVX-512BW is present (checked).
                unsafe { simhash::x86::add_ones_avx512(&mut l, part) };
                assert_eq!(bytes(&l), want, "avx512 n={n}");
            }
        }
    }
}

#[test]
fn t2s_maps_traditional_to_simplified_before_tokenising() {
    let c = Config {
        t2s: true,
        ..Config::preset("default").unwrap()
    };
    assert_eq!(
        normalize::normalize("後來們說這個體驗，還有乾隆皇帝。", &c),
        "后来们说这个体验 还有乾隆皇帝"
    );
    // After NFKC: full-width letters are folded too; ASCII is left alone.
    assert_eq!(
        normalize::normalize("ＡＢＣ 電腦 Hello", &c),
        "abc 电脑 hello"
    );
    for preset in ["default", "words", "jieba", "seed000", "seed002"] {
        let plain = Fingerprinter::preset(preset).unwrap();
        let f = Fingerprinter::new(Config {
            t2s: true,
            ..plain.config().clone()
        })
        .unwrap();
        let simplified = "后来他们说这个体验很难忘，网络上的软件也发展得很快。";
        let traditional = "後來他們說這個體驗很難忘，網絡上的軟件也發展得很快。";
        assert_eq!(
            f.fingerprint_str(traditional),
            plain.fingerprint_str(simplified),
            "{preset}"
        );
        assert_eq!(
            f.fingerprint_str(traditional),
            f.fingerprint_str(simplified)
        );
        assert_ne!(
            plain.fingerprint_str(traditional),
            plain.fingerprint_str(simplified),
            "{preset}: without t2s the two forms differ"
        );
    }
}

#[test]
fn t2s_takes_any_text() {
    let f = Fingerprinter::new(Config {
        t2s: true,
        ..Config::preset("words").unwrap()
    })
    .unwrap();
    let plain = Fingerprinter::preset("words").unwrap();
    for t in random_texts(14, 1000) {
        let fp = f.fingerprint_str(&t);
        // Texts without Han characters are left as they are.
        if !t.chars().any(normalize::is_cjk) {
            assert_eq!(fp, plain.fingerprint_str(&t), "{t:?}");
        }
    }
    assert_eq!(
        f.fingerprint(Text::Utf16(&[0xd800, 0x5f8c, 0x4f86])),
        plain.fingerprint_str("\u{fffd}后来")
    );
}

#[test]
fn t2s_is_in_the_json_form_only_when_on() {
    for preset in PRESETS {
        let c = Config::preset(preset).unwrap();
        assert!(!c.t2s);
        assert!(!c.to_json().contains("t2s"), "{preset}");
    }
    let mut m = serde_json::Map::new();
    m.insert("t2s".into(), serde_json::json!(true));
    let c = Config::with_options("words", &m).unwrap();
    assert!(c.t2s && c.to_json().contains(r#""t2s":true"#));
    assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
    m.insert("t2s".into(), serde_json::json!("yes"));
    let e = Config::with_options("words", &m).unwrap_err().to_string();
    assert!(e.contains("t2s"), "{e}");
}
