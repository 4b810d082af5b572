//! The fingerprint configuration: a small, immutable, serialisable value.
//!
//! It is stored with every index so that fingerprints made under different configurations are
//! never mixed. Presets are named starting points; every field can be overridden by an option.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// How text is cut into features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// Unicode words: Latin (and other spaced scripts) words whole, CJK runs split into chars.
    Words,
    /// Chinese word segmentation with jieba (HMM on), Latin words whole.
    Jieba,
    /// Character n-gram shingles of width `ngram` over the normalised text (spaces included);
    /// a text shorter than `ngram` is one feature.
    Chars,
    /// Word n-grams of `ngram` consecutive `words` tokens.
    WordNgrams,
    /// Seed 000 (Java mysimhash): split on its separator list over UTF-16 units, pieces holding
    /// CJK split into single UTF-16 units.
    Seed000,
    /// Seed 002 (Scala): lowercase, keep `[A-Za-z0-9_\u4e00-\u9fcc]`, 4-char sliding window.
    Seed002,
}

/// How features are weighted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// Term frequency: each occurrence adds 1 (seed 000).
    Tf,
    /// Each occurrence adds 1 (seed 002's name for it; the same sums as `tf`).
    Uniform,
    /// Each distinct feature adds 1, however often it occurs.
    Binary,
    /// Positional: the first `n/2+1` occurrences weigh 3, the rest 1 (seed 002 `pre`).
    Pre,
    /// Positional: the last `n/2+1` occurrences weigh 3, the rest 1 (seed 002 `suf`).
    Suf,
    /// Term frequency times inverse document frequency (`idf` must be set).
    Tfidf,
    /// Only the `top_n` terms by TF-IDF, weighted by it (seed 003's keyword levels).
    Keywords,
}

/// The 64-bit (or 128-bit) hash of one feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureHash {
    /// XXH3 of the UTF-8 bytes (fast, well distributed).
    Xxh3,
    /// Seed 000's polynomial over UTF-16 units: `x = c0 << 7; x = (x * 1000003 ^ c) & mask; x ^= len`.
    Seed000,
    /// MD5 of the UTF-8 bytes read as a big-endian integer, low 64 (or 128) bits (seed 002).
    Md5,
}

/// When a bit of the fingerprint is 1, given its weighted vote `v`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BitRule {
    /// `v > 0` (Charikar, seed 002).
    Positive,
    /// `v >= 0` (seed 000).
    NonNegative,
}

/// Inverse document frequencies for `tfidf` / `keywords`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Idf {
    /// No IDF (only valid without `tfidf` / `keywords`).
    None,
    /// jieba's built-in Chinese IDF table through its TF-IDF keyword extractor (its stop words,
    /// words of 2+ chars); needs `tokenizer = "jieba"`.
    Jieba,
    /// A table fitted on a corpus or given by the user; `default` is used for unseen terms.
    Table {
        terms: BTreeMap<String, f64>,
        default: f64,
    },
}

/// The whole fingerprint configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The preset this configuration started from (informational; part of equality).
    pub preset: String,
    /// Take the visible text of HTML input (script, style and markup dropped) first.
    pub html: bool,
    /// Unicode NFKC normalisation.
    pub nfkc: bool,
    /// Unicode lowercase (case folding).
    pub casefold: bool,
    /// Runs of whitespace become one space; leading/trailing whitespace is dropped.
    pub collapse_whitespace: bool,
    /// Punctuation, symbols (emoji included) and control characters become spaces.
    pub strip_punctuation: bool,
    /// Traditional Chinese becomes Simplified (OpenCC's t2s phrase and character tables),
    /// after NFKC. Left out of the JSON form while false, so configurations made before the
    /// option existed keep their exact form (indexes store it and compare).
    #[serde(default, skip_serializing_if = "is_false")]
    pub t2s: bool,
    pub tokenizer: Tokenizer,
    /// Width of `chars` shingles / `word_ngrams` (1..=32).
    pub ngram: u32,
    pub weighting: Weighting,
    pub idf: Idf,
    /// Number of terms kept by `keywords` weighting (>= 1).
    pub top_n: u32,
    pub hash: FeatureHash,
    /// 64 or 128.
    pub bits: u32,
    pub bit_rule: BitRule,
}

/// Names of the presets, in the order error messages list them.
pub const PRESETS: &[&str] = &[
    "default", "seed000", "seed002", "words", "jieba", "tfidf", "keywords",
];

fn base(preset: &str) -> Config {
    Config {
        preset: preset.to_string(),
        html: false,
        nfkc: true,
        casefold: true,
        collapse_whitespace: true,
        strip_punctuation: true,
        t2s: false,
        tokenizer: Tokenizer::Chars,
        ngram: 3,
        weighting: Weighting::Tf,
        idf: Idf::None,
        top_n: 20,
        hash: FeatureHash::Xxh3,
        bits: 64,
        bit_rule: BitRule::Positive,
    }
}

impl Config {
    /// The configuration of a named preset.
    pub fn preset(name: &str) -> Result<Config> {
        let c = match name {
            "default" => base(name),
            "seed000" => Config {
                nfkc: false,
                casefold: false,
                collapse_whitespace: false,
                strip_punctuation: false,
                tokenizer: Tokenizer::Seed000,
                hash: FeatureHash::Seed000,
                bit_rule: BitRule::NonNegative,
                ..base(name)
            },
            "seed002" => Config {
                nfkc: false,
                casefold: false,
                collapse_whitespace: false,
                strip_punctuation: false,
                tokenizer: Tokenizer::Seed002,
                ngram: 4,
                weighting: Weighting::Pre,
                hash: FeatureHash::Md5,
                ..base(name)
            },
            "words" => Config {
                tokenizer: Tokenizer::Words,
                ngram: 1,
                ..base(name)
            },
            "jieba" => Config {
                tokenizer: Tokenizer::Jieba,
                ngram: 1,
                ..base(name)
            },
            "tfidf" => Config {
                tokenizer: Tokenizer::Jieba,
                ngram: 1,
                weighting: Weighting::Tfidf,
                idf: Idf::Jieba,
                ..base(name)
            },
            "keywords" => Config {
                tokenizer: Tokenizer::Jieba,
                ngram: 1,
                weighting: Weighting::Keywords,
                idf: Idf::Jieba,
                ..base(name)
            },
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown preset {other:?}; valid presets: {}",
                    quoted(PRESETS)
                )))
            }
        };
        Ok(c)
    }

    /// Names of the options (every field but `preset`).
    pub fn option_names() -> Vec<&'static str> {
        vec![
            "html",
            "nfkc",
            "casefold",
            "collapse_whitespace",
            "strip_punctuation",
            "t2s",
            "tokenizer",
            "ngram",
            "weighting",
            "idf",
            "top_n",
            "hash",
            "bits",
            "bit_rule",
        ]
    }

    /// A preset with options applied. Each option is checked on its own so that an error names it.
    pub fn with_options(preset: &str, options: &Map<String, Value>) -> Result<Config> {
        let mut config = Config::preset(preset)?;
        let names = Config::option_names();
        for (key, value) in options {
            if !names.contains(&key.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "unknown option {key:?}; valid options: {}",
                    quoted(&names)
                )));
            }
            let value = if key == "idf" {
                idf_shorthand(value)
            } else {
                value.clone()
            };
            let mut obj = match serde_json::to_value(&config) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(Error::InvalidArgument(
                        "configuration is not an object".into(),
                    ))
                }
            };
            obj.insert(key.clone(), value);
            config = serde_json::from_value(Value::Object(obj)).map_err(|e| {
                Error::InvalidArgument(format!("invalid value for option {key:?}: {e}"))
            })?;
        }
        config.validate()?;
        Ok(config)
    }

    /// A configuration read back from its JSON form (checked before it is accepted). Keys that
    /// are missing take the values of its `preset` (`"default"` when absent), so both a full
    /// `config` and a partial `{"preset": "seed002", "weighting": "suf"}` are accepted.
    pub fn from_json(text: &str) -> Result<Config> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::InvalidArgument(format!("invalid fingerprint config: {e}")))?;
        let Value::Object(mut map) = value else {
            return Err(Error::InvalidArgument(
                "fingerprint config must be an object".into(),
            ));
        };
        let preset = match map.remove("preset") {
            None => "default".to_string(),
            Some(Value::String(p)) => p,
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "preset must be a string, got {other}"
                )))
            }
        };
        Config::with_options(&preset, &map)
    }

    /// The JSON form (field order fixed, IDF terms sorted).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks the combination of fields.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(1..=32).contains(&self.ngram) {
            return bad(format!("ngram must be in 1..=32, got {}", self.ngram));
        }
        if self.bits != 64 && self.bits != 128 {
            return bad(format!("bits must be 64 or 128, got {}", self.bits));
        }
        if self.top_n == 0 {
            return bad("top_n must be >= 1, got 0".into());
        }
        let idf_weighting = matches!(self.weighting, Weighting::Tfidf | Weighting::Keywords);
        match (&self.idf, idf_weighting) {
            (Idf::None, true) => {
                return bad(format!(
                "weighting {:?} needs an idf: \"jieba\", a table, or Fingerprinter.fit_idf(texts)",
                name_of(&self.weighting)
            ))
            }
            (Idf::Jieba | Idf::Table { .. }, false) => {
                return bad(format!(
                    "idf is only used with weighting \"tfidf\" or \"keywords\", not {:?}",
                    name_of(&self.weighting)
                ))
            }
            _ => {}
        }
        if self.idf == Idf::Jieba && self.tokenizer != Tokenizer::Jieba {
            return bad("idf \"jieba\" needs tokenizer \"jieba\"".into());
        }
        if self.t2s && super::normalize::t2s_converter().is_none() {
            return bad("t2s: the Traditional -> Simplified tables failed to load".into());
        }
        if let Idf::Table { terms, default } = &self.idf {
            if !default.is_finite() || terms.values().any(|v| !v.is_finite()) {
                return bad("idf values must be finite numbers".into());
            }
        }
        Ok(())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `idf={"term": 2.0, ...}` is accepted as a table whose default is the largest value.
fn idf_shorthand(value: &Value) -> Value {
    if let Value::Object(m) = value {
        if !m.contains_key("table") && m.values().all(|v| v.is_number()) {
            let default = m.values().filter_map(Value::as_f64).fold(1.0f64, f64::max);
            return serde_json::json!({"table": {"terms": m, "default": default}});
        }
    }
    value.clone()
}

fn name_of<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
