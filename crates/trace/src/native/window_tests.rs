//! The window step against the record-at-a-time decoder, on random and
//! edge-case record bytes, in the portable build and (where the CPU has
//! them) the `avx2` and `avx512` tiers' builds and the `avx512` tier's with VBMI2
//! (whose window into a page filter decodes eight references at a time), each into a
//! vector of events and into page filters of every depth, with and without fragments.

use super::codec::{encode, put_varint, Cursor, Prev, PADDING};
use super::window::{starts, stops_portable, WINDOW};
use crate::consumer::{of_words, Lru};
use crate::{PageBatch, PageFilter, PageSink};
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use proptest::prelude::*;

/// The starts of a span read a record at a time as a tag and one varint
/// (the grammar `starts` assumes, whatever the bytes are).
fn starts_one_by_one(span: &[u8; WINDOW]) -> u64 {
    let (mut m, mut at) = (0u64, 0);
    while at < WINDOW {
        m |= 1 << at;
        at += 1;
        while at < WINDOW && span[at] >= 0x80 {
            at += 1;
        }
        at += 1;
    }
    m
}

/// What `decode` gives on `bytes` and its padding, from a fresh cursor:
/// the events, the error and where the cursor ends.
fn run(
    bytes: &[u8],
    decode: impl FnOnce(&mut Cursor<'_>, &mut Prev, &mut Vec<Event>) -> Option<&'static str>,
) -> (Vec<Event>, Option<&'static str>, usize) {
    let buf = padded(bytes);
    let mut cur = Cursor {
        buf: &buf,
        end: bytes.len(),
        pos: 0,
    };
    let (mut prev, mut out) = (Prev::default(), Vec::new());
    let err = decode(&mut cur, &mut prev, &mut out);
    (out, err, cur.pos)
}

/// What the window decoder must give: `Cursor::record` `n` times (stopping
/// at the first error).
fn one_by_one(bytes: &[u8], n: usize) -> (Vec<Event>, Option<&'static str>, usize) {
    run(bytes, |cur, prev, out| {
        for _ in 0..n {
            match cur.record(prev) {
                Ok(e) => out.push(e),
                Err(e) => return Some(e),
            }
        }
        None
    })
}

/// A build of the decoding loop: the portable one, or a tier's.
#[derive(Clone, Copy, Debug)]
enum Build {
    Portable,
    Avx2,
    Avx512,
    Vbmi2,
}

/// The builds this CPU can run, the portable one first; the first call says which it
/// skips.
fn builds() -> Vec<Build> {
    static SAID: std::sync::Once = std::sync::Once::new();
    let (run, skipped): (Vec<Build>, Vec<Build>) =
        [Build::Portable, Build::Avx2, Build::Avx512, Build::Vbmi2]
            .into_iter()
            .partition(|&b| has(b));
    if !skipped.is_empty() {
        SAID.call_once(|| {
            eprintln!("native window tests: skipped {skipped:?}: this CPU lacks their features")
        });
    }
    run
}

/// `cur.decode_into*` of `build`; the caller checks the CPU ([`builds`]).
fn decode_with<S: crate::RecordSink>(
    build: Build,
    cur: &mut Cursor<'_>,
    prev: &mut Prev,
    out: &mut S,
    n: usize,
) -> (usize, Result<(), &'static str>) {
    match build {
        Build::Portable => cur.decode_into(prev, out, n),
        // SAFETY: the callers take `build` from `builds`, which checks the CPU.
        #[cfg(target_arch = "x86_64")]
        Build::Avx2 => unsafe { cur.decode_into_avx2(prev, out, n) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Build::Avx512 => unsafe { cur.decode_into_avx512(prev, out, n) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Build::Vbmi2 => unsafe { cur.decode_into_vbmi2(prev, out, n) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

/// `bytes` decoded by `build`.
fn decoded(bytes: &[u8], n: usize, build: Build) -> (Vec<Event>, Option<&'static str>, usize) {
    run(bytes, |cur, prev, out| {
        let (done, r) = decode_with(build, cur, prev, out, n);
        assert_eq!(done, out.len());
        r.err()
    })
}

/// What a consumer makes of the page filter's words, and the counts, after `bytes` went
/// through the decoder straight into a [`PageSink`] (the window loop's own entry into
/// the filter: its per-window counts, its last bytes from a table; the vector window
/// makes a depth-1 filter's words, which differ from the filter's own but not for the
/// consumer), and the error and where the cursor ends.
type Paged = (Lru, [u64; 2], u64, Option<&'static str>, usize);

/// The filters `paged` is checked with: (depth, fragments).
const FILTERS: [(usize, bool); 4] = [(4, false), (4, true), (1, false), (2, true)];

fn paged(bytes: &[u8], n: usize, build: Build, (depth, fragments): (usize, bool)) -> Paged {
    let buf = padded(bytes);
    let mut cur = Cursor {
        buf: &buf,
        end: bytes.len(),
        pos: 0,
    };
    let mut filter = PageFilter::new(depth, fragments);
    let mut batch = PageBatch::default();
    let mut prev = Prev::default();
    let mut sink = PageSink {
        filter: &mut filter,
        out: &mut batch,
    };
    let (done, r) = decode_with(build, &mut cur, &mut prev, &mut sink, n);
    filter.flush(&mut batch);
    assert_eq!(done as u64, batch.events());
    (
        of_words(&batch.words),
        batch.refs,
        batch.other_events,
        r.err(),
        cur.pos,
    )
}

/// The events of the record-at-a-time decoder through a page filter.
fn filtered(
    (events, err, pos): (Vec<Event>, Option<&'static str>, usize),
    (depth, fragments): (usize, bool),
) -> Paged {
    let mut filter = PageFilter::new(depth, fragments);
    let mut batch = PageBatch::default();
    for e in &events {
        filter.event(e, &mut batch);
    }
    filter.flush(&mut batch);
    (
        of_words(&batch.words),
        batch.refs,
        batch.other_events,
        err,
        pos,
    )
}

fn padded(bytes: &[u8]) -> Vec<u8> {
    let mut buf = bytes.to_vec();
    buf.extend_from_slice(&[0; PADDING]);
    buf
}

/// Whether this CPU runs `build` (the features its tier checks).
fn has(build: Build) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("bmi1") && has!("bmi2") && has!("lzcnt") && has!("popcnt");
        match build {
            Build::Portable => true,
            Build::Avx2 => avx2,
            Build::Avx512 => avx2 && has!("avx512f") && has!("avx512bw"),
            Build::Vbmi2 => has(Build::Avx512) && has!("avx512vbmi") && has!("avx512vbmi2"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    matches!(build, Build::Portable)
}

/// Every build this CPU runs agrees with the record-at-a-time decoder (the others
/// skipped, said once per test run).
fn check(bytes: &[u8], n: usize) -> Result<(), TestCaseError> {
    let want = one_by_one(bytes, n);
    let pages: Vec<Paged> = FILTERS.iter().map(|&f| filtered(want.clone(), f)).collect();
    for build in builds() {
        prop_assert_eq!(&decoded(bytes, n, build), &want, "{:?}", build);
        for (&f, pages) in FILTERS.iter().zip(&pages) {
            prop_assert_eq!(
                &paged(bytes, n, build, f),
                pages,
                "{:?}, pages {:?}",
                build,
                f
            );
        }
    }
    Ok(())
}

/// A reference of every kind, near and far, and sizes in and out of the tag.
fn arb_ref() -> impl Strategy<Value = Event> {
    let addr = prop_oneof![
        4 => 0x7000_0000u64..0x7000_0100,
        // Near the ends of a few pages: references within one page and spanning two.
        2 => 0x7000_0fc0u64..0x7000_1040,
        1 => 0x7000_2fc0u64..0x7000_3040,
        2 => 0x7000_0000u64..0x7100_0000,
        1 => any::<u64>(),
        1 => Just(u64::MAX),
    ];
    let size = prop_oneof![8 => 0u32..59, 1 => 59u32..70, 1 => any::<u32>()];
    (0usize..4, addr, size).prop_map(|(k, addr, size)| {
        let kind = [
            AccessKind::Instr,
            AccessKind::Load,
            AccessKind::Store,
            AccessKind::Modify,
        ][k];
        Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size,
            kind,
        })
    })
}

fn encoded(events: &[Event]) -> Vec<u8> {
    let (mut out, mut prev) = (Vec::new(), Prev::default());
    for e in events {
        encode(&mut out, &mut prev, e);
    }
    out
}

/// Small streams decoded by the portable build into a vector of events, whose references
/// are written field by field into its spare room (`sink::push_reference`): CI runs this
/// under Miri (the tests whose names end in `for_miri`).
#[test]
fn small_streams_into_events_for_miri() {
    let kinds = [
        AccessKind::Instr,
        AccessKind::Load,
        AccessKind::Store,
        AccessKind::Modify,
    ];
    let mut events: Vec<Event> = (0..90u64)
        .map(|i| {
            Event::Ref(MemRef {
                addr: VirtAddr(0x7000_0ff0u64.wrapping_add(i * i * 13) ^ (i << 40)),
                size: [1, 4, 8, 58, 59, 100][i as usize % 6],
                kind: kinds[i as usize % 4],
            })
        })
        .collect();
    events.insert(30, Event::fork(7));
    let bytes = encoded(&events);
    for n in [1, 17, usize::MAX] {
        assert_eq!(decoded(&bytes, n, Build::Portable), one_by_one(&bytes, n));
    }
}

/// A long stream whose references change page often: the vector window's pending list
/// fills and goes to the filter many times within one call.
#[test]
fn many_windows_of_references_on_new_pages() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let events: Vec<Event> = (0..6000u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = x % 6;
            Event::Ref(MemRef {
                addr: VirtAddr(0x7000_0000 + page * 0x1000 + (x >> 20) % 0x1010),
                size: [1, 4, 8, 16][(x >> 40) as usize % 4],
                kind: if i % 3 == 0 {
                    AccessKind::Instr
                } else {
                    AccessKind::Load
                },
            })
        })
        .collect();
    let bytes = encoded(&events);
    for n in [usize::MAX, 4321, 255, 33] {
        check(&bytes, n).unwrap();
    }
}

#[test]
fn starts_of_edge_spans() {
    let mut spans = vec![
        [0u8; WINDOW],
        [0x80; WINDOW],
        [0x7f; WINDOW],
        [0xff; WINDOW],
    ];
    for i in 0..WINDOW {
        let mut s = [0u8; WINDOW];
        s[i] = 0x80;
        spans.push(s);
        let mut s = [0x80u8; WINDOW];
        s[i] = 0;
        spans.push(s);
    }
    for s in &spans {
        assert_eq!(starts(stops_portable(s)), starts_one_by_one(s), "{s:?}");
    }
}

#[test]
fn long_varints_and_every_other_record_leave_the_window() {
    // A varint of 9 and of 10 bytes (decoded one by one), a size after the
    // tag, a switch, and a bad varint of 11 bytes, each among short records
    // at every offset of a window.
    let mut tails: Vec<Vec<u8>> = vec![];
    for v in [u64::MAX >> 1, u64::MAX, 1 << 56] {
        let mut t = vec![60];
        put_varint(&mut t, v);
        tails.push(t);
    }
    tails.push(vec![59, 3, 200, 1]);
    tails.push(vec![0xf0, 1, 2]);
    tails.push([vec![5], vec![0xff; 10], vec![1]].concat());
    for tail in &tails {
        for lead in 0..80 {
            let mut bytes: Vec<u8> = (0..lead).flat_map(|i| [i as u8 % 120, 2]).collect();
            bytes.extend_from_slice(tail);
            bytes.extend((0..70).flat_map(|i| [130 + i as u8 % 60, 0x81, 1]));
            for n in [1, 30, 1000] {
                check(&bytes, n).unwrap();
            }
        }
    }
}

proptest! {
    #[test]
    fn starts_of_any_span(span in proptest::array::uniform32(any::<u8>()), more in proptest::array::uniform32(0u8..0x90)) {
        let mut s = [0u8; WINDOW];
        s[..32].copy_from_slice(&span);
        s[32..].copy_from_slice(&more);
        prop_assert_eq!(starts(stops_portable(&s)), starts_one_by_one(&s));
        #[cfg(target_arch = "x86_64")]
        if has(Build::Avx2) {
            // SAFETY: the CPU has AVX2.
            let wide = unsafe { super::window::stops_avx2(&s) };
            prop_assert_eq!(wide, stops_portable(&s));
        }
        #[cfg(target_arch = "x86_64")]
        if has(Build::Avx512) {
            // SAFETY: the CPU has AVX-512F and BW.
            let wide = unsafe { super::window::stops_avx512(&s) };
            prop_assert_eq!(wide, stops_portable(&s));
        }
    }

    /// Streams of references, most with their size in the tag, decoded
    /// whole and with a goal that ends inside a window.
    #[test]
    fn windows_decode_as_records_do(
        events in proptest::collection::vec(arb_ref(), 0..600),
        n in prop_oneof![Just(usize::MAX), 0usize..700],
    ) {
        check(&encoded(&events), n)?;
    }

    /// Any bytes, and streams with one byte changed: the same events, the
    /// same error at the same place.
    #[test]
    fn damaged_streams_fail_alike(
        events in proptest::collection::vec(arb_ref(), 1..300),
        at in any::<prop::sample::Index>(),
        x in 1u8..=255,
        junk in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = encoded(&events);
        let i = at.index(bytes.len());
        bytes[i] ^= x;
        check(&bytes, usize::MAX)?;
        check(&junk, usize::MAX)?;
    }
}
