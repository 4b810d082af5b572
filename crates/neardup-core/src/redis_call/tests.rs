use super::*;

const BLOCKS: u32 = 7;
const K: u32 = 13;

fn keys() -> Keys {
    Keys {
        seq: "{ns}:seq".into(),
        count_prefix: "{ns}:n:".into(),
        id_prefix: "ns:r:".into(),
        horizon: "{ns}:horizon".into(),
        data_prefix: "ns:d:".into(),
        recent: "{ns}:recent".into(),
        bucket_prefix: "ns:b:".into(),
        write_sha: "w".repeat(40),
        recent_sha: "r".repeat(40),
    }
}

fn engine() -> Engine {
    Engine::new(keys(), BLOCKS, 0.5, 100).unwrap()
}

fn text(fp: u64, sketch: &[u32], id: &str, reference: u64) -> Text {
    Text {
        fp,
        sketch: sketch.to_vec(),
        k: K,
        periods: (0, 1),
        period: 0,
        expire_at: 0,
        id: id.into(),
        timestamp: "1.5".into(),
        text: b"some text".to_vec(),
        reference,
    }
}

fn record(fp: u64, r: u64) -> Vec<u8> {
    [fp.to_be_bytes(), r.to_be_bytes()].concat()
}

fn probes() -> usize {
    records::probe_values(0, BLOCKS, K).unwrap().len()
}

/// The replies of the `MGET` of the probe buckets: `first` in the first bucket, the others
/// missing.
fn buckets(first: &[u8]) -> Vec<Reply<'_>> {
    let mut out = vec![Reply::Nil; probes()];
    out[0] = Reply::Bulk(first);
    out
}

fn write_reply<'a>(ticket: i64, old: Option<&'a [u8]>, slots: &'a [u8]) -> Reply<'a> {
    Reply::Array(vec![
        Reply::Int(ticket),
        old.map_or(Reply::Nil, Reply::Bulk),
        Reply::Nil,
        Reply::Bulk(slots),
    ])
}

fn row<'a>(id: &'a [u8], ticket: &'a [u8], sketch: Option<&'a [u8]>) -> Reply<'a> {
    Reply::Array(vec![
        Reply::Bulk(id),
        Reply::Bulk(b"0"),
        Reply::Bulk(ticket),
        sketch.map_or(Reply::Nil, Reply::Bulk),
    ])
}

fn le(sketch: &[u32]) -> Vec<u8> {
    sketch.iter().flat_map(|h| h.to_le_bytes()).collect()
}

/// The commands of a request: each one's arguments.
fn commands(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn number(b: &[u8], at: &mut usize) -> usize {
        let end = *at + b[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let n = std::str::from_utf8(&b[*at + 1..end])
            .unwrap()
            .parse()
            .unwrap();
        *at = end + 2;
        n
    }
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        assert_eq!(bytes[at], b'*');
        let n = number(bytes, &mut at);
        let mut args = Vec::new();
        for _ in 0..n {
            assert_eq!(bytes[at], b'$');
            let len = number(bytes, &mut at);
            args.push(bytes[at..at + len].to_vec());
            assert_eq!(&bytes[at + len..at + len + 2], b"\r\n");
            at += len + 2;
        }
        out.push(args);
    }
    out
}

fn send(step: Step) -> Request {
    match step {
        Step::Send(r) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

fn done(step: Step) -> Decision {
    match step {
        Step::Done(d) => d,
        other => panic!("expected a decision, got {other:?}"),
    }
}

#[test]
fn a_first_text_is_written_with_its_fields_and_probe_buckets_and_added() {
    let mut e = engine();
    let (mut call, req) = e.begin(text(0xabcd, &[1, 2, 3], "7", 0x11)).unwrap();
    assert_eq!(req.replies, 2);
    let cmds = commands(&req.bytes);
    assert_eq!(cmds.len(), 2);
    let w = &cmds[0];
    assert_eq!(w[0], b"EVALSHA");
    assert_eq!(w[2], (6 + BLOCKS).to_string().as_bytes());
    assert_eq!(w[3], b"{ns}:seq");
    assert_eq!(w[4], b"{ns}:n:0");
    assert_eq!(w[5], b"ns:r:7");
    assert_eq!(w[7], b"ns:d:0000000000000011");
    let args = &w[9 + BLOCKS as usize..];
    assert_eq!(args[0], record(0xabcd, 0x11));
    assert_eq!(args[2], b"0"); // expire at
    assert_eq!(args[3], b"0"); // last ticket seen
    let fields: Vec<&[u8]> = args[4..].iter().map(Vec::as_slice).collect();
    let sketch = le(&[1, 2, 3]);
    let expected: Vec<&[u8]> = vec![
        b"i",
        b"7",
        b"f",
        b"000000000000abcd",
        b"t",
        b"1.5",
        b"p",
        b"0",
        b"x",
        b"some text",
        b"h",
        &sketch,
    ];
    assert_eq!(fields, expected);
    assert_eq!(cmds[1][0], b"MGET");
    assert_eq!(cmds[1].len(), 1 + probes());
    assert_eq!(call.written().unwrap().ticket, 0); // (sent: retract it if the call fails)
    let slots = record(0xabcd, 0x11);
    let d = done(
        e.take(
            &mut call,
            &[write_reply(1, None, &slots), Reply::Array(buckets(&slots))],
        )
        .unwrap(),
    );
    assert!(d.added && d.matches.is_empty() && d.candidates == 0);
    assert_eq!(
        d.written,
        Some(Written {
            ticket: 1,
            reference: 0x11,
            period: 0,
            old: None
        })
    );
    assert_eq!(e.len(), 1);
}

#[test]
fn a_copy_of_a_recent_version_is_answered_by_one_read_without_a_write() {
    let mut e = engine();
    let slots = record(0xabcd, 0x11);
    let (mut call, _) = e.begin(text(0xabcd, &[1, 2, 3], "7", 0x11)).unwrap();
    done(
        e.take(
            &mut call,
            &[write_reply(1, None, &slots), Reply::Array(buckets(&[]))],
        )
        .unwrap(),
    );
    // The same text again, one bit off: the guess reads instead of writing.
    let (mut call, req) = e.begin(text(0xabcc, &[1, 2, 3], "8", 0x22)).unwrap();
    let cmds = commands(&req.bytes);
    assert_eq!(cmds[0][0], b"MGET");
    assert_eq!(cmds[0][1], b"{ns}:horizon");
    assert_eq!(cmds.last().unwrap()[0], b"EVALSHA");
    assert_eq!(cmds.last().unwrap()[5], b"1"); // (from the ticket the write saw)
    assert!(call.written().is_none());
    let mut read = vec![Reply::Nil];
    read.extend(buckets(&slots));
    let ring = Reply::Array(vec![Reply::Int(1), Reply::Bulk(b"")]);
    let d = done(e.take(&mut call, &[Reply::Array(read), ring]).unwrap());
    assert!(!d.added && d.written.is_none() && d.candidates == 1);
    assert_eq!(
        d.matches,
        vec![Found {
            id: "7".into(),
            distance: 1,
            similarity: 1.0
        }]
    );
}

#[test]
fn candidates_not_kept_are_read_then_verified_and_a_write_after_a_near_copy_is_rejected() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[5, 6, 7, 8], "a", 0x33)).unwrap();
    // Another process's version 0x44 (ticket 3) is near; this write got ticket 5.
    let other = record(0xf1, 0x44);
    let slots = record(0xf0, 0x33);
    let step = e
        .take(
            &mut call,
            &[write_reply(5, None, &slots), Reply::Array(buckets(&other))],
        )
        .unwrap();
    let req = send(step);
    let cmds = commands(&req.bytes);
    assert_eq!(
        cmds,
        vec![vec![
            b"HMGET".to_vec(),
            b"ns:d:0000000000000044".to_vec(),
            b"i".to_vec(),
            b"p".to_vec(),
            b"q".to_vec(),
            b"h".to_vec(),
        ]]
    );
    let sketch = le(&[5, 6, 7, 9]);
    let d = done(
        e.take(&mut call, &[row(b"b", b"3", Some(&sketch))])
            .unwrap(),
    );
    assert!(!d.added);
    assert_eq!(
        d.matches,
        vec![Found {
            id: "b".into(),
            distance: 1,
            similarity: 0.6
        }]
    );
    assert_eq!(d.written.unwrap().ticket, 5);
    // The other's data kept, and the write's own (from its reply on, as Python's path keeps
    // them) until Python retracts it and the engine forgets it.
    assert_eq!(e.len(), 2);
    e.forget(&[0x33]);
    assert_eq!(e.len(), 1);
}

#[test]
fn a_near_version_written_after_this_one_is_not_its_predecessor() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[5, 6, 7, 8], "a", 0x33)).unwrap();
    let other = record(0xf0, 0x44);
    let step = e
        .take(
            &mut call,
            &[write_reply(5, None, b""), Reply::Array(buckets(&other))],
        )
        .unwrap();
    send(step);
    let sketch = le(&[5, 6, 7, 8]);
    let d = done(
        e.take(&mut call, &[row(b"b", b"6", Some(&sketch))])
            .unwrap(),
    );
    assert!(d.added && d.candidates == 0);
}

#[test]
fn a_replaced_version_and_a_gone_candidate() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[1], "a", 0x33)).unwrap();
    let old = 0x99u64.to_be_bytes();
    let other = record(0xf0, 0x44);
    send(
        e.take(
            &mut call,
            &[
                write_reply(5, Some(&old), b""),
                Reply::Array(buckets(&other)),
            ],
        )
        .unwrap(),
    );
    let gone = Reply::Array(vec![Reply::Nil, Reply::Nil, Reply::Nil, Reply::Nil]);
    let d = done(e.take(&mut call, &[gone]).unwrap());
    assert!(d.added);
    assert_eq!(d.written.unwrap().old, Some(0x99));
}

#[test]
fn candidates_without_a_sketch_wait_for_python_s() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[1, 2], "a", 0x33)).unwrap();
    let other = record(0xf0, 0x44);
    send(
        e.take(
            &mut call,
            &[write_reply(5, None, &other), Reply::Array(buckets(&other))],
        )
        .unwrap(),
    );
    let step = e.take(&mut call, &[row(b"b", b"2", None)]).unwrap();
    assert_eq!(step, Step::Sketches(vec![(0x44, 0xf0)]));
    let d = done(e.sketches(&mut call, &[Some(vec![1, 2])]).unwrap());
    assert!(!d.added && d.matches.len() == 1);
    // (kept: the next call needs no sketch from Python)
    let (mut call, req) = e.begin(text(0xf1, &[1, 2], "c", 0x55)).unwrap();
    assert_eq!(commands(&req.bytes)[0][0], b"MGET"); // (the guess found the kept version)
    let mut read = vec![Reply::Nil];
    read.extend(buckets(&other));
    let ring = Reply::Array(vec![Reply::Int(9), Reply::Bulk(b"")]);
    let d = done(e.take(&mut call, &[Reply::Array(read), ring]).unwrap());
    assert_eq!(d.matches.len(), 1);
}

#[test]
fn errors_and_a_ref_in_use_are_left_to_python() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[1], "a", 0x33)).unwrap();
    let step = e.take(
        &mut call,
        &[Reply::Error(b"ERR boom"), Reply::Array(buckets(&[]))],
    );
    assert_eq!(step.unwrap(), Step::Failed("ERR boom".into()));
    assert_eq!(call.written().unwrap().reference, 0x33); // (it may have run in part)
    let (mut call, _) = e.begin(text(0xf0, &[1], "a", 0x36)).unwrap();
    let step = e.take(
        &mut call,
        &[Reply::Error(b"NOSCRIPT x"), Reply::Array(buckets(&[]))],
    );
    assert_eq!(step.unwrap(), Step::Fallback);
    assert!(call.written().is_none()); // (the script did not run)
    let (mut call, _) = e.begin(text(0xf0, &[1], "a", 0x34)).unwrap();
    let in_use = Reply::Array(vec![Reply::Int(-1)]);
    assert_eq!(
        e.take(&mut call, &[in_use, Reply::Array(buckets(&[]))])
            .unwrap(),
        Step::Fallback
    );
    assert!(call.written().is_none());
    let (mut call, _) = e.begin(text(0xf0, &[1], "a", 0x35)).unwrap();
    assert!(e.take(&mut call, &[Reply::Int(3)]).is_err());
    assert!(e.take(&mut call, &[]).is_err()); // (over)
}

#[test]
fn the_horizon_drops_the_buckets_of_expired_periods() {
    let mut e = engine();
    let mut t = text(0xf0, &[1], "a", 0x33);
    t.periods = (4, 6);
    t.period = 5;
    let (mut call, req) = e.begin(t).unwrap();
    assert_eq!(commands(&req.bytes)[1].len(), 1 + 2 * probes());
    let old = record(0xf0, 0x44);
    let mut read = buckets(&old);
    read.extend(buckets(&[]));
    let reply = Reply::Array(vec![Reply::Int(1), Reply::Nil, Reply::Bulk(b"5")]);
    let d = done(e.take(&mut call, &[reply, Reply::Array(read)]).unwrap());
    assert!(d.added && d.candidates == 0);
}

#[test]
fn the_ring_keeps_the_newest_records_and_starts_over_with_the_counter() {
    let mut e = engine();
    e.saw(3, &[record(1, 10), record(2, 0), record(3, 30)].concat());
    assert_eq!(e.seen_ticket, 3);
    assert_eq!(&e.seen_refs[..3], &[10, 30, 0]);
    e.saw(2, &record(4, 40)); // (the counter started over: not kept, followed)
    assert_eq!(e.seen_ticket, 2);
    assert_eq!(&e.seen_refs[..3], &[10, 30, 0]);
    e.heard(4, &record(5, 50)); // (read by Python's path: the same)
    assert_eq!((e.seen_ticket, e.seen_refs[2]), (4, 50));
    e.clear();
    assert!(e.seen_refs.iter().all(|&r| r == 0) && e.is_empty());
}

#[test]
fn the_cache_drops_its_oldest_half_when_full() {
    let mut e = Engine::new(keys(), BLOCKS, 0.5, 4).unwrap();
    for r in 1..=5 {
        e.remember(
            r,
            Version {
                id: "x".into(),
                ticket: None,
                sketch: None,
            },
        );
    }
    assert_eq!(e.len(), 3);
    assert!(!e.cache.contains_key(&1) && !e.cache.contains_key(&2) && e.cache.contains_key(&5));
    assert!(Engine::new(keys(), BLOCKS, 0.5, 0).is_err());
}

#[test]
fn the_data_read_go_to_the_refs_asked_for_whatever_the_cache_does_meanwhile() {
    // Two candidates not kept; while their data are read, another call keeps the first
    // (another thread sharing the engine): the rows still go to the refs they were asked for.
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[5, 6, 7, 8], "a", 0x33)).unwrap();
    let both = [record(0xf1, 0x44), record(0xf3, 0x55)].concat();
    let req = send(
        e.take(
            &mut call,
            &[write_reply(9, None, b""), Reply::Array(buckets(&both))],
        )
        .unwrap(),
    );
    assert_eq!(req.replies, 2);
    e.remember(
        0x44,
        Version {
            id: "other".into(),
            ticket: Some(1),
            sketch: Some(vec![1].into()),
        },
    );
    let (near, far) = (le(&[5, 6, 7, 8]), le(&[100]));
    let d = done(
        e.take(
            &mut call,
            &[
                row(b"copy", b"2", Some(&near)),
                row(b"far", b"3", Some(&far)),
            ],
        )
        .unwrap(),
    );
    assert_eq!(
        d.matches,
        vec![Found {
            id: "copy".into(),
            distance: 1,
            similarity: 1.0
        }]
    );
    assert_eq!(d.candidates, 2);
    // The same when the cache evicts a candidate it had when the request was made.
    let mut e = Engine::new(keys(), BLOCKS, 0.5, 2).unwrap();
    e.remember(
        0x44,
        Version {
            id: "kept".into(),
            ticket: Some(1),
            sketch: Some(vec![5, 6, 7, 8].into()),
        },
    );
    let (mut call, _) = e.begin(text(0xf0, &[5, 6, 7, 8], "a", 0x33)).unwrap();
    let three = [record(0xf1, 0x44), record(0xf3, 0x55), record(0xf3, 0x66)].concat();
    let req = send(
        e.take(
            &mut call,
            &[write_reply(9, None, b""), Reply::Array(buckets(&three))],
        )
        .unwrap(),
    );
    assert_eq!(req.replies, 2); // (0x55 and 0x66; keeping them evicts 0x44)
    let d = done(
        e.take(
            &mut call,
            &[row(b"x", b"2", Some(&far)), row(b"y", b"3", Some(&far))],
        )
        .unwrap(),
    );
    assert_eq!(
        d.matches.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        vec!["kept"]
    );
    assert!(!e.cache.contains_key(&0x44));
}

#[test]
fn candidates_without_a_sketch_are_asked_for_nearest_first() {
    let mut e = engine();
    let (mut call, _) = e.begin(text(0xf0, &[1, 2], "a", 0x33)).unwrap();
    let recs = [record(0xf3, 0x44), record(0xf1, 0x55), record(0xf1, 0x22)].concat();
    send(
        e.take(
            &mut call,
            &[write_reply(9, None, b""), Reply::Array(buckets(&recs))],
        )
        .unwrap(),
    );
    let rows = [
        row(b"b", b"2", None),
        row(b"c", b"3", None),
        row(b"d", b"3", None),
    ];
    let step = e.take(&mut call, &rows).unwrap();
    // (0x55 and 0x22 at distance 1 have tickets 3 and 3: by ref; 0x44 at distance 2 last)
    assert_eq!(
        step,
        Step::Sketches(vec![(0x22, 0xf1), (0x55, 0xf1), (0x44, 0xf3)])
    );
    // (the order of the matches: best first, then nearest)
    let d = done(
        e.sketches(&mut call, &[Some(vec![1, 2, 3]), Some(vec![1, 2]), None])
            .unwrap(),
    );
    let ids: Vec<&str> = d.matches.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, vec!["c", "d"]);
    assert_eq!(d.candidates, 3);
    // A version without a ticket never precedes a write.
    let (mut call, _) = e.begin(text(0xf0, &[1, 2], "e", 0x77)).unwrap();
    let untimed = record(0xf0, 0x88);
    send(
        e.take(
            &mut call,
            &[write_reply(9, None, b""), Reply::Array(buckets(&untimed))],
        )
        .unwrap(),
    );
    let sketch = le(&[1, 2]);
    let no_ticket = Reply::Array(vec![
        Reply::Bulk(b"n"),
        Reply::Bulk(b"0"),
        Reply::Nil,
        Reply::Bulk(&sketch),
    ]);
    assert!(done(e.take(&mut call, &[no_ticket]).unwrap()).added);
}

#[test]
fn replies_fed_in_pieces_and_bad_periods() {
    let mut e = engine();
    let (mut call, req) = e.begin(text(0xf0, &[1], "a", 0x33)).unwrap();
    assert_eq!(req.replies, 2);
    let mut wire = b"*4\r\n:1\r\n$-1\r\n$-1\r\n$0\r\n\r\n".to_vec();
    wire.extend(format!("*{}\r\n", probes()).as_bytes());
    for _ in 0..probes() {
        wire.extend(b"$-1\r\n");
    }
    for b in &wire[..wire.len() - 1] {
        assert_eq!(e.feed(&mut call, &[*b]).unwrap(), None);
    }
    let d = done(e.feed(&mut call, &wire[wire.len() - 1..]).unwrap().unwrap());
    assert!(d.added && d.written.unwrap().ticket == 1);
    let (mut call, _) = e.begin(text(0xf0, &[1], "b", 0x34)).unwrap();
    assert!(e.feed(&mut call, b"?\r\n").is_err());
    for periods in [(5, 5), (0, 5000), (i64::MIN, i64::MAX)] {
        let mut t = text(0xf0, &[1], "c", 0x35);
        t.periods = periods;
        assert!(e.begin(t).is_err(), "{periods:?}");
    }
}

#[test]
fn forgotten_versions_leave_the_order_list_too() {
    let mut e = Engine::new(keys(), BLOCKS, 0.5, 10).unwrap();
    for r in 1..=1000u64 {
        e.remember(
            r,
            Version {
                id: "x".into(),
                ticket: None,
                sketch: None,
            },
        );
        e.forget(&[r]);
    }
    assert!(e.is_empty() && e.order.len() <= 66);
}
