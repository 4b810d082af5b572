//! neardup-core: SimHash fingerprints of text and an exact Hamming-distance index.
//!
//! Pure Rust, no Python: the `neardup-py` crate binds it for Python.
//! Fingerprints are unsigned 64-bit integers. `Index::query(fp, k)` returns every stored
//! item at Hamming distance <= k (inclusive) from `fp`, and never one farther.

pub mod batch_dedup;
pub mod error;
pub mod fingerprint;
pub mod hamming;
pub mod html;
pub mod index;
pub mod near;
pub mod parallel;
pub mod plain;
pub mod verify;

pub use error::{Error, Result};
