//! What a text becomes before its check: the policy's normalisation, its fingerprint, its
//! Jaccard sketch and its radius, in one step (Python's `Policy.prepare`, the fingerprinter,
//! `_sketch` and `Policy.radius`, without three crossings of the binding per text).

use crate::batch_dedup::{check_shingle, sketch};
use crate::fingerprint::{Fingerprinter, Text as Input};
use crate::plain::normalise;
use crate::{Error, Result};

/// A deduplicator's preparation of one text.
#[derive(Clone, Debug)]
pub struct Preparation {
    fingerprinter: Fingerprinter,
    shingle: usize,
    k_short: u32,
    k_long: u32,
    short_chars: usize,
}

/// A prepared text: fingerprint, sketch (sorted distinct shingle hashes), radius.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    pub fp: u64,
    pub sketch: Vec<u32>,
    pub k: u32,
}

impl Preparation {
    /// `k_short` for texts of at most `short_chars` characters once normalised, else `k_long`.
    pub fn new(
        fingerprinter: Fingerprinter,
        shingle: usize,
        k_short: u32,
        k_long: u32,
        short_chars: usize,
    ) -> Result<Self> {
        if fingerprinter.config().bits != 64 {
            return Err(Error::InvalidArgument(format!(
                "the Redis index keeps 64-bit fingerprints, not {}-bit ones",
                fingerprinter.config().bits
            )));
        }
        check_shingle(shingle)?;
        for k in [k_short, k_long] {
            if k > 64 {
                return Err(Error::InvalidArgument(format!(
                    "k must be in 0..=64, got {k}"
                )));
            }
        }
        Ok(Preparation {
            fingerprinter,
            shingle,
            k_short,
            k_long,
            short_chars,
        })
    }

    /// `visible`: the text as the policy reads it (an HTML page's main text already taken).
    pub fn prepare(&self, visible: &str) -> Result<Prepared> {
        let norm = normalise(visible);
        let fp = self.fingerprinter.fingerprint(Input::Str(&norm)) as u64;
        let sketch = sketch(&norm, self.shingle)?;
        let k = if norm.chars().count() <= self.short_chars {
            self.k_short
        } else {
            self.k_long
        };
        Ok(Prepared { fp, sketch, k })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Config;

    fn preparation() -> Preparation {
        Preparation::new(Fingerprinter::preset("default").unwrap(), 5, 13, 11, 20).unwrap()
    }

    #[test]
    fn a_text_is_normalised_fingerprinted_sketched_and_given_its_radius() {
        let p = preparation();
        let short = p.prepare("  Hello   WORLD ").unwrap();
        let norm = normalise("  Hello   WORLD ");
        assert_eq!(norm, "hello world");
        let fp = Fingerprinter::preset("default").unwrap();
        assert_eq!(short.fp as u128, fp.fingerprint(Input::Str(&norm)));
        assert_eq!(short.sketch, sketch(&norm, 5).unwrap());
        assert_eq!(short.k, 13); // (11 characters <= 20)
        assert_eq!(p.prepare("hello world, and one more clause").unwrap().k, 11);
        // (the radius counts characters, not bytes: 20 CJK characters are short)
        assert_eq!(p.prepare(&"天".repeat(20)).unwrap().k, 13);
        assert_eq!(p.prepare(&"天".repeat(21)).unwrap().k, 11);
    }

    #[test]
    fn settings_the_redis_index_cannot_take_are_refused() {
        let mut wide = Config::preset("default").unwrap();
        wide.bits = 128;
        let fp = Fingerprinter::new(wide).unwrap();
        let e = Preparation::new(fp, 5, 13, 11, 200).unwrap_err();
        assert!(e.to_string().contains("64-bit"), "{e}");
        let fp = Fingerprinter::preset("default").unwrap();
        assert!(Preparation::new(fp.clone(), 0, 13, 11, 200).is_err());
        assert!(Preparation::new(fp, 5, 65, 11, 200).is_err());
    }
}
