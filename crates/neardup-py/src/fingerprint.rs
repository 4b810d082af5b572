//! Binding of `neardup_core::fingerprint`: converts arguments, releases the GIL, maps errors.

use neardup_core::fingerprint::{self as core, Config, Feature, Text, TextBuf};
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyIterator, PyString, PyTuple, PyType};

use crate::errors::to_py;
use crate::index::{int_arg, to_fps};

/// A Python `str` as core text: UTF-8 when it is valid Unicode, else its UTF-16 units (a str
/// with lone surrogates cannot be UTF-8; seed 000 reads the units as Java would).
fn extract_text(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<TextBuf> {
    let s = obj.cast::<PyString>().map_err(|_| {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!("{name} must be str, not {ty}"))
    })?;
    match s.to_cow() {
        Ok(c) => Ok(TextBuf::Str(c.into_owned())),
        Err(_) => Ok(TextBuf::Utf16(utf16_units(s)?)),
    }
}

/// The UTF-16 code units of a Python `str`, lone surrogates included.
pub(crate) fn utf16_units(s: &Bound<'_, PyString>) -> PyResult<Vec<u16>> {
    let raw = s.call_method1("encode", ("utf-16-le", "surrogatepass"))?;
    let bytes = raw.cast::<PyBytes>()?.as_bytes();
    Ok(bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// The common case of [`extract_text`] without building an argument name.
#[inline]
fn extract_text_fast(obj: &Bound<'_, PyAny>) -> Option<TextBuf> {
    let s = obj.cast::<PyString>().ok()?;
    s.to_cow().ok().map(|c| TextBuf::Str(c.into_owned()))
}

/// A text kept as Python made it: its UTF-8 encoding (no further copy), or UTF-16 units.
enum Held<'py> {
    Utf8(Bound<'py, PyBytes>),
    Utf16(Vec<u16>),
}

/// The items of `texts`, refusing a single str and non-iterables with errors naming `name`.
fn text_items<'py>(texts: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyIterator>> {
    if texts.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an iterable of str, not a single str"
        )));
    }
    texts.try_iter().map_err(|_| {
        let ty = texts
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!("{name} must be an iterable of str, not {ty}"))
    })
}

fn hold_texts<'py>(texts: &Bound<'py, PyAny>, name: &str) -> PyResult<Vec<Held<'py>>> {
    let iter = text_items(texts, name)?;
    let mut out = Vec::with_capacity(texts.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        if let Ok(s) = item.cast::<PyString>() {
            if let Ok(b) = s.encode_utf8() {
                out.push(Held::Utf8(b));
                continue;
            }
        }
        match extract_text(&item, &format!("{name}[{i}]"))? {
            TextBuf::Utf16(u) => out.push(Held::Utf16(u)),
            TextBuf::Str(s) => out.push(Held::Utf8(PyBytes::new(texts.py(), s.as_bytes()))),
        }
    }
    Ok(out)
}

fn extract_texts(texts: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<TextBuf>> {
    let iter = text_items(texts, name)?;
    let mut out = Vec::with_capacity(texts.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        // The argument name is only formatted for an error.
        match extract_text_fast(&item) {
            Some(t) => out.push(t),
            None => out.push(extract_text(&item, &format!("{name}[{i}]"))?),
        }
    }
    Ok(out)
}

fn feature_to_py(py: Python<'_>, f: &Feature) -> PyResult<Py<PyAny>> {
    match f {
        Feature::Str(s) => Ok(PyString::new(py, s).into_any().unbind()),
        Feature::Utf16(u) => match String::from_utf16(u) {
            Ok(s) => Ok(PyString::new(py, &s).into_any().unbind()),
            Err(_) => {
                let bytes: Vec<u8> = u.iter().flat_map(|c| c.to_le_bytes()).collect();
                Ok(PyBytes::new(py, &bytes)
                    .call_method1("decode", ("utf-16-le", "surrogatepass"))?
                    .unbind())
            }
        },
    }
}

/// An unsigned fingerprint below 2**128 from a Python int.
fn extract_fp(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u128> {
    match obj.extract::<u128>() {
        Ok(v) => Ok(v),
        Err(_) if obj.is_instance_of::<PyInt>() || obj.hasattr("__index__").unwrap_or(false) => {
            Err(PyValueError::new_err(format!(
                "{name} must be an unsigned integer below 2**128, got {obj}"
            )))
        }
        Err(_) => {
            let ty = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            Err(PyTypeError::new_err(format!(
                "{name} must be int, not {ty}"
            )))
        }
    }
}

fn json_dumps(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    obj.py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()
}

fn json_loads<'py>(py: Python<'py>, s: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (s,))
}

fn check_bits(bits: i64) -> PyResult<u32> {
    if bits == 64 || bits == 128 {
        Ok(bits as u32)
    } else {
        Err(PyValueError::new_err(format!(
            "bits must be 64 or 128, got {bits}"
        )))
    }
}

fn fits(fp: u128, bits: u32, name: &str) -> PyResult<()> {
    if bits == 64 && fp > u64::MAX as u128 {
        return Err(PyValueError::new_err(format!(
            "{name} must be below 2**64 for bits=64, got {fp}"
        )));
    }
    Ok(())
}

/// SimHash fingerprints of text under one immutable configuration.
#[pyclass(module = "neardup._core", frozen, eq)]
#[derive(PartialEq)]
pub struct Fingerprinter {
    pub(crate) inner: core::Fingerprinter,
}

impl Fingerprinter {
    fn many_to_py<'py>(&self, py: Python<'py>, fps: Vec<u128>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.config().bits == 64 {
            let v: Vec<u64> = fps.into_iter().map(|x| x as u64).collect();
            Ok(v.into_pyarray(py).into_any())
        } else {
            let n = fps.len();
            let v: Vec<u64> = fps
                .into_iter()
                .flat_map(|x| [x as u64, (x >> 64) as u64])
                .collect();
            Ok(v.into_pyarray(py).reshape([n, 2])?.into_any())
        }
    }
}

#[pymethods]
impl Fingerprinter {
    #[new]
    #[pyo3(signature = (preset = None, **options), text_signature = "(preset='default', **options)")]
    fn new(
        preset: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let preset: String = match preset {
            None => "default".to_string(),
            Some(p) => p.extract().map_err(|_| {
                let ty = p
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "?".into());
                PyTypeError::new_err(format!("preset must be str, not {ty}"))
            })?,
        };
        let map = match options {
            Some(d) if !d.is_empty() => {
                let s = json_dumps(d.as_any()).map_err(|e| {
                    PyTypeError::new_err(format!("options must be JSON values: {e}"))
                })?;
                match serde_json::from_str::<serde_json::Value>(&s) {
                    Ok(serde_json::Value::Object(m)) => m,
                    // (json.dumps writes NaN and Infinity, which JSON has not; a huge int reads
                    // as out of range)
                    Err(e) => {
                        return Err(PyValueError::new_err(format!(
                            "options must hold finite numbers: {e}"
                        )))
                    }
                    _ => return Err(PyValueError::new_err("options must be keyword arguments")),
                }
            }
            _ => serde_json::Map::new(),
        };
        let config = Config::with_options(&preset, &map).map_err(to_py)?;
        Ok(Fingerprinter {
            inner: core::Fingerprinter::new(config).map_err(to_py)?,
        })
    }

    /// Rebuilds a fingerprinter from its `config` dict (validated first).
    #[classmethod]
    fn from_config(_cls: &Bound<'_, PyType>, config: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !config.is_instance_of::<PyDict>() {
            let ty = config.get_type().name()?.to_string();
            return Err(PyTypeError::new_err(format!(
                "config must be a dict, not {ty}"
            )));
        }
        let s = json_dumps(config)?;
        let config = Config::from_json(&s).map_err(to_py)?;
        Ok(Fingerprinter {
            inner: core::Fingerprinter::new(config).map_err(to_py)?,
        })
    }

    /// The configuration as a JSON-serialisable dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_loads(py, &self.inner.config().to_json())
    }

    #[getter]
    fn preset(&self) -> String {
        self.inner.config().preset.clone()
    }

    #[getter]
    fn bits(&self) -> u32 {
        self.inner.config().bits
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let ctor = py
            .import("neardup._core")?
            .getattr("_fingerprinter_from_json")?;
        let args = PyTuple::new(py, [slf.get().inner.config().to_json()])?;
        Ok((ctor, args))
    }

    fn __hash__(&self) -> u64 {
        xxhash_rust_hash(&self.inner.config().to_json())
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        let mut parts = vec![format!("preset={:?}", c.preset)];
        if let (Ok(base), Ok(serde_json::Value::Object(cur))) =
            (Config::preset(&c.preset), serde_json::to_value(c))
        {
            if let Ok(serde_json::Value::Object(base)) = serde_json::to_value(base) {
                for (k, v) in &cur {
                    if base.get(k) != Some(v) {
                        let shown = match v {
                            serde_json::Value::Bool(true) => "True".to_string(),
                            serde_json::Value::Bool(false) => "False".to_string(),
                            serde_json::Value::Object(_) => "{...}".to_string(),
                            other => other.to_string(),
                        };
                        parts.push(format!("{k}={shown}"));
                    }
                }
            }
        }
        format!("Fingerprinter({})", parts.join(", "))
    }

    /// The fingerprint of `text` (unsigned int; below 2**64 unless bits=128).
    fn fingerprint(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<u128> {
        let t = extract_text(text, "text")?;
        let inner = &self.inner;
        Ok(if t.byte_len() > 65536 {
            py.detach(|| inner.fingerprint(t.as_text()))
        } else {
            inner.fingerprint(t.as_text())
        })
    }

    /// Fingerprints of an iterable of str as a numpy array: uint64 of shape (n,), or for
    /// bits=128 shape (n, 2) with the low 64 bits in column 0.
    fn fingerprint_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let held = hold_texts(texts, "texts")?;
        let mut views: Vec<Text<'_>> = Vec::with_capacity(held.len());
        for h in &held {
            views.push(match h {
                // Checked again (Python's strict encoder already gave valid UTF-8), with SIMD:
                // std's check cost ~17 % of a Chinese batch, serially under the GIL.
                Held::Utf8(b) => Text::Str(
                    simdutf8::basic::from_utf8(b.as_bytes())
                        .map_err(|_| PyValueError::new_err("texts: invalid UTF-8 from Python"))?,
                ),
                Held::Utf16(u) => Text::Utf16(u),
            });
        }
        let inner = &self.inner;
        let fps = py.detach(|| inner.fingerprint_many_texts(&views));
        self.many_to_py(py, fps)
    }

    /// The weighted features of `text`, as hashed: list of (feature, weight).
    fn features(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<(Py<PyAny>, f64)>> {
        let t = extract_text(text, "text")?;
        let inner = &self.inner;
        let feats = py.detach(|| inner.features(t.as_text()));
        feats
            .iter()
            .map(|(f, w)| Ok((feature_to_py(py, f)?, *w)))
            .collect()
    }

    /// The fingerprint of (feature, weight) pairs, hashed with this configuration.
    fn fingerprint_features(&self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<u128> {
        let iter = pairs
            .try_iter()
            .map_err(|_| PyTypeError::new_err("pairs must be an iterable of (str, float)"))?;
        let mut feats: Vec<(Feature, f64)> = Vec::new();
        for (i, item) in iter.enumerate() {
            let item = item?;
            let (f, w): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| {
                PyTypeError::new_err(format!("pairs[{i}] must be a (str, float) pair"))
            })?;
            let f = match extract_text(&f, &format!("pairs[{i}][0]"))? {
                TextBuf::Str(s) => Feature::Str(s),
                TextBuf::Utf16(u) => Feature::Utf16(u),
            };
            let w: f64 = w
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("pairs[{i}][1] must be a number")))?;
            feats.push((f, w));
        }
        let inner = &self.inner;
        py.detach(|| inner.fingerprint_features(&feats))
            .map_err(to_py)
    }

    /// A new fingerprinter with an IDF table fitted on `texts` (weighting becomes "tfidf"
    /// unless it is "keywords"); terms in fewer than `min_df` texts use the default IDF.
    #[pyo3(signature = (texts, min_df = None), text_signature = "(self, texts, min_df=1)")]
    fn fit_idf(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        min_df: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let min_df = min_df.map_or(Ok(1), |m| int_arg(m, "min_df", 1, i64::MAX))? as u64;
        let bufs = extract_texts(texts, "texts")?;
        let inner = &self.inner;
        let fitted = py.detach(|| inner.fit_idf(&bufs, min_df)).map_err(to_py)?;
        Ok(Fingerprinter { inner: fitted })
    }

    /// `fp` as zero-padded lower-case hex (16 or 32 digits).
    fn to_hex(&self, fp: &Bound<'_, PyAny>) -> PyResult<String> {
        let bits = self.inner.config().bits;
        let v = extract_fp(fp, "fp")?;
        fits(v, bits, "fp")?;
        Ok(core::to_hex(v, bits))
    }

    /// `fp` as seed 000's bit string (bit 0 first).
    fn to_bitstring(&self, fp: &Bound<'_, PyAny>) -> PyResult<String> {
        let bits = self.inner.config().bits;
        let v = extract_fp(fp, "fp")?;
        fits(v, bits, "fp")?;
        Ok(core::to_bitstring(v, bits))
    }
}

fn xxhash_rust_hash(s: &str) -> u64 {
    // Python truncates __hash__ to Py_ssize_t; keep it positive to avoid -1.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h >> 1
}

#[pyfunction]
fn _fingerprinter_from_json(config: &str) -> PyResult<Fingerprinter> {
    let config = Config::from_json(config).map_err(to_py)?;
    Ok(Fingerprinter {
        inner: core::Fingerprinter::new(config).map_err(to_py)?,
    })
}

/// Number of differing bits between two fingerprints (unsigned ints below 2**128).
#[pyfunction]
fn hamming(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(neardup_core::hamming::hamming128(
        extract_fp(a, "a")?,
        extract_fp(b, "b")?,
    ))
}

/// Distances of `fp` to every fingerprint of a uint64 array, as a uint32 array.
#[pyfunction]
fn hamming_many<'py>(
    py: Python<'py>,
    fp: &Bound<'py, PyAny>,
    fps: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let v = extract_fp(fp, "fp")?;
    fits(v, 64, "fp")?;
    // A uint64 array is read in place; anything else is checked as query_many checks it (no
    // float, no negative number).
    let out = match fps.extract::<PyReadonlyArray1<'py, u64>>() {
        Ok(arr) => match arr.as_slice() {
            Ok(s) => py.detach(|| neardup_core::hamming::hamming_many(v as u64, s)),
            Err(_) => {
                let owned: Vec<u64> = arr.as_array().iter().copied().collect();
                neardup_core::hamming::hamming_many(v as u64, &owned)
            }
        },
        Err(_) => {
            let owned = to_fps(fps)?;
            py.detach(|| neardup_core::hamming::hamming_many(v as u64, &owned))
        }
    };
    Ok(out.into_pyarray(py))
}

/// `fp` as zero-padded lower-case hex of `bits / 4` digits.
#[pyfunction]
#[pyo3(signature = (fp, bits = None), text_signature = "(fp, bits=64)")]
fn to_hex(fp: &Bound<'_, PyAny>, bits: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let bits = check_bits(bits.map_or(Ok(64), |b| int_arg(b, "bits", i64::MIN, i64::MAX))?)?;
    let v = extract_fp(fp, "fp")?;
    fits(v, bits, "fp")?;
    Ok(core::to_hex(v, bits))
}

/// `fp` as seed 000's bit string: `bits` characters, bit 0 first.
#[pyfunction]
#[pyo3(signature = (fp, bits = None), text_signature = "(fp, bits=64)")]
fn to_bitstring(fp: &Bound<'_, PyAny>, bits: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let bits = check_bits(bits.map_or(Ok(64), |b| int_arg(b, "bits", i64::MIN, i64::MAX))?)?;
    let v = extract_fp(fp, "fp")?;
    fits(v, bits, "fp")?;
    Ok(core::to_bitstring(v, bits))
}

/// The fingerprint of a seed 000 bit string (bit 0 first).
#[pyfunction]
fn from_bitstring(bits: &str) -> PyResult<u128> {
    core::from_bitstring(bits).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Fingerprinter>()?;
    m.add("PRESETS", core::PRESETS.to_vec())?;
    m.add_function(wrap_pyfunction!(_fingerprinter_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(hamming, m)?)?;
    m.add_function(wrap_pyfunction!(hamming_many, m)?)?;
    m.add_function(wrap_pyfunction!(to_hex, m)?)?;
    m.add_function(wrap_pyfunction!(to_bitstring, m)?)?;
    m.add_function(wrap_pyfunction!(from_bitstring, m)?)?;
    Ok(())
}
