//! Tests of the page index: its words keep the page filter's contract however a
//! reader's calls mix it with records, and a damaged one is an error naming where.

use super::index::{PageIndex, CHUNK_EVENTS};
use super::{block_checksum, NativeReader, NativeWriter, BLOCK_HEADER_LEN, FILE_HEADER_LEN};
use crate::consumer::Lru;
use crate::pages::page_word::{PAGE_SHIFT, REPLAY};
use crate::{PageBatch, PageFilter, TraceError, TraceSource};
use pagelab_core::{AccessKind, Event, MemRef, ThreadId, VirtAddr};
use proptest::prelude::*;

fn r(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    })
}

/// References near each other (which the filter drops in part), now and then a
/// spanning one or an event other than a reference.
fn arb_events() -> impl Strategy<Value = Vec<Event>> {
    let one = prop_oneof![
        8 => (any::<bool>(), 0u64..0x9000, 1u32..9).prop_map(|(data, addr, size)| {
            r(if data { AccessKind::Load } else { AccessKind::Instr }, 0x7000_0000 + addr, size)
        }),
        1 => (0u64..0x9000, 4000u32..9000).prop_map(|(addr, size)| r(AccessKind::Store, 0x7000_0000 + addr, size)),
        1 => (1u32..4).prop_map(|pid| Event::Switch(ThreadId { pid, tid: pid })),
    ];
    proptest::collection::vec(one, 0..3000)
}

/// How a test reads: `fill_pages` with a batch of this many events, or `fill` (`None`).
type Call = Option<usize>;

/// Reads `bytes` by `calls` (in turn, over and over) through a filter of the page index's
/// own kind, stepping an [`Lru`] over the words and over the references `fill` gives;
/// returns the consumer and the counts (instructions, data, other events).
fn consume(bytes: &[u8], calls: &[Call], filter: (usize, bool)) -> (Lru, [u64; 3]) {
    let mut src = NativeReader::new(bytes, "t.pgl");
    let mut filter = PageFilter::new(filter.0, filter.1);
    let (mut lru, mut counts) = (Lru::default(), [0u64; 3]);
    for call in calls.iter().cycle() {
        match call {
            Some(max) => {
                let mut out = PageBatch::default();
                let more = src.fill_pages(&mut filter, &mut out, *max).unwrap();
                let taken = out.events();
                assert!(
                    taken <= *max as u64 || taken <= CHUNK_EVENTS as u64,
                    "{taken} events for a batch of {max}"
                );
                lru.words(&out.words);
                counts[0] += out.refs[0];
                counts[1] += out.refs[1];
                counts[2] += out.other_events;
                if !more {
                    break;
                }
            }
            None => {
                // The filter's words so far stand; the consumer takes these references
                // itself, so the filter must forget what it remembers.
                let mut out = PageBatch::default();
                filter.flush(&mut out);
                lru.words(&out.words);
                filter.reset();
                let mut events = Vec::new();
                let more = src.fill(&mut events, 5).unwrap();
                events.iter().for_each(|e| step(&mut lru, &mut counts, e));
                if !more {
                    break;
                }
            }
        }
    }
    // The replays the filter still holds, as a consumer takes them at the end.
    let mut out = PageBatch::default();
    filter.flush(&mut out);
    lru.words(&out.words);
    (lru, counts)
}

/// Steps the consumer over event `e` (a reference's pages) and counts it (instructions,
/// data, other events).
fn step(lru: &mut Lru, counts: &mut [u64; 3], e: &Event) {
    match e {
        Event::Ref(m) => {
            lru.reference(m);
            counts[usize::from(!m.kind.is_instr())] += 1;
        }
        _ => counts[2] += 1,
    }
}

/// The consumer and counts of every reference, one at a time.
fn every_reference(events: &[Event]) -> (Lru, [u64; 3]) {
    let (mut lru, mut counts) = (Lru::default(), [0u64; 3]);
    events.iter().for_each(|e| step(&mut lru, &mut counts, e));
    (lru, counts)
}

fn write(events: &[Event], block_target: usize, chunk: u32) -> Vec<u8> {
    let mut w = NativeWriter::new(Vec::new())
        .unwrap()
        .with_block_target(block_target)
        .with_chunk_target(chunk);
    for e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever the blocks, chunks and calls, the index's words leave the consumer as
    /// every reference would, with the same counts: through `fill_pages` alone, and
    /// mixed with `fill` (which the reader then serves from the records, skipping what
    /// the index handed out). A filter the index was not made with reads the records.
    #[test]
    fn the_index_keeps_the_filters_contract(
        events in arb_events(),
        target in prop_oneof![Just(super::BLOCK_RAW_TARGET), 40usize..2000],
        chunk in 1u32..200,
        calls in proptest::collection::vec(
            prop_oneof![4 => (1usize..400).prop_map(Some), 1 => Just(None)], 1..6),
    ) {
        let bytes = write(&events, target, chunk);
        let want = every_reference(&events);
        prop_assert_eq!(&consume(&bytes, &[Some(usize::MAX)], (4, false)), &want);
        prop_assert_eq!(&consume(&bytes, &calls, (4, false)), &want);
        prop_assert_eq!(&consume(&bytes, &calls, (2, false)), &want);
    }
}

#[test]
fn a_chunk_at_a_time_and_never_past_a_batch_of_more() {
    let events: Vec<Event> = (0..130u64)
        .map(|i| r(AccessKind::Load, i << 12, 8))
        .collect();
    let bytes = write(&events, super::BLOCK_RAW_TARGET, 30);
    let mut src = NativeReader::new(&bytes[..], "t.pgl");
    let mut filter = PageFilter::new(4, false);
    let mut taken = vec![];
    for max in [1, 59, 60, 1000] {
        let mut out = PageBatch::default();
        assert!(src.fill_pages(&mut filter, &mut out, max).unwrap());
        taken.push(out.events());
    }
    // Chunks of 30, 30, 30, 30 and 10 events: a batch of 1 still takes a whole chunk;
    // 59 one; 60 two; 1000 what is left.
    assert_eq!(taken, [30, 30, 60, 10]);
    let mut out = PageBatch::default();
    assert!(!src.fill_pages(&mut filter, &mut out, 10).unwrap());
    assert!(!src.fill_pages(&mut filter, &mut out, 0).unwrap());
}

/// Every event of `bytes`, read record by record (which must succeed).
fn read_events(bytes: &[u8]) -> Vec<Event> {
    let mut src = NativeReader::new(bytes, "t.pgl");
    let mut out = Vec::new();
    while src.fill(&mut out, 1000).unwrap() {}
    out
}

/// Where the first page block starts, in a file of one block.
fn first_page_block(bytes: &[u8]) -> usize {
    let clen = u32::from_le_bytes(
        bytes[FILE_HEADER_LEN..FILE_HEADER_LEN + 4]
            .try_into()
            .unwrap(),
    );
    FILE_HEADER_LEN + BLOCK_HEADER_LEN + clen as usize
}

/// `bytes` with the first page block's content changed by `edit`, compressed and
/// checksummed again, so that only the checks of its content can find what is wrong.
fn edited(bytes: &[u8], edit: impl Fn(&mut Vec<u8>, &mut u32)) -> Vec<u8> {
    let at = first_page_block(bytes);
    let word = |i: usize| u32::from_le_bytes(bytes[at + i..at + i + 4].try_into().unwrap());
    let (clen, mut chunks) = (word(0) as usize, word(8));
    let frame = &bytes[at + BLOCK_HEADER_LEN..at + BLOCK_HEADER_LEN + clen];
    let mut raw = zstd::bulk::decompress(frame, 1 << 26).unwrap();
    edit(&mut raw, &mut chunks);
    let frame = zstd::bulk::compress(&raw, 3).unwrap();
    let mut header = [0u8; BLOCK_HEADER_LEN];
    header[..4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    header[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    header[8..12].copy_from_slice(&chunks.to_le_bytes());
    let check = block_checksum(header[..12].try_into().unwrap(), &frame);
    header[12..].copy_from_slice(&check.to_le_bytes());
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&frame);
    out.extend_from_slice(&bytes[at + BLOCK_HEADER_LEN + clen..]);
    out
}

/// A change to a page block's content and its chunk count.
type Edit<'a> = dyn Fn(&mut Vec<u8>, &mut u32) + 'a;

/// The error of reading `bytes` through the index.
fn index_error(bytes: &[u8]) -> (u64, String) {
    let mut src = NativeReader::new(bytes, "t.pgl");
    let mut filter = PageFilter::new(4, false);
    let mut out = PageBatch::default();
    loop {
        match src.fill_pages(&mut filter, &mut out, usize::MAX) {
            Ok(true) => {}
            Ok(false) => panic!("no error"),
            Err(TraceError::Corrupt { offset, reason, .. }) => return (offset, reason),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_wrong_page_block_is_an_error_naming_it_and_what_is_wrong() {
    // Two chunks: pages 0x70000..0x70009 on the data side, one spanning reference.
    let mut events: Vec<Event> = (0..10u64)
        .map(|i| r(AccessKind::Load, (0x70000 + i) << 12, 8))
        .collect();
    events.push(r(AccessKind::Load, (0x70010 << 12) + 4090, 16));
    let bytes = write(&events, super::BLOCK_RAW_TARGET, 6);
    let at = first_page_block(&bytes) as u64;
    // The table: chunk 0 ends at word 6 and counts 6 data references; chunk 1 at 12.
    let table = 2 * 16;
    let set = |raw: &mut Vec<u8>, i: usize, v: u64| raw[i..i + 8].copy_from_slice(&v.to_le_bytes());
    let get = |raw: &Vec<u8>, i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap());
    // Every edit below reads fine record by record.
    let cases: Vec<(Box<Edit<'_>>, &str)> = vec![
        (Box::new(|raw, _| { let w = get(raw, table); set(raw, table, w | 1 << 10) }), "page block word 0 (in chunk 0): 0x70000601 sets bits no page word has"),
        (Box::new(|raw, _| { let w = get(raw, table); set(raw, table, w | 0x7f << 3) }), "page block word 0 (in chunk 0): 0x700003f9 has a change distance of 127 (at most 64)"),
        (Box::new(|raw, _| { let n = raw.len(); let w = get(raw, n - 8); set(raw, n - 8, w - 1) }), "page block word 11 (in chunk 1): last page 0x70010 of a reference from page 0x70010 is not after it, or not a page of a 64-bit address"),
        // (The tests' size limit is 4G - 1 bytes: 2^20 pages past the first.)
        (Box::new(|raw, _| { let n = raw.len(); set(raw, n - 8, 0x70011 + (1 << 20)) }), "page block word 11 (in chunk 1): a reference from page 0x70010 to 0x170011: reference size above the limit"),
        (Box::new(|raw, _| { let n = raw.len(); raw.truncate(n - 8); set(raw, 16, 11) }), "page block word 10 (in chunk 1): 0x7001002d spans pages, and its chunk ends before its last page"),
        (Box::new(|raw, _| { let w = get(raw, table + 80); set(raw, table + 80, w | REPLAY) }), "page block word 10 (in chunk 1): 0x7001002f is a replay spanning pages"),
        (Box::new(|raw, _| { let w = get(raw, 0); set(raw, 0, w + 7) }), "page block chunk 0 ends its words at 13, outside 0..=12"),
        (Box::new(|raw, _| { let w = get(raw, 8); set(raw, 8, w + 1) }), "page block's chunks count 12 events, the block holds 11 records"),
        (Box::new(|raw, _| { raw.extend_from_slice(&[0; 8]) }), "page block holds 1 words after its last chunk's"),
        (Box::new(|raw, _| { raw.push(0) }), "page block of 129 bytes cannot hold 2 chunk entries of 16 bytes and whole 8-byte words"),
        (Box::new(|raw, _| { set(raw, 0, 0); set(raw, 8, 0) }), "page block chunk 0 counts no events"),
    ];
    for (edit, says) in &cases {
        let bad = edited(&bytes, edit);
        let (back, err) = (read_events(&bad), index_error(&bad));
        assert_eq!(back, events, "{says}: the records still read");
        assert_eq!(err.0, at, "{says}");
        assert!(err.1.starts_with(says), "got {:?}, want {says:?}", err.1);
    }
    // A chunk table past the content, and no chunks at all: the page block's header.
    for chunks in [0u32, 100] {
        let bad = edited(&bytes, |_, c| *c = chunks);
        let (offset, reason) = index_error(&bad);
        assert_eq!(offset, at);
        assert!(
            reason.starts_with("implausible page block header"),
            "{reason}"
        );
    }
}

#[test]
fn a_changed_byte_of_an_indexed_file_is_an_error_through_the_index_too() {
    let events: Vec<Event> = (0..40u64)
        .map(|i| {
            r(
                if i % 3 == 0 {
                    AccessKind::Instr
                } else {
                    AccessKind::Load
                },
                (i % 7) << 12,
                8,
            )
        })
        .collect();
    let bytes = write(&events, 100, 7);
    for at in FILE_HEADER_LEN..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x5a;
        let mut src = NativeReader::new(&bad[..], "t.pgl");
        let mut filter = PageFilter::new(4, false);
        let mut out = PageBatch::default();
        let err = loop {
            match src.fill_pages(&mut filter, &mut out, 9) {
                Ok(true) => {}
                Ok(false) => break None,
                Err(e) => break Some(e),
            }
        };
        assert!(
            matches!(err, Some(TraceError::Corrupt { .. })),
            "byte {at}: {err:?}"
        );
    }
}

#[test]
fn loading_checks_the_counts_against_the_block() {
    let mut index = PageIndex::default();
    let raw = index.raw_mut();
    raw.extend_from_slice(&(1u64 | 3 << 32).to_le_bytes());
    raw.extend_from_slice(&0u64.to_le_bytes());
    raw.extend_from_slice(&(0x5000u64 << PAGE_SHIFT | 64 << 3).to_le_bytes());
    assert!(index.load(1, 3).is_ok());
    assert_eq!(index.next_events(), Some(3));
    assert_eq!(
        index.load(1, 4).unwrap_err(),
        "page block's chunks count 3 events, the block holds 4 records"
    );
}
