//! The Lackey reader, every path against the others on the same bytes.
//!
//! Input: two configuration bytes, then Lackey text. Paths compared:
//! - the careful line loop alone (batches under 64 events, where the block
//!   loop never starts) is the reference;
//! - the 64-byte block loop (large batches, and batches just over 64);
//! - the AVX-512 windows into a page filter (`fill_pages`), against the same
//!   filter over the reference's events (on CPUs without them: the block loop);
//! - the same three on a memory-mapped file, whose windows become a copy
//!   near the end of the map;
//! - the mapped file split into pieces of a few bytes, each through a fresh
//!   filter: same reference counts, lines and first error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pagelab_fuzz::{drain, drain_pages, filter_events};
use pagelab_trace::{LackeyReader, PageBatch, PageFilter, TraceSource};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::sync::OnceLock;

/// One unlinked file per process, rewritten for every input (on tmpfs when there is one).
fn scratch() -> File {
    static FILE: OnceLock<File> = OnceLock::new();
    let f = FILE.get_or_init(|| {
        tempfile::tempfile_in("/dev/shm")
            .or_else(|_| tempfile::tempfile())
            .expect("a temporary file")
    });
    f.try_clone().expect("dup of the scratch file")
}

fn mapped(text: &[u8]) -> LackeyReader<File> {
    let mut f = scratch();
    f.set_len(0).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(text).unwrap();
    LackeyReader::mapped(f, "fuzz.lackey").expect("a regular file maps or is read")
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (c0, c1, text) = (data[0] as usize, data[1] as usize, &data[2..]);
    let small = 1 + c0 % 63;
    let just_over = 64 + c0;
    let depth = 1 + (c1 & 3);
    let fragments = c1 & 4 != 0;
    let piece = 1 + (c1 >> 3) * 8;
    let filter = || PageFilter::new(depth, fragments);
    let name = "fuzz.lackey";

    // The reference: the line loop alone.
    let mut lines_reader = LackeyReader::new(text, name);
    let want = drain(&mut lines_reader, &[small], usize::MAX);
    let lines = lines_reader.lines();

    let mut r = LackeyReader::new(text, name);
    assert_eq!(drain(&mut r, &[usize::MAX], usize::MAX), want, "block loop");
    if want.error.is_none() {
        assert_eq!(r.lines(), lines, "block loop line count");
    }
    let mut r = LackeyReader::new(text, name);
    assert_eq!(
        drain(&mut r, &[just_over, small], usize::MAX),
        want,
        "mixed batches"
    );

    let want_pages = filter_events(&want.events, filter(), want.error.clone());
    let mut r = LackeyReader::new(text, name);
    let got = drain_pages(&mut r, &mut filter(), &[usize::MAX]);
    assert_eq!(got, want_pages, "windows into the filter");
    let mut r = LackeyReader::new(text, name);
    let got = drain_pages(&mut r, &mut filter(), &[just_over, small]);
    assert_eq!(got, want_pages, "windows in small batches");

    let mut m = mapped(text);
    assert_eq!(
        drain(&mut m, &[usize::MAX], usize::MAX),
        want,
        "mapped block loop"
    );
    let mut m = mapped(text);
    assert_eq!(
        drain(&mut m, &[small], usize::MAX),
        want,
        "mapped line loop"
    );
    let mut m = mapped(text);
    assert_eq!(
        drain_pages(&mut m, &mut filter(), &[usize::MAX]),
        want_pages,
        "mapped windows"
    );

    let Some(pieces) = mapped(text).pieces() else {
        assert!(
            text.is_empty(),
            "a mapped file not yet read splits into pieces"
        );
        return;
    };
    let pieces = pieces.with_piece_size(piece);
    let (mut refs, mut lines_seen, mut error) = ([0u64; 2], 0u64, None);
    for i in 0..pieces.len() {
        let mut batch = PageBatch::default();
        match pieces.read(i, &mut filter(), &mut batch) {
            Ok(n) => lines_seen += n,
            Err(e) => {
                error = Some(e.at_line(lines_seen).to_string());
                break;
            }
        }
        refs = [refs[0] + batch.refs[0], refs[1] + batch.refs[1]];
    }
    assert_eq!(error, want.error, "pieces: first error");
    if error.is_none() {
        assert_eq!(refs, want_pages.refs, "pieces: references per side");
        assert_eq!(lines_seen, lines, "pieces: lines");
    }
});
