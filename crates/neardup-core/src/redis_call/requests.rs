//! The requests of a one-text call, packed in RESP: the same bytes as Python's path.

use super::{Call, Engine, Request, Stage, Text, Written, FIELDS};
use crate::records::{self, probe_mget, push_array_header, push_bulk};
use crate::Result;

impl Engine {
    pub(super) fn data_key(&self, reference: u64) -> String {
        format!("{}{reference:016x}", self.keys.data_prefix)
    }

    pub(super) fn prefixes(&self, text: &Text) -> Vec<String> {
        (text.periods.0..text.periods.1)
            .map(|q| format!("{}{q}:", self.keys.bucket_prefix))
            .collect()
    }

    /// `HMGET <data key> i p q h` of each of `refs`: their data, read for candidates.
    pub(super) fn push_data_reads(&self, bytes: &mut Vec<u8>, refs: impl Iterator<Item = u64>) {
        for r in refs {
            push_array_header(bytes, 2 + FIELDS.len());
            push_bulk(bytes, b"HMGET");
            push_bulk(bytes, self.data_key(r).as_bytes());
            for f in FIELDS {
                push_bulk(bytes, f);
            }
        }
    }

    /// `MGET <horizon> <probe buckets...>`, the data of `prefetch`, and the ring's new slots.
    pub(super) fn check_request(&self, text: &Text, prefetch: &[(u64, u64)]) -> Result<Request> {
        let prefixes = self.prefixes(text);
        let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        let mut bytes = probe_mget(
            &[self.keys.horizon.as_str()],
            &prefixes,
            text.fp,
            self.blocks,
            text.k,
        )?;
        self.push_data_reads(&mut bytes, prefetch.iter().map(|&(r, _)| r));
        push_array_header(&mut bytes, 6);
        for arg in [
            b"EVALSHA".as_slice(),
            self.keys.recent_sha.as_bytes(),
            b"2",
            self.keys.seq.as_bytes(),
            self.keys.recent.as_bytes(),
            self.seen_ticket.to_string().as_bytes(),
        ] {
            push_bulk(&mut bytes, arg);
        }
        Ok(Request {
            bytes,
            replies: prefetch.len() + 2,
        })
    }

    /// The write script for the call's text, then `MGET <probe buckets...>`; from here on
    /// the call has written.
    pub(super) fn write_request(&mut self, call: &mut Call) -> Result<Request> {
        let t = &call.text;
        let k = &self.keys;
        let own_prefix = format!("{}{}:", k.bucket_prefix, t.period);
        let own = records::bucket_keys(&own_prefix, t.fp, self.blocks)?;
        let ref8 = t.reference.to_be_bytes();
        let record: Vec<u8> = [t.fp.to_be_bytes(), ref8].concat();
        let sketch: Vec<u8> = t.sketch.iter().flat_map(|h| h.to_le_bytes()).collect();
        let (period, fp_hex) = (t.period.to_string(), format!("{:016x}", t.fp));
        let count_key = format!("{}{}", k.count_prefix, t.period);
        let id_key = format!("{}{}", k.id_prefix, t.id);
        let data_key = self.data_key(t.reference);
        let (n_keys, expire, seen) = (
            (6 + own.len()).to_string(),
            t.expire_at.to_string(),
            self.seen_ticket.to_string(),
        );
        let mut args: Vec<&[u8]> = vec![
            b"EVALSHA",
            k.write_sha.as_bytes(),
            n_keys.as_bytes(),
            k.seq.as_bytes(),
            count_key.as_bytes(),
            id_key.as_bytes(),
            k.horizon.as_bytes(),
            data_key.as_bytes(),
            k.recent.as_bytes(),
        ];
        args.extend(own.iter().map(|s| s.as_bytes()));
        args.extend([record.as_slice(), &ref8, expire.as_bytes(), seen.as_bytes()]);
        let fields: [&[u8]; 12] = [
            b"i",
            t.id.as_bytes(),
            b"f",
            fp_hex.as_bytes(),
            b"t",
            t.timestamp.as_bytes(),
            b"p",
            period.as_bytes(),
            b"x",
            &t.text,
            b"h",
            &sketch,
        ];
        args.extend(fields);
        let mut bytes = Vec::with_capacity(args.iter().map(|a| a.len() + 16).sum::<usize>() + 4096);
        push_array_header(&mut bytes, args.len());
        for a in &args {
            push_bulk(&mut bytes, a);
        }
        let prefixes = self.prefixes(t);
        let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        bytes.extend(probe_mget(&[], &prefixes, t.fp, self.blocks, t.k)?);
        call.written = Some(Written {
            ticket: 0,
            reference: t.reference,
            period: t.period,
            old: None,
        });
        call.stage = Stage::Write;
        Ok(Request { bytes, replies: 2 })
    }
}
