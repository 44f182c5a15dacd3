//! Filtering as parsing goes, and reading a file in pieces, against the plain reader.

use super::tests::{arb_text, TempFile};
use super::LackeyReader;
use crate::consumer::{of_words, Lru};
use crate::{PageBatch, PageFilter, TraceSource};
use pagelab_core::{Checksum, Event};
use proptest::prelude::*;

/// Everything a filter made of a source: the consumer of its words (flushed), counts,
/// and the error if any.
type Filtered = (Lru, [u64; 2], u64, Option<String>);

/// `src` read through `fill_pages` in batches of `batch` events.
fn through_fill_pages(src: &mut dyn TraceSource, batch: usize) -> Filtered {
    let mut filter = PageFilter::new(4, false);
    let mut out = PageBatch::default();
    let err = loop {
        match src.fill_pages(&mut filter, &mut out, batch) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    filter.flush(&mut out);
    (of_words(&out.words), out.refs, out.other_events, err)
}

/// `src` read as events, then the same filter over them.
fn through_events(src: &mut dyn TraceSource, batch: usize) -> Filtered {
    let mut filter = PageFilter::new(4, false);
    let mut out = PageBatch::default();
    let mut events: Vec<Event> = Vec::new();
    let err = loop {
        match src.fill(&mut events, batch) {
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

/// The references per side, the lines and the error of a whole file read
/// in pieces of `piece` bytes with readers of `chunk` bytes.
fn in_pieces(text: &[u8], piece: usize, chunk: usize) -> ([u64; 2], u64, Option<String>) {
    let file = TempFile::new(text);
    let Some(pieces) = file.reader().pieces() else {
        assert!(text.is_empty(), "a file with text is mapped");
        return ([0; 2], 0, None);
    };
    let pieces = pieces.with_piece_size(piece).with_reader_chunk(chunk);
    let (mut refs, mut lines) = ([0; 2], 0);
    for i in 0..pieces.len() {
        let mut out = PageBatch::default();
        match pieces.read(i, &mut PageFilter::new(4, false), &mut out) {
            Ok(n) => lines += n,
            Err(e) => return (refs, lines, Some(e.at_line(lines).to_string())),
        }
        refs = [refs[0] + out.refs[0], refs[1] + out.refs[1]];
    }
    // Each piece hashed its own segment as it parsed it.
    let mut want = Checksum::with_segment(piece);
    want.update(text);
    assert_eq!(
        pieces.checksum(),
        Some((text.len() as u64, want.finish())),
        "piece {piece}, chunk {chunk}"
    );
    (refs, lines, None)
}

/// The same from the plain reader (references before the error, if any).
fn whole(text: &[u8]) -> ([u64; 2], u64, Option<String>) {
    let mut src = LackeyReader::new(text, "t.lackey");
    let mut events = Vec::new();
    let err = loop {
        match src.fill(&mut events, 1000) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let data = events
        .iter()
        .filter(|e| matches!(e, Event::Ref(r) if !r.kind.is_instr()))
        .count() as u64;
    ([events.len() as u64 - data, data], src.lines(), err)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// The Lackey reader's own `fill_pages` (filtering as it parses) gives
    /// words as good as filtering its events (the same consumer), and their counts and
    /// error.
    #[test]
    fn fill_pages_agrees_with_filtered_events(
        text in arb_text(),
        batch in 1usize..200,
        chunk in 64usize..300,
    ) {
        let read = through_events(&mut LackeyReader::new(&text[..], "t.lackey"), batch);
        let mut src = LackeyReader::new(&text[..], "t.lackey").with_chunk(chunk);
        prop_assert_eq!(&through_fill_pages(&mut src, batch), &read);
        let file = TempFile::new(&text);
        prop_assert_eq!(&through_fill_pages(&mut file.reader().with_chunk(chunk), batch), &read);
        prop_assert_eq!(&through_fill_pages(&mut file.reader(), usize::MAX), &read);
    }

    /// Pieces hold every line exactly once, and the first error in piece
    /// order, numbered from the file's start, is the plain reader's.
    #[test]
    fn pieces_agree_with_the_whole_file(
        text in arb_text(),
        piece in 1usize..300,
        chunk in 64usize..200,
    ) {
        let want = whole(&text);
        let got = in_pieces(&text, piece, chunk);
        prop_assert_eq!(&got.2, &want.2);
        if want.2.is_none() {
            prop_assert_eq!(got, want);
        }
    }
}

/// `refs` instruction and data references, with a Valgrind line of `long` bytes after
/// every `every`-th pair.
fn valgrind_text(refs: u64, every: u64, long: usize) -> String {
    let mut text = String::new();
    for i in 0..refs {
        let (code, data) = (0x400000 + i * 97, i << 13);
        text.push_str(&format!("I  {code:08x},3\n L {data:010x},8\n"));
        if i % every == 7 {
            text.push_str(&format!("=={i}== {}\n", "x".repeat(long)));
        }
    }
    text
}

#[test]
fn pieces_of_big_text_with_long_lines() {
    // Valgrind lines longer than a reader's chunk and than a piece, between references.
    let text = valgrind_text(400, 50, 700);
    let want = whole(text.as_bytes());
    assert_eq!(want.0, [400, 400]);
    for piece in [1, 63, 64, 100, 1000, 4096, 1 << 20] {
        for chunk in [64, 100, 1 << 20] {
            assert_eq!(
                in_pieces(text.as_bytes(), piece, chunk),
                want,
                "piece {piece}, chunk {chunk}"
            );
        }
    }
    // An error far into the file names its line in the file, whatever the pieces.
    let bad = text.clone() + "I  12,3\n L zz,8\nI  14,3\n";
    let want = whole(bad.as_bytes());
    assert!(
        want.2.as_deref().unwrap().contains(" line 810:"),
        "{want:?}"
    );
    for piece in [1, 100, 4096, 1 << 20] {
        assert_eq!(
            in_pieces(bad.as_bytes(), piece, 100).2,
            want.2,
            "piece {piece}"
        );
    }
}

/// A file of about 5 MiB read in its default 2 MiB pieces, in any order: once the
/// last piece is read, the reader it came from has the file's checksum, as reading it
/// whole gives.
#[test]
fn a_file_read_in_pieces_has_its_checksum() {
    let text = valgrind_text(170_000, 5000, 3000);
    let file = TempFile::new(text.as_bytes());
    let mut want = Checksum::default();
    want.update(text.as_bytes());
    let want = Some((text.len() as u64, want.finish()));

    let src = file.reader();
    let pieces = src.pieces().expect("a plain file on disk is mapped");
    assert_eq!(pieces.len(), 3);
    for i in [2, 0, 1] {
        assert_eq!(src.read_checksum(), None, "not every piece was read");
        pieces
            .read(i, &mut PageFilter::new(4, false), &mut PageBatch::default())
            .unwrap();
    }
    assert_eq!(src.read_checksum(), want);
    assert_eq!(pieces.checksum(), want);

    // The plain reader, which hashes as it reads the whole file, agrees.
    let mut whole = file.reader();
    through_fill_pages(&mut whole, usize::MAX);
    assert_eq!(whole.read_checksum(), want);
}
