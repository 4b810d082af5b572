//! Text -> 64-bit SimHash. PLACEHOLDER: the first cut (char 4-gram shingles, xxh3, term frequency)
//! that lets every layer build; issue #2 replaces it with the full configurable engine.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

use crate::{Error, Result};

/// The whole fingerprint configuration: small, immutable, serialisable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    pub preset: String,
    pub ngram: usize,
}

impl Config {
    pub fn preset(name: &str) -> Result<Config> {
        match name {
            "default" => Ok(Config { preset: "default".into(), ngram: 4 }),
            other => Err(Error::InvalidArgument(format!(
                "unknown preset {other:?}; valid presets: \"default\""
            ))),
        }
    }
}

pub struct Fingerprinter {
    config: Config,
}

impl Fingerprinter {
    pub fn new(config: Config) -> Fingerprinter {
        Fingerprinter { config }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn fingerprint(&self, text: &str) -> u64 {
        let norm: Vec<char> = text.to_lowercase().chars().filter(|c| !c.is_whitespace()).collect();
        let n = self.config.ngram;
        let mut counts: HashMap<String, i64> = HashMap::new();
        if norm.len() <= n {
            counts.insert(norm.iter().collect(), 1);
        } else {
            for w in norm.windows(n) {
                *counts.entry(w.iter().collect()).or_insert(0) += 1;
            }
        }
        let mut v = [0i64; 64];
        for (feat, w) in counts {
            let h = xxh3_64(feat.as_bytes());
            for (bit, acc) in v.iter_mut().enumerate() {
                if h >> bit & 1 == 1 {
                    *acc += w
                } else {
                    *acc -= w
                }
            }
        }
        v.iter().enumerate().fold(0u64, |fp, (bit, &acc)| if acc > 0 { fp | 1 << bit } else { fp })
    }
}
