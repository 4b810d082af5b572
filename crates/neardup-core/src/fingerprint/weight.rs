//! Term weights that need more than counting: TF-IDF with jieba's table or a fitted one, and
//! keyword selection.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use jieba_rs::{KeywordExtract, KeywordExtractConfig, TfIdf};

use super::tokenize::jieba;

fn jieba_tfidf() -> &'static TfIdf {
    static T: OnceLock<TfIdf> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = TfIdf::default();
        *t.config_mut() = KeywordExtractConfig::builder().use_hmm(true).build();
        t
    })
}

/// jieba's TF-IDF terms of `text`: (term, tf * idf / total), best first, at most `top_k`.
/// Uses jieba's stop words and its 2-char minimum, as its keyword extractor does.
pub fn jieba_terms(text: &str, top_k: usize) -> Vec<(String, f64)> {
    jieba_tfidf()
        .extract_keywords(jieba(), text, top_k, vec![])
        .into_iter()
        .map(|k| (k.keyword, k.weight))
        .collect()
}

/// TF-IDF weights of counted terms with a table; keeps the `top_k` best (ties by term).
/// The input order is kept when `top_k` is None.
pub fn table_terms<'a>(
    counts: Vec<(&'a str, u32)>,
    terms: &BTreeMap<String, f64>,
    default: f64,
    top_k: Option<usize>,
) -> Vec<(&'a str, f64)> {
    let mut out: Vec<(&str, f64)> = counts
        .into_iter()
        .map(|(t, c)| (t, c as f64 * terms.get(t).copied().unwrap_or(default)))
        .collect();
    if let Some(k) = top_k {
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        out.truncate(k);
    }
    out
}

/// Distinct terms with their counts, in order of first occurrence.
pub fn count_terms<'a>(features: impl IntoIterator<Item = &'a str>) -> Vec<(&'a str, u32)> {
    // foldhash: SipHash cost more than the rest of a binary-weighted fingerprint; the output
    // order comes from `out`, not from the map.
    let mut index: foldhash::HashMap<&str, usize> = foldhash::HashMap::default();
    let mut out: Vec<(&str, u32)> = Vec::new();
    for f in features {
        match index.entry(f) {
            Entry::Occupied(e) => out[*e.get()].1 += 1,
            Entry::Vacant(e) => {
                e.insert(out.len());
                out.push((f, 1));
            }
        }
    }
    out
}

/// Smoothed IDF fitted on documents given as their sets of terms:
/// `idf(t) = ln((1 + N) / (1 + df(t))) + 1`; unseen terms get `ln(1 + N) + 1`.
/// Terms seen in fewer than `min_df` documents are left to the default.
pub struct IdfFit {
    pub docs: u64,
    pub df: HashMap<String, u64>,
}

impl IdfFit {
    pub fn new() -> Self {
        IdfFit {
            docs: 0,
            df: HashMap::new(),
        }
    }

    pub fn add_document<'a>(&mut self, features: impl IntoIterator<Item = &'a str>) {
        let set: HashSet<&str> = features.into_iter().collect();
        self.docs += 1;
        for t in set {
            *self.df.entry(t.to_string()).or_insert(0) += 1;
        }
    }

    pub fn merge(mut self, other: IdfFit) -> IdfFit {
        self.docs += other.docs;
        for (t, c) in other.df {
            *self.df.entry(t).or_insert(0) += c;
        }
        self
    }

    pub fn finish(self, min_df: u64) -> (BTreeMap<String, f64>, f64) {
        let n = self.docs as f64;
        let default = (1.0 + n).ln() + 1.0;
        let terms = self
            .df
            .into_iter()
            .filter(|(_, df)| *df >= min_df.max(1))
            .map(|(t, df)| (t, ((1.0 + n) / (1.0 + df as f64)).ln() + 1.0))
            .collect();
        (terms, default)
    }
}

impl Default for IdfFit {
    fn default() -> Self {
        Self::new()
    }
}
