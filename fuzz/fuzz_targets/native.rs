//! The native reader: raw files, and files whose blocks are valid frames with
//! valid checksums around fuzzed record bytes (so the record decoder is
//! reached, not only the checksum).
//!
//! Input: a mode byte, then either the file (mode even) or blocks, each a
//! record count byte, a two-byte length and that many record bytes, and (mode
//! bit 5) a page block after each: a chunk count byte, a two-byte length and
//! that many bytes of content. Checks: the source contract, by `fill` and by
//! `fill_pages` through the page index's filter, errors at a byte offset
//! inside the file, and that whatever events were read survive native ->
//! native (read back by both, the page index's counts the events') and
//! (references) Lackey -> Lackey unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pagelab_core::Event;
use pagelab_fuzz::{drain, drain_pages, native_file, take, RawBlock};
use pagelab_trace::{
    LackeyReader, LackeyWriter, NativeReader, NativeWriter, PageFilter, TraceError,
};

/// Reads with `read` to the error a read before met again, and checks that a corrupt
/// input's offset names a byte of the file (or its end), `len` bytes.
fn check_offset(len: usize, mut read: impl FnMut() -> Result<bool, TraceError>) {
    let err = loop {
        match read() {
            Ok(true) => continue,
            Ok(false) => unreachable!("the first read failed"),
            Err(e) => break e,
        }
    };
    if let TraceError::Corrupt { offset, .. } = err {
        assert!(offset <= len as u64, "offset {offset} past {len}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let file = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        let mut blocks = Vec::new();
        let mut total = 0u64;
        while rest.len() >= 3 {
            let head = take(&mut rest, 3);
            let len = u16::from_le_bytes([head[1], head[2]]) as usize % 2048;
            let records = take(&mut rest, len);
            if records.is_empty() {
                break;
            }
            let count = u32::from(head[0]).min(records.len() as u32).max(1);
            total += u64::from(count);
            let index = (mode & 0x20 != 0 && rest.len() >= 3).then(|| {
                let head = take(&mut rest, 3);
                let len = u16::from_le_bytes([head[1], head[2]]) as usize % 4096;
                (take(&mut rest, len), u32::from(head[0]))
            });
            blocks.push(RawBlock {
                records,
                count,
                index,
            });
        }
        // Mode bits: a wrong total, or no end marker at all.
        let total = match mode >> 1 & 3 {
            1 => Some(total + 1),
            2 => None,
            _ => Some(total),
        };
        native_file(&blocks, total)
    };
    let batch = 1 + (mode as usize >> 3);
    let mut reader = NativeReader::new(&file[..], "fuzz.pgl");
    let got = drain(&mut reader, &[batch, usize::MAX], usize::MAX);
    if got.error.is_some() {
        // Offsets name a byte of the file (or its end).
        let mut again = NativeReader::new(&file[..], "fuzz.pgl");
        let _ = drain(&mut again, &[usize::MAX], usize::MAX);
        let mut r = NativeReader::new(&file[..], "fuzz.pgl");
        let mut sink = Vec::new();
        check_offset(file.len(), || {
            pagelab_trace::TraceSource::fill(&mut r, &mut sink, usize::MAX)
        });
    }

    // Through the page index where there is one: the same contract, errors inside the file.
    let mut pages = NativeReader::new(&file[..], "fuzz.pgl");
    let paged = drain_pages(
        &mut pages,
        &mut PageFilter::new(4, false),
        &[batch, usize::MAX],
    );
    if paged.error.is_some() {
        let mut r = NativeReader::new(&file[..], "fuzz.pgl");
        let mut batch = pagelab_trace::PageBatch::default();
        let mut filter = PageFilter::new(4, false);
        check_offset(file.len(), || {
            pagelab_trace::TraceSource::fill_pages(&mut r, &mut filter, &mut batch, usize::MAX)
        });
    }

    // What was read survives a round trip through the writer.
    let mut w = NativeWriter::new(Vec::new()).unwrap();
    for e in &got.events {
        w.write(e).unwrap();
    }
    let bytes = w.finish().unwrap();
    let mut back = NativeReader::new(&bytes[..], "again.pgl");
    let again = drain(&mut back, &[usize::MAX], usize::MAX);
    assert_eq!(again.error, None, "the writer's own output must read back");
    assert_eq!(again.events, got.events, "native round trip");
    // The writer's page index counts what its records hold.
    let mut back = NativeReader::new(&bytes[..], "again.pgl");
    let paged = drain_pages(
        &mut back,
        &mut PageFilter::new(4, false),
        &[batch, usize::MAX],
    );
    assert_eq!(
        paged.error, None,
        "the writer's own page index must read back"
    );
    let refs = got
        .events
        .iter()
        .filter(|e| matches!(e, Event::Ref(_)))
        .count() as u64;
    assert_eq!(
        paged.refs[0] + paged.refs[1],
        refs,
        "the page index's references"
    );
    assert_eq!(
        paged.other_events,
        got.events.len() as u64 - refs,
        "the page index's other events"
    );

    let refs: Vec<Event> = got
        .events
        .iter()
        .filter(|e| matches!(e, Event::Ref(_)))
        .cloned()
        .collect();
    let mut w = LackeyWriter::new(Vec::new());
    for e in &refs {
        w.write(e).unwrap();
    }
    let text = w.finish().unwrap();
    let mut back = LackeyReader::new(&text[..], "again.lackey");
    let again = drain(&mut back, &[usize::MAX], usize::MAX);
    assert_eq!(
        again.error, None,
        "Lackey written by pagelab must read back"
    );
    assert_eq!(again.events, refs, "Lackey round trip");
});
