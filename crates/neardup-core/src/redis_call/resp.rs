//! Replies read from a Redis connection (RESP2, and RESP3, which redis-py's connections speak
//! when the server offers it), parsed in place: bulk strings are slices of the bytes
//! received, nothing is copied.

use super::Reply;
use crate::{Error, Result};

/// Deepest nesting of arrays accepted (the replies of our commands nest two deep).
const MAX_DEPTH: usize = 8;

fn protocol(what: &str) -> Error {
    Error::InvalidArgument(format!("protocol error in a Redis reply: {what}"))
}

/// The line at `at` (up to its `\r\n`) and where the next begins; `None` if not all here yet.
fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], at + end + 2))
}

fn number(digits: &[u8]) -> Result<i64> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| protocol("a length or integer is not a number"))
}

/// The reply at `*at` in `buf`, moving `*at` past it; `None` (and `*at` unchanged) if it is not
/// all here yet.
pub fn parse<'a>(buf: &'a [u8], at: &mut usize) -> Result<Option<Reply<'a>>> {
    parse_at(buf, at, 0)
}

fn parse_at<'a>(buf: &'a [u8], at: &mut usize, depth: usize) -> Result<Option<Reply<'a>>> {
    let Some((head, next)) = line(buf, *at) else {
        return Ok(None);
    };
    let (&kind, body) = head
        .split_first()
        .ok_or_else(|| protocol("an empty line"))?;
    let reply = match kind {
        // (simple string, RESP3 double and big number: as text)
        b'+' | b',' | b'(' => Reply::Bulk(body),
        b'-' => Reply::Error(body),
        b':' => Reply::Int(number(body)?),
        b'_' => Reply::Nil,
        b'#' => Reply::Int(i64::from(body == b"t")),
        // (bulk string; RESP3 blob error and verbatim string, whose first 4 bytes name its
        // format)
        b'$' | b'!' | b'=' => {
            let n = number(body)?;
            if n < 0 {
                Reply::Nil
            } else {
                let end = next + n as usize;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(protocol("a bulk string is not followed by CRLF"));
                }
                *at = end + 2;
                let data = &buf[next..end];
                return Ok(Some(match kind {
                    b'!' => Reply::Error(data),
                    b'=' => Reply::Bulk(data.get(4..).unwrap_or_default()),
                    _ => Reply::Bulk(data),
                }));
            }
        }
        // (array; RESP3 set, and map as its keys and values in turn)
        b'*' | b'~' | b'%' => {
            let n = number(body)?;
            if n < 0 {
                Reply::Nil
            } else {
                if depth >= MAX_DEPTH {
                    return Err(protocol("arrays nested too deep"));
                }
                let n = if kind == b'%' { 2 * n } else { n };
                let mut pos = next;
                let mut items = Vec::with_capacity((n as usize).min(1024));
                for _ in 0..n {
                    match parse_at(buf, &mut pos, depth + 1)? {
                        Some(item) => items.push(item),
                        None => return Ok(None),
                    }
                }
                *at = pos;
                return Ok(Some(Reply::Array(items)));
            }
        }
        _ => return Err(protocol("an unknown reply type")),
    };
    *at = next;
    Ok(Some(reply))
}

/// The first `n` replies in `buf`, or `None` if they are not all here yet; an error if more
/// bytes than those replies are here (the connection is out of step).
pub fn replies(buf: &[u8], n: usize) -> Result<Option<Vec<Reply<'_>>>> {
    let mut at = 0;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        match parse(buf, &mut at)? {
            Some(r) => out.push(r),
            None => return Ok(None),
        }
    }
    if at != buf.len() {
        return Err(protocol("more bytes than the replies expected"));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_reply_and_nesting() {
        let buf = b"*4\r\n:5\r\n$-1\r\n$3\r\na\r\n\r\n*2\r\n+OK\r\n-NOSCRIPT x\r\n:-7\r\n";
        let got = replies(buf, 2).unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                Reply::Array(vec![
                    Reply::Int(5),
                    Reply::Nil,
                    Reply::Bulk(b"a\r\n"),
                    Reply::Array(vec![Reply::Bulk(b"OK"), Reply::Error(b"NOSCRIPT x")]),
                ]),
                Reply::Int(-7),
            ]
        );
    }

    #[test]
    fn resp3_replies_read_as_their_resp2_forms() {
        let buf = b"*6\r\n_\r\n#t\r\n,1.5\r\n!3\r\nERR\r\n=7\r\ntxt:abc\r\n%1\r\n+k\r\n:2\r\n";
        assert_eq!(
            replies(buf, 1).unwrap().unwrap(),
            vec![Reply::Array(vec![
                Reply::Nil,
                Reply::Int(1),
                Reply::Bulk(b"1.5"),
                Reply::Error(b"ERR"),
                Reply::Bulk(b"abc"),
                Reply::Array(vec![Reply::Bulk(b"k"), Reply::Int(2)]),
            ])]
        );
    }

    #[test]
    fn a_reply_cut_anywhere_waits_for_the_rest() {
        let buf = b"*2\r\n$5\r\nhello\r\n*-1\r\n:1\r\n";
        for cut in 0..buf.len() {
            assert_eq!(replies(&buf[..cut], 2).unwrap(), None, "cut at {cut}");
        }
        assert_eq!(replies(buf, 2).unwrap().unwrap().len(), 2);
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        for bad in [
            &b"?x\r\n"[..],
            b"$x\r\n",
            b"$1\r\nab\r\n",
            b"\r\n",
            b":1\r\n:2\r\n",
        ] {
            assert!(replies(bad, 1).is_err(), "{bad:?}");
        }
        let deep = "*1\r\n".repeat(20) + ":1\r\n";
        assert!(replies(deep.as_bytes(), 1).is_err());
    }
}
