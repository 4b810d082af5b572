//! Text -> SimHash fingerprint (Charikar): normalise, tokenise into features, weight them, hash
//! each feature to 64 (or 128) bits, add or subtract its weight per bit, keep the sign.
//!
//! Everything is set by a [`Config`]; presets give seed-compatible and tuned starting points.

pub mod config;
pub mod hash;
pub mod normalize;
pub mod seed000;
pub mod seed002;
pub mod simhash;
pub mod tokenize;
pub mod weight;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;

use rayon::prelude::*;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

pub use config::{BitRule, Config, FeatureHash, Idf, Tokenizer, Weighting, PRESETS};
use hash::{hash128, hash64, hash_units, md5_u128, seed000_str64, seed000_units, seed000_units64};
use simhash::{Acc128, Acc64, AccF, Ones64};

use crate::parallel as pool;
use crate::{Error, Result};

/// Input text: UTF-8, or UTF-16 units when it may hold lone surrogates (a Python `str` that is
/// not valid Unicode, or a Java string). Only seed 000 reads UTF-16 as is; the other tokenisers
/// replace lone surrogates by U+FFFD.
#[derive(Clone, Copy, Debug)]
pub enum Text<'a> {
    Str(&'a str),
    Utf16(&'a [u16]),
}

/// Owned [`Text`], for batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextBuf {
    Str(String),
    Utf16(Vec<u16>),
}

impl TextBuf {
    pub fn as_text(&self) -> Text<'_> {
        match self {
            TextBuf::Str(s) => Text::Str(s),
            TextBuf::Utf16(u) => Text::Utf16(u),
        }
    }

    /// Size in bytes (UTF-8, or 2 per UTF-16 unit).
    pub fn byte_len(&self) -> usize {
        match self {
            TextBuf::Str(s) => s.len(),
            TextBuf::Utf16(u) => 2 * u.len(),
        }
    }
}

/// A feature: UTF-8, or UTF-16 units (seed 000 features can be lone surrogate halves).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    Str(String),
    Utf16(Vec<u16>),
}

impl Feature {
    /// UTF-8 form (lone surrogates become U+FFFD).
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        match self {
            Feature::Str(s) => Cow::Borrowed(s),
            Feature::Utf16(u) => Cow::Owned(String::from_utf16_lossy(u)),
        }
    }
}

/// Buffers reused from text to text (decoded UTF-16 input, normalised text); one per thread.
#[derive(Default, Debug)]
pub struct Scratch {
    decoded: String,
    norm: normalize::Buffers,
}

/// Turns texts into fingerprints under one configuration. Cheap to share across threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Fingerprinter {
    config: Config,
}

/// Batches below this many bytes run on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 * 1024;

impl Fingerprinter {
    /// A fingerprinter for a checked configuration.
    pub fn new(config: Config) -> Result<Fingerprinter> {
        config.validate()?;
        Ok(Fingerprinter { config })
    }

    /// A fingerprinter for a named preset.
    pub fn preset(name: &str) -> Result<Fingerprinter> {
        Fingerprinter::new(Config::preset(name)?)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn normalizes(&self) -> bool {
        let c = &self.config;
        c.html || c.nfkc || c.t2s || c.casefold || c.collapse_whitespace || c.strip_punctuation
    }

    /// Streaming is exact when every occurrence weighs 1.
    fn streams(&self) -> bool {
        matches!(self.config.weighting, Weighting::Tf | Weighting::Uniform)
    }

    /// The fingerprint of `text`; below 2**64 unless `bits` is 128.
    pub fn fingerprint(&self, text: Text<'_>) -> u128 {
        self.fingerprint_with(text, &mut Scratch::default())
    }

    /// [`Fingerprinter::fingerprint`] with buffers reused from text to text.
    pub fn fingerprint_with(&self, text: Text<'_>, scratch: &mut Scratch) -> u128 {
        let c = &self.config;
        if c.tokenizer == Tokenizer::Seed000 {
            return self.fingerprint_prepared(text);
        }
        let Scratch { decoded, norm } = scratch;
        let s: &str = match text {
            Text::Str(s) => s,
            Text::Utf16(u) => {
                decoded.clear();
                decoded
                    .extend(char::decode_utf16(u.iter().copied()).map(|r| r.unwrap_or('\u{fffd}')));
                decoded
            }
        };
        let norm = normalize::normalize_with(s, c, norm);
        if self.streams() {
            self.stream_str(norm)
        } else {
            self.vote_str(norm)
        }
    }

    fn fingerprint_prepared(&self, text: Text<'_>) -> u128 {
        match self.prepare(text) {
            Prepared::Units(units) => {
                if self.streams() {
                    self.stream_units(&units)
                } else {
                    self.vote(&self.features_of_units(&units))
                }
            }
            Prepared::Str(norm) => {
                if self.streams() {
                    self.stream_str(&norm)
                } else {
                    self.vote_str(&norm)
                }
            }
        }
    }

    /// Fingerprint of a UTF-8 string (64-bit configurations: the value fits in `u64`).
    pub fn fingerprint_str(&self, text: &str) -> u128 {
        self.fingerprint(Text::Str(text))
    }

    /// Fingerprints of many texts, in order; parallel (rayon) for large batches, sequential when
    /// `NEARDUP_NUM_THREADS=1` (the crate's pool, [`crate::parallel`]; a forked child makes its own).
    pub fn fingerprint_many(&self, texts: &[TextBuf]) -> Vec<u128> {
        let views: Vec<Text<'_>> = texts.iter().map(TextBuf::as_text).collect();
        self.fingerprint_many_texts(&views)
    }

    /// [`Fingerprinter::fingerprint_many`] over borrowed texts.
    pub fn fingerprint_many_texts(&self, texts: &[Text<'_>]) -> Vec<u128> {
        let bytes: usize = texts
            .iter()
            .map(|t| match t {
                Text::Str(s) => s.len(),
                Text::Utf16(u) => 2 * u.len(),
            })
            .sum();
        let sequential = || {
            let mut scratch = Scratch::default();
            texts
                .iter()
                .map(|t| self.fingerprint_with(*t, &mut scratch))
                .collect()
        };
        if texts.len() < 2 || bytes < PARALLEL_MIN_BYTES {
            return sequential();
        }
        pool::run(|pool| match pool {
            Some(p) => p.install(|| {
                texts
                    .par_iter()
                    .with_min_len(8)
                    .map_init(Scratch::default, |s, t| self.fingerprint_with(*t, s))
                    .collect()
            }),
            None => sequential(),
        })
    }

    /// The weighted features of `text`, as hashed: aggregated per distinct feature (first
    /// occurrence order) for `tf`/`uniform`/`binary`, per occurrence for `pre`/`suf`, best first
    /// for `tfidf`/`keywords`. `fingerprint_features(features(t)) == fingerprint(t)`.
    pub fn features(&self, text: Text<'_>) -> Vec<(Feature, f64)> {
        match self.prepare(text) {
            Prepared::Units(units) => self.features_of_units(&units),
            Prepared::Str(norm) => self.features_of_str(&norm),
        }
    }

    /// The fingerprint of user-given (feature, weight) pairs, hashed with this configuration's
    /// hash and bit rule. Weights must be finite; integral non-negative weights are summed
    /// exactly, others in floating point.
    pub fn fingerprint_features(&self, pairs: &[(Feature, f64)]) -> Result<u128> {
        if let Some((f, w)) = pairs.iter().find(|(_, w)| !w.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "feature weights must be finite, got {w} for {:?}",
                f.to_string_lossy()
            )));
        }
        Ok(self.vote(pairs))
    }

    fn vote(&self, pairs: &[(Feature, f64)]) -> u128 {
        let c = &self.config;
        self.vote_with(pairs, |f: &Feature| -> u128 {
            match f {
                Feature::Str(s) => self.hash_str(s),
                Feature::Utf16(u) => hash_units(c.hash, u, c.bits),
            }
        })
    }

    /// The configured hash of a feature given as text, `bits` wide.
    fn hash_str(&self, s: &str) -> u128 {
        let c = &self.config;
        if c.bits == 64 {
            hash64(c.hash, s) as u128
        } else {
            hash128(c.hash, s)
        }
    }

    /// TF-IDF or keywords by jieba's own extractor (its terms are owned, not slices of the text).
    fn jieba_weighted(&self) -> bool {
        let c = &self.config;
        matches!(c.weighting, Weighting::Tfidf | Weighting::Keywords) && c.idf == Idf::Jieba
    }

    /// The fingerprint of the features of normalised text whose weighting does not stream,
    /// from features borrowed from the text (the same votes as [`Fingerprinter::features`]).
    fn vote_str(&self, norm: &str) -> u128 {
        let c = &self.config;
        let filtered: String;
        let feats = if c.tokenizer == Tokenizer::Seed002 {
            // Seed 002 windows slide over its filtered copy of the text.
            filtered = seed002::filtered(norm);
            let mut occ: Vec<&str> = Vec::new();
            seed002::for_each_window(&filtered, c.ngram as usize, |w| occ.push(w));
            self.weigh(occ)
        } else {
            match self.str_features(norm) {
                Some(feats) => feats,
                None => return self.vote(&self.features_of_str(norm)),
            }
        };
        self.vote_with(&feats, |f: &&str| self.hash_str(f))
    }

    fn vote_with<F>(&self, pairs: &[(F, f64)], hash: impl Fn(&F) -> u128) -> u128 {
        let c = &self.config;
        let integral = pairs
            .iter()
            .all(|(_, w)| *w >= 0.0 && w.fract() == 0.0 && *w <= u32::MAX as f64);
        if integral {
            if c.bits == 64 {
                let mut acc = Acc64::default();
                for (f, w) in pairs {
                    acc.add(hash(f) as u64, *w as u32);
                }
                acc.finish(c.bit_rule) as u128
            } else {
                let mut acc = Acc128::default();
                for (f, w) in pairs {
                    acc.add(hash(f), *w as u32);
                }
                acc.finish(c.bit_rule)
            }
        } else {
            let mut acc = AccF::new(c.bits);
            for (f, w) in pairs {
                acc.add(hash(f), *w);
            }
            acc.finish(c.bit_rule)
        }
    }

    fn prepare<'a>(&self, text: Text<'a>) -> Prepared<'a> {
        let c = &self.config;
        if c.tokenizer == Tokenizer::Seed000 && !self.normalizes() {
            return Prepared::Units(match text {
                Text::Utf16(u) => Cow::Borrowed(u),
                Text::Str(s) => Cow::Owned(s.encode_utf16().collect()),
            });
        }
        let s: Cow<'a, str> = match text {
            Text::Str(s) => Cow::Borrowed(s),
            Text::Utf16(u) => Cow::Owned(String::from_utf16_lossy(u)),
        };
        let norm = match s {
            Cow::Borrowed(b) => normalize::normalize(b, c),
            Cow::Owned(o) => Cow::Owned(normalize::normalize(&o, c).into_owned()),
        };
        if c.tokenizer == Tokenizer::Seed000 {
            return Prepared::Units(Cow::Owned(norm.encode_utf16().collect()));
        }
        Prepared::Str(norm)
    }

    fn stream_str(&self, norm: &str) -> u128 {
        let c = &self.config;
        let (tok, n, rule) = (c.tokenizer, c.ngram as usize, c.bit_rule);
        if c.bits == 64 {
            fn run(
                tok: Tokenizer,
                n: usize,
                rule: BitRule,
                text: &str,
                h: impl Fn(&str) -> u64,
            ) -> u128 {
                let mut ones = Ones64::default();
                tokenize::for_each_feature(tok, n, text, |f| ones.push(h(f)));
                ones.finish(rule) as u128
            }
            match c.hash {
                FeatureHash::Xxh3 => run(tok, n, rule, norm, |f| xxh3_64(f.as_bytes())),
                FeatureHash::Seed000 => run(tok, n, rule, norm, seed000_str64),
                FeatureHash::Md5 => run(tok, n, rule, norm, |f| md5_u128(f.as_bytes()) as u64),
            }
        } else {
            let mut acc = Acc128::default();
            match c.hash {
                FeatureHash::Xxh3 => {
                    tokenize::for_each_feature(tok, n, norm, |f| acc.add(xxh3_128(f.as_bytes()), 1))
                }
                kind => tokenize::for_each_feature(tok, n, norm, |f| acc.add(hash128(kind, f), 1)),
            }
            acc.finish(rule)
        }
    }

    fn stream_units(&self, units: &[u16]) -> u128 {
        let c = &self.config;
        if c.bits == 64 && c.hash == FeatureHash::Seed000 {
            let mut ones = Ones64::default();
            seed000::for_each_feature(units, |u| ones.push(seed000_units64(u)));
            return ones.finish(c.bit_rule) as u128;
        }
        if c.bits == 64 {
            let mut ones = Ones64::default();
            seed000::for_each_feature(units, |u| ones.push(hash_units(c.hash, u, 64) as u64));
            ones.finish(c.bit_rule) as u128
        } else {
            let mut acc = Acc128::default();
            seed000::for_each_feature(units, |u| acc.add(hash_units(c.hash, u, 128), 1));
            acc.finish(c.bit_rule)
        }
    }

    fn features_of_units(&self, units: &[u16]) -> Vec<(Feature, f64)> {
        let c = &self.config;
        match c.weighting {
            Weighting::Tf | Weighting::Uniform | Weighting::Binary => {
                let mut index: HashMap<&[u16], usize> = HashMap::new();
                let mut out: Vec<(Feature, f64)> = Vec::new();
                let binary = c.weighting == Weighting::Binary;
                seed000::for_each_feature(units, |u| match index.get(u) {
                    Some(&i) => {
                        if !binary {
                            out[i].1 += 1.0
                        }
                    }
                    None => {
                        index.insert(u, out.len());
                        out.push((Feature::Utf16(u.to_vec()), 1.0));
                    }
                });
                out
            }
            Weighting::Pre | Weighting::Suf => {
                let mut occ: Vec<Feature> = Vec::new();
                seed000::for_each_feature(units, |u| occ.push(Feature::Utf16(u.to_vec())));
                positional(occ, c.weighting)
            }
            Weighting::Tfidf | Weighting::Keywords => {
                let mut occ: Vec<String> = Vec::new();
                seed000::for_each_feature(units, |u| occ.push(String::from_utf16_lossy(u)));
                self.idf_weighted(occ.iter().map(String::as_str))
                    .into_iter()
                    .map(|(t, w)| (Feature::Str(t.to_string()), w))
                    .collect()
            }
        }
    }

    fn features_of_str(&self, norm: &str) -> Vec<(Feature, f64)> {
        let c = &self.config;
        if self.jieba_weighted() {
            let top = if c.weighting == Weighting::Keywords {
                c.top_n as usize
            } else {
                usize::MAX
            };
            return weight::jieba_terms(norm, top)
                .into_iter()
                .map(|(t, w)| (Feature::Str(t), w))
                .collect();
        }
        let (tok, n) = (c.tokenizer, c.ngram as usize);
        if let Some(feats) = self.str_features(norm) {
            return feats
                .into_iter()
                .map(|(t, w)| (Feature::Str(t.to_string()), w))
                .collect();
        }
        // The seed tokenisers rewrite the text: their features are owned.
        let mut owned: Vec<String> = Vec::new();
        tokenize::for_each_feature(tok, n, norm, |f| owned.push(f.to_string()));
        self.weigh(owned.iter().map(String::as_str).collect())
            .into_iter()
            .map(|(t, w)| (Feature::Str(t.to_string()), w))
            .collect()
    }

    /// The weighted features of normalised text, borrowed from it; None for jieba TF-IDF
    /// (jieba owns its terms) and the seed tokenisers (they rewrite the text).
    fn str_features<'t>(&self, norm: &'t str) -> Option<Vec<(&'t str, f64)>> {
        let c = &self.config;
        if self.jieba_weighted() {
            return None;
        }
        let mut occ: Vec<&'t str> = Vec::new();
        tokenize::for_each_slice(c.tokenizer, c.ngram as usize, norm, |f| occ.push(f))
            .then(|| self.weigh(occ))
    }

    /// Weights of the features `occ` (in text order) by this configuration's weighting (not
    /// jieba TF-IDF).
    fn weigh<'t>(&self, occ: Vec<&'t str>) -> Vec<(&'t str, f64)> {
        let c = &self.config;
        match c.weighting {
            Weighting::Tf | Weighting::Uniform | Weighting::Binary => {
                let binary = c.weighting == Weighting::Binary;
                weight::count_terms(occ)
                    .into_iter()
                    .map(|(t, k)| (t, if binary { 1.0 } else { k as f64 }))
                    .collect()
            }
            Weighting::Pre | Weighting::Suf => positional(occ, c.weighting),
            Weighting::Tfidf | Weighting::Keywords => self.idf_weighted(occ.into_iter()),
        }
    }

    fn idf_weighted<'a>(&self, occ: impl Iterator<Item = &'a str>) -> Vec<(&'a str, f64)> {
        let c = &self.config;
        let Idf::Table { terms, default } = &c.idf else {
            return Vec::new();
        };
        let counts = weight::count_terms(occ);
        let top = (c.weighting == Weighting::Keywords).then_some(c.top_n as usize);
        weight::table_terms(counts, terms, *default, top)
    }

    /// A copy of this configuration with an IDF table fitted on `texts` (with this
    /// configuration's normalisation and tokeniser); weighting becomes `tfidf` unless it is
    /// `keywords`. Terms seen in fewer than `min_df` documents get the unseen-term default.
    pub fn fit_idf(&self, texts: &[TextBuf], min_df: u64) -> Result<Fingerprinter> {
        let c = &self.config;
        if texts.is_empty() {
            return Err(Error::InvalidArgument(
                "fit_idf needs at least one text".into(),
            ));
        }
        let fit_one = |fit: &mut weight::IdfFit, t: &TextBuf| match self.prepare(t.as_text()) {
            Prepared::Units(u) => {
                let mut occ: Vec<String> = Vec::new();
                seed000::for_each_feature(&u, |x| occ.push(String::from_utf16_lossy(x)));
                fit.add_document(occ.iter().map(String::as_str));
            }
            Prepared::Str(norm) => {
                let mut occ: Vec<String> = Vec::new();
                tokenize::for_each_feature(c.tokenizer, c.ngram as usize, &norm, |f| {
                    occ.push(f.to_string())
                });
                fit.add_document(occ.iter().map(String::as_str));
            }
        };
        let fit = pool::run(|pool| match pool {
            Some(p) if texts.len() > 64 => p.install(|| {
                texts
                    .par_chunks(256)
                    .map(|chunk| {
                        let mut fit = weight::IdfFit::new();
                        for t in chunk {
                            fit_one(&mut fit, t);
                        }
                        fit
                    })
                    .reduce(weight::IdfFit::new, weight::IdfFit::merge)
            }),
            _ => {
                let mut fit = weight::IdfFit::new();
                for t in texts {
                    fit_one(&mut fit, t);
                }
                fit
            }
        });
        let (terms, default) = fit.finish(min_df);
        let weighting = if c.weighting == Weighting::Keywords {
            Weighting::Keywords
        } else {
            Weighting::Tfidf
        };
        Fingerprinter::new(Config {
            weighting,
            idf: Idf::Table { terms, default },
            ..c.clone()
        })
    }
}

enum Prepared<'a> {
    Units(Cow<'a, [u16]>),
    Str(Cow<'a, str>),
}

/// Seed 002's positional weights: of `n` occurrences the first (`pre`) or last (`suf`)
/// `n / 2 + 1` weigh 3, the others 1.
fn positional<F>(occ: Vec<F>, weighting: Weighting) -> Vec<(F, f64)> {
    let n = occ.len();
    let heavy = n / 2 + 1;
    occ.into_iter()
        .enumerate()
        .map(|(i, f)| {
            let w = match weighting {
                Weighting::Pre if i < heavy => 3.0,
                Weighting::Suf if i >= n.saturating_sub(heavy) => 3.0,
                _ => 1.0,
            };
            (f, w)
        })
        .collect()
}

/// Seed 000's bit string: bit 0 first, `bits` characters of '0'/'1'.
pub fn to_bitstring(fp: u128, bits: u32) -> String {
    (0..bits)
        .map(|j| if (fp >> j) & 1 == 1 { '1' } else { '0' })
        .collect()
}

/// Inverse of [`to_bitstring`].
pub fn from_bitstring(s: &str) -> Result<u128> {
    if s.is_empty() || s.len() > 128 || !s.bytes().all(|b| b == b'0' || b == b'1') {
        return Err(Error::InvalidArgument(format!(
            "bit string must be 1 to 128 characters of '0' and '1', got {s:?}"
        )));
    }
    Ok(s.bytes()
        .enumerate()
        .fold(0u128, |fp, (j, b)| fp | (((b - b'0') as u128) << j)))
}

/// Lower-case hex, zero-padded to `bits / 4` digits.
pub fn to_hex(fp: u128, bits: u32) -> String {
    format!("{fp:0width$x}", width = (bits / 4) as usize)
}

#[doc(hidden)]
pub fn _seed000_units_for_tests(units: &[u16], bits: u32) -> u128 {
    seed000_units(units, bits)
}
