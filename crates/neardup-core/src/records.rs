//! The bucket records of the Redis backend (format 2) and the keys of the buckets a query
//! reads: the client-side hot loop of a Redis check (the Python package owns the protocol).
//!
//! A bucket is a string of 16-byte records: the fingerprint then the *ref* of a stored version
//! (8 bytes each, big-endian). The 64 bits are cut into `blocks` blocks, most significant
//! first, the first `64 % blocks` one bit wider (`neardup.backends.layout.BlockLayout`).

use crate::{Error, Result};

/// Bytes of one bucket record.
pub const RECORD_BYTES: usize = 16;

/// The big-endian u64 of 8 bytes.
fn be_u64(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |v, &x| v << 8 | u64::from(x))
}

/// `(ref, fingerprint, distance)` of every record within `k` bits of `fp` in `buckets` (each
/// a whole number of records), read one after the other as if concatenated, in the order they
/// lie; a ref met again (the same version in another bucket) is listed once.
pub fn near_records_in<'a>(
    buckets: impl IntoIterator<Item = &'a [u8]>,
    fp: u64,
    k: u32,
) -> Result<Vec<(u64, u64, u32)>> {
    let mut out: Vec<(u64, u64, u32)> = Vec::new();
    for blob in buckets {
        if !blob.len().is_multiple_of(RECORD_BYTES) {
            return Err(Error::InvalidArgument(format!(
                "a bucket holds {} bytes, not a multiple of {RECORD_BYTES}: not neardup format 2 \
                 data",
                blob.len()
            )));
        }
        for rec in blob.chunks_exact(RECORD_BYTES) {
            let f = be_u64(&rec[..8]);
            let d = (f ^ fp).count_ones();
            if d <= k {
                let r = be_u64(&rec[8..]);
                // Near records are few (a handful per query): a linear scan beats a set.
                if !out.iter().any(|&(seen, _, _)| seen == r) {
                    out.push((r, f, d));
                }
            }
        }
    }
    Ok(out)
}

/// `(shift, width)` of each of `blocks` blocks (1..=64), most significant first.
pub fn block_cut(blocks: u32) -> Result<Vec<(u32, u32)>> {
    if !(1..=64).contains(&blocks) {
        return Err(Error::InvalidArgument(format!(
            "blocks must be an int in 1..64, got {blocks}"
        )));
    }
    let (base, extra) = (64 / blocks, 64 % blocks);
    let mut top = 64;
    Ok((0..blocks)
        .map(|i| {
            let w = base + u32::from(i < extra);
            top -= w;
            (top, w)
        })
        .collect())
}

/// Probe radius of each block for a query at `k` (`None`: not probed): with
/// `k = blocks * r + a`, the first `a + 1` blocks within `r`, the others within `r - 1`.
pub fn probe_radii(blocks: u32, k: u32) -> Vec<Option<u32>> {
    let (r, a) = (k / blocks, k % blocks);
    (0..blocks)
        .map(|i| if i <= a { Some(r) } else { r.checked_sub(1) })
        .collect()
}

fn low_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Calls `f` with every mask of at most `r` bits below bit `width`: 0 first, then by number of
/// bits, each size in the lexicographic order of its bit positions (Python's
/// `itertools.combinations(range(width), n)`).
fn for_each_mask(width: u32, r: u32, mut f: impl FnMut(u64)) {
    f(0);
    let width = width as usize;
    for n in 1..=(r as usize).min(width) {
        let mut pos: Vec<usize> = (0..n).collect();
        loop {
            f(pos.iter().fold(0u64, |m, &b| m | 1 << b));
            // The next combination: bump the rightmost position that can move.
            let Some(i) = (0..n).rev().find(|&i| pos[i] < width - n + i) else {
                break;
            };
            pos[i] += 1;
            for j in i + 1..n {
                pos[j] = pos[j - 1] + 1;
            }
        }
    }
}

/// `(block, value)` of every bucket a query for `fp` at `k` reads in one period: blocks in
/// order, each block's values within its radius (the value itself first).
pub fn probe_values(fp: u64, blocks: u32, k: u32) -> Result<Vec<(u32, u64)>> {
    let cut = block_cut(blocks)?;
    let mut values = Vec::new();
    for ((b, &(shift, width)), radius) in (0u32..).zip(&cut).zip(probe_radii(blocks, k)) {
        if let Some(r) = radius {
            let v = (fp >> shift) & low_mask(width);
            for_each_mask(width, r, |m| values.push((b, v ^ m)));
        }
    }
    Ok(values)
}

/// Hex digits of `value` (lower case, no leading zeros; `0` for zero).
fn hex_digits(value: u64) -> usize {
    ((64 - value.leading_zeros()).max(1) as usize).div_ceil(4)
}

/// Decimal digits of `n`.
fn decimal_digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Bytes of the key `<prefix><block>:<value hex>`.
fn key_len(prefix: &str, block: u32, value: u64) -> usize {
    prefix.len() + decimal_digits(block as usize) + 1 + hex_digits(value)
}

/// Appends `<prefix><block>:<value hex>` (lower-case hex, no leading zeros) to `out`.
fn push_key(out: &mut Vec<u8>, prefix: &str, block: u32, value: u64) {
    out.extend_from_slice(prefix.as_bytes());
    push_decimal(out, block as usize);
    out.push(b':');
    for i in (0..hex_digits(value)).rev() {
        out.push(b"0123456789abcdef"[((value >> (4 * i)) & 0xf) as usize]);
    }
}

/// The key of the bucket of `fp` in each block, `<prefix><block>:<value hex>`: the buckets a
/// version's record is stored in (one period's).
pub fn bucket_keys(prefix: &str, fp: u64, blocks: u32) -> Result<Vec<String>> {
    let mut key = Vec::with_capacity(prefix.len() + 24);
    Ok((0u32..)
        .zip(block_cut(blocks)?)
        .map(|(b, (shift, width))| {
            key.clear();
            push_key(&mut key, prefix, b, (fp >> shift) & low_mask(width));
            // (the prefix is UTF-8 and the rest ASCII: never lossy)
            String::from_utf8_lossy(&key).into_owned()
        })
        .collect())
}

fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// The key of every bucket a query for `fp` at `k` reads, for each prefix (one per live period,
/// e.g. `ns:b:<period>:`): `<prefix><block>:<value hex>`, prefix by prefix, in the order of
/// [`probe_values`].
pub fn probe_keys(prefixes: &[&str], fp: u64, blocks: u32, k: u32) -> Result<Vec<String>> {
    let values = probe_values(fp, blocks, k)?;
    let mut out = Vec::with_capacity(values.len() * prefixes.len());
    let mut key = Vec::with_capacity(64);
    for p in prefixes {
        for &(b, v) in &values {
            key.clear();
            push_key(&mut key, p, b, v);
            // (the prefix is UTF-8 and the rest ASCII: never lossy)
            out.push(String::from_utf8_lossy(&key).into_owned());
        }
    }
    Ok(out)
}

/// Appends the RESP header of an array of `n` items (a command of `n` arguments, which follow
/// as bulk strings: [`push_bulk`]).
pub fn push_array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends the RESP encoding of one bulk string.
pub fn push_bulk(out: &mut Vec<u8>, arg: &[u8]) {
    push_bulk_header(out, arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Appends the RESP header of a bulk string of `len` bytes (the bytes and `\r\n` follow).
fn push_bulk_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    push_decimal(out, len);
    out.extend_from_slice(b"\r\n");
}

/// The Redis command `MGET <lead keys...> <probe keys...>` in RESP, ready to send: the probe
/// keys of [`probe_keys`] without building each as a separate string on the caller's side.
pub fn probe_mget(
    lead: &[&str],
    prefixes: &[&str],
    fp: u64,
    blocks: u32,
    k: u32,
) -> Result<Vec<u8>> {
    let values = probe_values(fp, blocks, k)?;
    let n = 1 + lead.len() + values.len() * prefixes.len();
    let mut out = Vec::with_capacity(32 + n * 40);
    push_array_header(&mut out, n);
    push_bulk(&mut out, b"MGET");
    for key in lead {
        push_bulk(&mut out, key.as_bytes());
    }
    for p in prefixes {
        for &(b, v) in &values {
            // (the bulk string's header, then the key written in place)
            push_bulk_header(&mut out, key_len(p, b, v));
            push_key(&mut out, p, b, v);
            out.extend_from_slice(b"\r\n");
        }
    }
    Ok(out)
}

/// A stored Jaccard sketch (the data field `h`: sorted distinct 32-bit hashes, little-endian)
/// as hashes.
pub fn sketch_from_le(raw: &[u8]) -> Result<Vec<u32>> {
    if !raw.len().is_multiple_of(4) {
        return Err(Error::InvalidArgument(format!(
            "a stored sketch holds {} bytes, not a multiple of 4: not neardup format 2 data",
            raw.len()
        )));
    }
    Ok(raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fp: u64, r: u64) -> Vec<u8> {
        [fp.to_be_bytes(), r.to_be_bytes()].concat()
    }

    #[test]
    fn near_records_measures_and_lists_each_ref_once() {
        let blob = [
            record(0b1011, 7),
            record(u64::MAX, 8),
            record(0b1011, 7),
            record(0, 9),
        ]
        .concat();
        assert_eq!(
            near_records_in([&blob[..]], 0b1010, 2).unwrap(),
            vec![(7, 0b1011, 1), (9, 0, 2)]
        );
        assert!(near_records_in([&blob[..15]], 0, 3).is_err());
        assert!(near_records_in([&[][..]], 0, 64).unwrap().is_empty());
    }

    #[test]
    fn near_records_in_buckets_reads_them_as_one_blob() {
        let (a, b) = (record(1, 5), [record(3, 6), record(1, 5)].concat());
        let parts: [&[u8]; 3] = [&a, &[], &b];
        assert_eq!(
            near_records_in(parts, 0, 2).unwrap(),
            near_records_in([&[a.clone(), b.clone()].concat()[..]], 0, 2).unwrap()
        );
        let torn: [&[u8]; 2] = [&a[..8], &a[8..]];
        assert!(near_records_in(torn, 0, 64).is_err());
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        push_array_header(&mut out, 2);
        push_bulk(&mut out, b"GET");
        push_bulk(&mut out, b"k\r\n");
        push_array_header(&mut out, 0);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nk\r\n\r\n*0\r\n");
    }

    #[test]
    fn sketches_read_back_little_endian() {
        assert_eq!(
            sketch_from_le(&[1, 0, 0, 0, 0, 1, 0, 0]).unwrap(),
            vec![1, 256]
        );
        assert!(sketch_from_le(&[1, 2, 3]).is_err());
    }

    #[test]
    fn probe_mget_is_the_resp_of_the_keys() {
        let keys = probe_keys(&["n:b:0:"], 0xff, 64, 1).unwrap();
        let mut want = format!("*{}\r\n$4\r\nMGET\r\n$3\r\nh:z\r\n", keys.len() + 2);
        for key in &keys {
            want += &format!("${}\r\n{key}\r\n", key.len());
        }
        let got = probe_mget(&["h:z"], &["n:b:0:"], 0xff, 64, 1).unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }

    #[test]
    fn bucket_keys_name_each_block_of_the_fingerprint() {
        assert_eq!(
            bucket_keys("n:b:0:", 0xffff_0000_0000_0001, 4).unwrap(),
            vec!["n:b:0:0:ffff", "n:b:0:1:0", "n:b:0:2:0", "n:b:0:3:1"]
        );
        assert!(bucket_keys("p:", 0, 65).is_err());
        for (block, value) in [(0, 0), (9, 0xf), (10, 0x10), (63, u64::MAX)] {
            let mut key = Vec::new();
            push_key(&mut key, "pré:", block, value);
            assert_eq!(
                key.len(),
                key_len("pré:", block, value),
                "{block} {value:x}"
            );
        }
    }

    #[test]
    fn masks_are_every_combination_in_order() {
        let mut seen = Vec::new();
        for_each_mask(4, 2, |m| seen.push(m));
        assert_eq!(seen, vec![0, 1, 2, 4, 8, 3, 5, 9, 6, 10, 12]);
        let mut n = 0;
        for_each_mask(9, 9, |_| n += 1);
        assert_eq!(n, 512);
    }

    #[test]
    fn probe_keys_cover_every_fingerprint_within_k() {
        // Every fingerprint within k of fp shares a probed bucket (pigeonhole), brute force.
        let fp = 0x0123_4567_89ab_cdef_u64;
        for (blocks, k) in [(4, 3), (7, 13), (2, 1), (64, 5), (1, 2)] {
            let keys = probe_keys(&["p:"], fp, blocks, k).unwrap();
            let cut = block_cut(blocks).unwrap();
            let mut x = 0x9e37_79b9_7f4a_7c15_u64;
            for _ in 0..2000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut other = fp;
                for j in 0..k {
                    other ^= 1 << ((x >> (j * 4 % 60)) % 64);
                }
                let own: Vec<String> = cut
                    .iter()
                    .enumerate()
                    .map(|(b, &(s, w))| format!("p:{b}:{:x}", (other >> s) & low_mask(w)))
                    .collect();
                assert!(
                    own.iter().any(|key| keys.contains(key)),
                    "{blocks} {k} {other:x}"
                );
            }
        }
        assert!(probe_keys(&["p:"], 0, 0, 3).is_err());
    }
}
