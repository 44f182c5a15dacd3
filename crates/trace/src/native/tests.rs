//! Native format: round trips, every error with its offset, truncation and damage.

use super::codec::{encode, Prev};
use super::*;
use crate::consumer::{of_words, Lru};
use crate::{TraceError, TraceSource};
use pagelab_core::{
    AccessKind, Advice, Backing, CloneFlags, Event, ExecImage, FileIdentity, MapEvent, MapRequest,
    MemRef, Prot, Sharing, ThreadId, VirtAddr,
};
use proptest::prelude::*;

fn r(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    })
}

/// One of each variant, with extreme values.
fn zoo() -> Vec<Event> {
    vec![
        r(AccessKind::Instr, 0x400000, 3),
        r(AccessKind::Load, u64::MAX, u32::MAX),
        r(AccessKind::Store, 0, 0),
        r(AccessKind::Modify, 0x1fff000758, 58),
        r(AccessKind::Instr, 0, 59),
        r(AccessKind::Load, 1 << 63, 60),
        Event::Switch(ThreadId {
            pid: u32::MAX,
            tid: 0,
        }),
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(u64::MAX),
            len: 0,
            prot: Prot(Prot::READ | Prot::EXEC),
            backing: Backing::File {
                file_id: u64::MAX,
                offset: 4096,
            },
            sharing: Sharing::Shared,
        })),
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(0x7000_0000),
            len: 1 << 21,
            prot: Prot(0xff),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        })),
        Event::Unmap {
            start: VirtAddr(0),
            len: u64::MAX,
        },
        Event::Protect {
            start: VirtAddr(1),
            len: 2,
            prot: Prot(Prot::WRITE),
        },
        Event::Advise {
            start: VirtAddr(0),
            len: 4096,
            advice: Advice::HugePage,
        },
        Event::Advise {
            start: VirtAddr(0),
            len: 4096,
            advice: Advice::NoHugePage,
        },
        Event::Advise {
            start: VirtAddr(0),
            len: 4096,
            advice: Advice::DontNeed,
        },
        Event::Advise {
            start: VirtAddr(5),
            len: 6,
            advice: Advice::PageOrder {
                shift: 21,
                wait: true,
            },
        },
        Event::Advise {
            start: VirtAddr(5),
            len: 6,
            advice: Advice::Other(u16::MAX),
        },
        Event::Brk {
            end: VirtAddr(u64::MAX),
        },
        Event::fork(u32::MAX),
        Event::Exit { status: i32::MIN },
        Event::Exit { status: i32::MAX },
        Event::Exec(None),
        Event::MapRequest(Box::new(MapRequest {
            hint: VirtAddr(u64::MAX),
            len: u64::MAX,
            prot: Prot(0xff),
            flags: u32::MAX,
            file: Some(FileIdentity {
                dev: u64::MAX,
                ino: u64::MAX,
            }),
            offset: u64::MAX,
        })),
        Event::Exec(Some(Box::new(ExecImage {
            path: b"/usr/bin/ls".to_vec(),
            strings: 1234,
            capture_id: u64::MAX,
        }))),
        // Version 4: forks with their clone flags.
        Event::Fork {
            child: 3,
            flags: CloneFlags::VFORK_CALL,
        },
        Event::Fork {
            child: u32::MAX,
            flags: CloneFlags(u64::MAX),
        },
    ]
}

fn write(events: &[Event], block_target: usize) -> Vec<u8> {
    write_with(events, NativeWriter::new(Vec::new()).unwrap(), block_target)
}

/// [`write`] with no page index.
fn write_plain(events: &[Event], block_target: usize) -> Vec<u8> {
    let w = NativeWriter::new(Vec::new()).unwrap().without_page_index();
    write_with(events, w, block_target)
}

fn write_with(events: &[Event], w: NativeWriter<Vec<u8>>, block_target: usize) -> Vec<u8> {
    let mut w = w.with_block_target(block_target);
    for e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap()
}

/// Reads everything in batches of `batch`: the events, and the error if any.
fn read(bytes: &[u8], batch: usize) -> (Vec<Event>, Option<TraceError>) {
    let mut src = NativeReader::new(bytes, "t.pgl");
    let mut out = Vec::new();
    loop {
        match src.fill(&mut out, batch) {
            Ok(true) => {}
            Ok(false) => return (out, None),
            Err(e) => {
                // The contract: the same error again.
                assert_eq!(
                    src.fill(&mut out, batch).unwrap_err().to_string(),
                    e.to_string()
                );
                return (out, Some(e));
            }
        }
    }
}

fn corrupt_offset(bytes: &[u8]) -> (u64, String) {
    match read(bytes, 1000).1 {
        Some(TraceError::Corrupt {
            offset,
            reason,
            source_name,
        }) => {
            assert_eq!(source_name, "t.pgl");
            (offset, reason)
        }
        other => panic!("expected a Corrupt error, got {other:?}"),
    }
}

#[test]
fn every_variant_round_trips() {
    let events = zoo();
    for target in [BLOCK_RAW_TARGET, 64, 1] {
        for batch in [1, 3, 1000, usize::MAX] {
            let (back, err) = read(&write(&events, target), batch);
            assert!(err.is_none(), "{err:?}");
            assert_eq!(back, events);
        }
    }
}

#[test]
fn empty_trace_round_trips() {
    let bytes = write(&[], BLOCK_RAW_TARGET);
    assert_eq!(bytes.len(), FILE_HEADER_LEN + BLOCK_HEADER_LEN);
    let (back, err) = read(&bytes, 10);
    assert!(back.is_empty() && err.is_none());
}

#[test]
fn many_blocks_of_references() {
    let events: Vec<Event> = (0..600_000u64)
        .map(|i| {
            r(
                AccessKind::Load,
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                (i % 70) as u32,
            )
        })
        .collect();
    let bytes = write(&events, BLOCK_RAW_TARGET);
    let (back, err) = read(&bytes, 65536);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(back, events);
}

#[test]
fn header_errors_name_their_offset() {
    let good = write(&zoo(), BLOCK_RAW_TARGET);
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(corrupt_offset(&bad).0, 0);
    assert!(corrupt_offset(&bad).1.contains("magic"));
    let mut bad = good.clone();
    bad[8] = 6;
    assert_eq!(
        corrupt_offset(&bad),
        (
            8,
            "unsupported version 6; this reader reads versions 1 to 5 (a newer pagelab wrote it?)"
                .into()
        )
    );
    // Before version 5 no flag is known, the page index's included.
    let mut bad = good.clone();
    bad[8] = 4;
    assert_eq!(
        corrupt_offset(&bad),
        (10, "unknown flags set in the file header".into())
    );
    // A version-1 file (written before Exec and MapRequest) reads as it did.
    let mut old = write_plain(&zoo()[..zoo().len() - 5], BLOCK_RAW_TARGET);
    old[8] = 1;
    assert_eq!(read(&old, 7).0, &zoo()[..zoo().len() - 5]);
    // A version-3 file's forks (written before clone flags) read as plain forks.
    let mut old = write_plain(
        &[Event::Switch(ThreadId { pid: 1, tid: 1 }), Event::fork(5)],
        BLOCK_RAW_TARGET,
    );
    old[8] = 3;
    assert_eq!(
        read(&old, 7).0,
        [
            Event::Switch(ThreadId { pid: 1, tid: 1 }),
            Event::Fork {
                child: 5,
                flags: CloneFlags::FORK
            }
        ]
    );
    let mut bad = good.clone();
    bad[11] = 1;
    assert_eq!(corrupt_offset(&bad).0, 10);
    // The page index's filter: a depth of 1 to 4, fragments 0 or 1, then zeros.
    for (at, value, offset, says) in [
        (12, 0, 12, "page index filter depth 0 (1 to 4)"),
        (12, 5, 12, "page index filter depth 5 (1 to 4)"),
        (13, 2, 13, "page index fragments flag 2 (0 or 1)"),
        (15, 1, 14, "reserved header bytes are not zero"),
    ] {
        let mut bad = good.clone();
        bad[at] = value;
        assert_eq!(
            corrupt_offset(&bad),
            (offset, says.into()),
            "byte {at} = {value}"
        );
    }
    // Without a page index the four bytes are reserved.
    let plain = write_plain(&zoo(), BLOCK_RAW_TARGET);
    let mut bad = plain.clone();
    bad[13] = 1;
    assert_eq!(corrupt_offset(&bad).0, 12);
    assert_eq!(corrupt_offset(&good[..5]).0, 5);
    assert!(corrupt_offset(&good[..5])
        .1
        .contains("truncated file header"));
    assert_eq!(corrupt_offset(b"I  0400").0, 0);
}

/// A version-2 file, as pagelab wrote it before exec records named the new
/// program (a switch, an exec, an exit): it reads with the exec's program
/// unknown. The bytes are fixed here so that a later writer cannot change
/// what "old" means.
const VERSION_2_EXEC: &str = "504147454c41425402000000000000001300000006000000030000004055bc9946aaf16628b52ffd2406310000f00707f8f7009578bb010000000000000000000000000300000000000000";

#[test]
fn version_2_exec_reads_without_its_program() {
    let events = vec![
        Event::Switch(ThreadId { pid: 7, tid: 7 }),
        Event::Exec(None),
        Event::Exit { status: 0 },
    ];
    let old: Vec<u8> = (0..VERSION_2_EXEC.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&VERSION_2_EXEC[i..i + 2], 16).unwrap())
        .collect();
    let (got, err) = read(&old, 2);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, events);
    let image = Event::Exec(Some(Box::new(ExecImage {
        path: b"/bin/true".to_vec(),
        strings: 40,
        capture_id: 1,
    })));
    let (got, err) = read(&write(std::slice::from_ref(&image), BLOCK_RAW_TARGET), 1);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, vec![image]);
}

#[test]
fn a_too_long_exec_path_is_refused() {
    let image = Event::Exec(Some(Box::new(ExecImage {
        path: vec![b'a'; 4097],
        strings: 0,
        capture_id: 0,
    })));
    let mut w = NativeWriter::new(Vec::new()).unwrap();
    let err = w.write(&image).unwrap_err();
    assert!(err.to_string().contains("4096"), "{err}");
}

#[test]
fn truncation_errors_name_their_offset() {
    let good = write(&zoo(), BLOCK_RAW_TARGET);
    let h = FILE_HEADER_LEN as u64;
    // Cut right after the file header: the end marker is missing.
    let (off, reason) = corrupt_offset(&good[..FILE_HEADER_LEN]);
    assert_eq!(off, h);
    assert!(reason.contains("end marker is missing"), "{reason}");
    // Cut inside the block header.
    assert_eq!(corrupt_offset(&good[..FILE_HEADER_LEN + 7]).0, h + 7);
    // Cut inside the block.
    let (off, reason) = corrupt_offset(&good[..FILE_HEADER_LEN + 30]);
    assert_eq!(off, h + 30);
    assert!(reason.contains("truncated inside a block"), "{reason}");
    // Cut before the end marker.
    let end = good.len() - BLOCK_HEADER_LEN;
    assert_eq!(corrupt_offset(&good[..end]).0, end as u64);
}

#[test]
fn end_marker_errors() {
    let good = write(&zoo(), BLOCK_RAW_TARGET);
    let end = good.len() - BLOCK_HEADER_LEN;
    let mut bad = good.clone();
    bad.push(0);
    assert_eq!(
        corrupt_offset(&bad),
        (good.len() as u64, "data after the end marker".into())
    );
    let mut bad = good.clone();
    bad[end + 12] += 1;
    let (off, reason) = corrupt_offset(&bad);
    assert_eq!(off, end as u64);
    assert!(
        reason.contains(&format!(
            "end marker counts {} records, the blocks hold {}",
            zoo().len() + 1,
            zoo().len()
        )),
        "{reason}"
    );
    let mut bad = good.clone();
    bad[end + 4] = 1;
    assert_eq!(
        corrupt_offset(&bad),
        (
            end as u64,
            "damaged end marker (non-zero length or count)".into()
        )
    );
}

/// A file with one block of `raw` bytes whose header claims `rlen` and `count`,
/// with a valid checksum, so that the record-level checks are reached.
fn crafted(raw: &[u8], rlen: u32, count: u32, total: u64) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&NATIVE_MAGIC);
    f.extend_from_slice(&NATIVE_VERSION.to_le_bytes());
    f.extend_from_slice(&[0; 6]);
    let frame = zstd::bulk::compress(raw, 3).unwrap();
    let mut h = [0u8; 12];
    h[..4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&rlen.to_le_bytes());
    h[8..].copy_from_slice(&count.to_le_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&block_checksum(&h, &frame).to_le_bytes());
    f.extend_from_slice(&frame);
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(&total.to_le_bytes());
    f
}

fn encoded(events: &[Event]) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut prev = Prev::default();
    events.iter().for_each(|e| encode(&mut raw, &mut prev, e));
    raw
}

#[test]
fn block_level_errors_name_the_block() {
    let events = zoo();
    let raw = encoded(&events);
    let n = events.len() as u32;
    let len = raw.len() as u32;
    let h = FILE_HEADER_LEN as u64;
    // The crafted file itself is valid.
    let (back, err) = read(&crafted(&raw, len, n, n as u64), 7);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(back, events);

    let (off, reason) = corrupt_offset(&crafted(&raw, len + 1, n, n as u64));
    assert_eq!(off, h + BLOCK_HEADER_LEN as u64);
    assert!(reason.contains("decompresses to"), "{reason}");
    let (off, reason) = corrupt_offset(&crafted(&raw, len, n - 1, n as u64));
    assert_eq!(off, h);
    assert!(
        reason.contains(&format!("bytes after its {} records", n - 1)),
        "{reason}"
    );
    let (off, reason) = corrupt_offset(&crafted(&raw, len, n + 1, n as u64));
    assert_eq!(off, h);
    assert!(
        reason.contains(&format!("record {n}")) && reason.contains("past the end"),
        "{reason}"
    );
    let (off, reason) = corrupt_offset(&crafted(&raw, 0, n, n as u64));
    assert_eq!(off, h);
    assert!(reason.contains("implausible"), "{reason}");
    let (off, reason) = corrupt_offset(&crafted(&raw, len, 0, 0));
    assert_eq!(off, h);
    assert!(reason.contains("implausible"), "{reason}");

    // Damage inside the frame is caught by the checksum.
    let mut bad = crafted(&raw, len, n, n as u64);
    bad[FILE_HEADER_LEN + BLOCK_HEADER_LEN + 5] ^= 0x10;
    assert_eq!(corrupt_offset(&bad), (h, "block checksum mismatch".into()));
}

#[test]
fn record_level_errors() {
    let cases: &[(&[u8], &str)] = &[
        (&[0xfc, 0, 0], "reserved record tag"),
        (&[0xfb, 0x80], "past the end"),
        (&[0xfa, 0, 0, 3, b'/', b'b'], "past the end"),
        (&[0xfa, 0, 0, 0x81, 0x20], "longer than 4096"),
        (&[0xf9, 0, 0, 0, 0, 2, 0], "file flag other than 0 or 1"),
        (&[0xff], "reserved record tag"),
        (&[0x00], "past the end"),
        (&[0x00, 0x80], "past the end"),
        (
            &[
                0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ],
            "longer than 64 bits",
        ),
        (&[59, 0, 0x80, 0x80, 0x80, 0x80, 0x10], "size does not fit"),
        (&[0xf6, 0x80, 0x80, 0x80, 0x80, 0x10], "child pid"),
        (&[0xf7, 0x80, 0x80, 0x80, 0x80, 0x10], "exit status"),
        (&[0xf1, 0, 0, 0, 4], "unknown flag bits"),
        (&[0xf4, 0, 0, 9], "unknown advice"),
        (&[0xf4, 0, 0, 3, 12, 2], "wait flag"),
        (&[0xf4, 0, 0, 4, 0x80, 0x80, 0x04], "16 bits"),
        (&[0xf0, 0x80, 0x80, 0x80, 0x80, 0x10, 0], "pid"),
    ];
    for (raw, want) in cases {
        let bytes = crafted(raw, raw.len() as u32, 1, 1);
        let (off, reason) = corrupt_offset(&bytes);
        assert_eq!(off, FILE_HEADER_LEN as u64);
        assert!(reason.contains(want), "{raw:x?}: {reason}");
    }
}

#[test]
fn events_before_a_bad_record_come_first() {
    let mut raw = encoded(&zoo()[..3]);
    raw.push(0xfa);
    let (back, err) = read(&crafted(&raw, raw.len() as u32, 4, 4), 2);
    assert_eq!(back, zoo()[..3]);
    assert!(err.unwrap().to_string().contains("record 3"));
}

/// Many small blocks: a cut at byte k yields exactly the events of the blocks
/// that end at or before k, then an error.
#[test]
fn truncation_at_every_offset_gives_whole_blocks_then_an_error() {
    let events: Vec<Event> = zoo().into_iter().cycle().take(60).collect();
    let bytes = write(&events, 64);
    // Where each block (and its page block) ends, and how many events precede that point.
    let mut ends = vec![(FILE_HEADER_LEN, 0usize)];
    let mut at = FILE_HEADER_LEN;
    loop {
        let word =
            |at: usize, i: usize| u32::from_le_bytes(bytes[at + i..at + i + 4].try_into().unwrap());
        if word(at, 0) == 0 {
            break;
        }
        let count = ends.last().unwrap().1 + word(at, 8) as usize;
        at += BLOCK_HEADER_LEN + word(at, 0) as usize;
        at += BLOCK_HEADER_LEN + word(at, 0) as usize;
        ends.push((at, count));
    }
    assert!(ends.len() > 5, "want several blocks, got {}", ends.len());
    for cut in 0..bytes.len() {
        let (back, err) = read(&bytes[..cut], 5);
        assert!(
            matches!(err, Some(TraceError::Corrupt { .. })),
            "cut at {cut}: {err:?}"
        );
        let whole = ends.iter().rfind(|(end, _)| *end <= cut).map_or(0, |e| e.1);
        assert_eq!(back.len(), whole, "cut at {cut}");
        assert_eq!(back, events[..whole], "cut at {cut}");
    }
}

#[test]
fn any_changed_byte_is_an_error() {
    let events: Vec<Event> = zoo().into_iter().cycle().take(60).collect();
    let bytes = write(&events, 200);
    let mut rng = 0x1234_5678u64;
    for at in 0..bytes.len() {
        for _ in 0..3 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut bad = bytes.clone();
            bad[at] ^= (rng % 255 + 1) as u8;
            let (back, err) = read(&bad, 7);
            assert!(err.is_some(), "byte {at} changed, read without error");
            assert!(events.starts_with(&back), "byte {at}: events differ");
        }
    }
}

fn arb_event() -> impl Strategy<Value = Event> {
    let addr = prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0x1000u64..0x2000];
    let size = prop_oneof![Just(0u32), Just(u32::MAX), 0u32..70, any::<u32>()];
    let kind = prop_oneof![
        Just(AccessKind::Instr),
        Just(AccessKind::Load),
        Just(AccessKind::Store),
        Just(AccessKind::Modify)
    ];
    let advice = prop_oneof![
        Just(Advice::HugePage),
        Just(Advice::NoHugePage),
        Just(Advice::DontNeed),
        (any::<u8>(), any::<bool>()).prop_map(|(shift, wait)| Advice::PageOrder { shift, wait }),
        any::<u16>().prop_map(Advice::Other),
    ];
    let backing = prop_oneof![
        Just(Backing::Anon),
        (any::<u64>(), any::<u64>())
            .prop_map(|(file_id, offset)| Backing::File { file_id, offset }),
    ];
    prop_oneof![
        8 => (kind, addr, size).prop_map(|(kind, addr, size)| r(kind, addr, size)),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(pid, tid)| Event::Switch(ThreadId { pid, tid })),
        1 => (any::<u64>(), any::<u64>(), any::<u8>(), backing, any::<bool>()).prop_map(
            |(start, len, p, backing, shared)| Event::Map(Box::new(MapEvent {
                start: VirtAddr(start),
                len,
                prot: Prot(p),
                backing,
                sharing: if shared { Sharing::Shared } else { Sharing::Private },
            }))
        ),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(start, len)| Event::Unmap { start: VirtAddr(start), len }),
        1 => (any::<u64>(), any::<u64>(), any::<u8>())
            .prop_map(|(start, len, p)| Event::Protect { start: VirtAddr(start), len, prot: Prot(p) }),
        1 => (any::<u64>(), any::<u64>(), advice)
            .prop_map(|(start, len, advice)| Event::Advise { start: VirtAddr(start), len, advice }),
        1 => any::<u64>().prop_map(|end| Event::Brk { end: VirtAddr(end) }),
        1 => any::<u32>().prop_map(Event::fork),
        1 => (any::<u32>(), any::<u64>()).prop_map(|(child, f)| Event::Fork { child, flags: CloneFlags(f) }),
        1 => any::<i32>().prop_map(|status| Event::Exit { status }),
        1 => Just(Event::Exec(None)),
        1 => (proptest::collection::vec(any::<u8>(), 0..300), any::<u64>(), any::<u64>())
            .prop_map(|(path, strings, capture_id)| {
                Event::Exec(Some(Box::new(ExecImage { path, strings, capture_id })))
            }),
        1 => (
            any::<u64>(),
            any::<u64>(),
            any::<u8>(),
            any::<u32>(),
            proptest::option::of((any::<u64>(), any::<u64>())),
            any::<u64>()
        )
            .prop_map(|(hint, len, prot, flags, file, offset)| {
                Event::MapRequest(Box::new(MapRequest {
                    hint: VirtAddr(hint),
                    len,
                    prot: Prot(prot),
                    flags,
                    file: file.map(|(dev, ino)| FileIdentity { dev, ino }),
                    offset,
                }))
            }),
    ]
}

proptest! {
    #[test]
    fn random_streams_round_trip(
        events in proptest::collection::vec(arb_event(), 0..400),
        target in prop_oneof![Just(BLOCK_RAW_TARGET), 1usize..300],
        batch in 1usize..100,
    ) {
        let (back, err) = read(&write(&events, target), batch);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(back, events);
    }
}

proptest! {
    /// Garbage after a valid file header never panics and is always an error.
    #[test]
    fn garbage_is_an_error_not_a_panic(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut bytes = write(&[], BLOCK_RAW_TARGET)[..FILE_HEADER_LEN].to_vec();
        bytes.extend_from_slice(&tail);
        let (back, err) = read(&bytes, 3);
        prop_assert!(back.is_empty());
        prop_assert!(matches!(err, Some(TraceError::Corrupt { .. })), "{:?}", err);
    }
}

/// What a consumer makes of a filter's words over `bytes` (flushed), their counts and
/// error: through the reader's `fill_pages` (filtering as it decodes), or through
/// `fill` and then the filter.
fn filtered(bytes: &[u8], batch: usize, as_pages: bool) -> (Lru, [u64; 2], u64, Option<String>) {
    let mut src = NativeReader::new(bytes, "t.pgl");
    let mut filter = crate::PageFilter::new(4, false);
    let mut out = crate::PageBatch::default();
    let mut events = Vec::new();
    let err = loop {
        let r = if as_pages {
            src.fill_pages(&mut filter, &mut out, batch)
        } else {
            src.fill(&mut events, batch)
        };
        match r {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    for e in &events {
        filter.event(e, &mut out);
    }
    filter.flush(&mut out);
    (of_words(&out.words), out.refs, out.other_events, err)
}

proptest! {
    /// The reader's own `fill_pages` gives words as good as filtering its events (the
    /// same consumer), and their counts and error, on whole streams and on streams with a byte changed.
    #[test]
    fn fill_pages_agrees_with_filtered_events(
        events in proptest::collection::vec(arb_event(), 0..400),
        near in proptest::collection::vec((any::<bool>(), 0u64..0x6000, 1u32..9), 0..400),
        target in prop_oneof![Just(BLOCK_RAW_TARGET), 1usize..300],
        batch in 1usize..100,
        damage in proptest::option::of((any::<prop::sample::Index>(), 1u8..=255)),
    ) {
        // References near each other, which the filter drops in part.
        let mut all: Vec<Event> = near
            .iter()
            .map(|&(data, addr, size)| {
                r(if data { AccessKind::Load } else { AccessKind::Instr }, 0x7000_0000 + addr, size)
            })
            .collect();
        all.extend(events);
        let mut bytes = write_plain(&all, target);
        if let Some((at, x)) = damage {
            let at = at.index(bytes.len());
            bytes[at] ^= x;
        }
        prop_assert_eq!(filtered(&bytes, batch, true), filtered(&bytes, batch, false));
        // A page index made for another filter is not read: the records are.
        let other = write_with(&all, NativeWriter::new(Vec::new()).unwrap().with_page_index(2, true), target);
        prop_assert_eq!(filtered(&other, batch, true), filtered(&other, batch, false));
    }
}
