//! Lackey: parsing, every error with its line, chunk boundaries, exact writing.

use super::*;
use crate::{TraceError, TraceSource};
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use proptest::prelude::*;
use std::io::Read;

fn r(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    })
}

/// Reads everything in batches of `batch`: the events, and the error if any.
fn read_from(src: impl Read, batch: usize) -> (Vec<Event>, Option<TraceError>) {
    let mut src = LackeyReader::new(src, "t.lackey");
    let mut out = Vec::new();
    loop {
        match src.fill(&mut out, batch) {
            Ok(true) => {}
            Ok(false) => {
                assert!(!src.fill(&mut out, batch).unwrap());
                return (out, None);
            }
            Err(e) => {
                assert_eq!(
                    src.fill(&mut out, batch).unwrap_err().to_string(),
                    e.to_string()
                );
                return (out, Some(e));
            }
        }
    }
}

fn read(text: &str) -> (Vec<Event>, Option<TraceError>) {
    read_from(text.as_bytes(), 1000)
}

fn parse_error(text: &str) -> (u64, String, String) {
    match read(text).1 {
        Some(TraceError::Parse {
            source_name,
            line,
            text,
            reason,
        }) => {
            assert_eq!(source_name, "t.lackey");
            assert!(reason.contains("a Lackey line is"), "{reason}");
            (line, text, reason)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

/// A reader that hands out at most `n` bytes per call.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn parses_valgrind_output() {
    let text = "==6298== Lackey, an example Valgrind tool\n==6298== \n\
                I  0401ab70,3\n S 1fff000758,8\n L 04000b20,4\n M 7ff0001234,16\n\n==6298== Exit\n";
    let (events, err) = read(text);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![
            r(AccessKind::Instr, 0x0401ab70, 3),
            r(AccessKind::Store, 0x1fff000758, 8),
            r(AccessKind::Load, 0x04000b20, 4),
            r(AccessKind::Modify, 0x7ff0001234, 16),
        ]
    );
}

#[test]
fn tolerates_spacing_a_missing_newline_and_crlf() {
    let text = "  I 10,1\nL     20,2  \r\n    S\t"; // the tab is not spacing
    assert_eq!(parse_error(text).0, 3);
    let text = "  I 10,1\nL     20,2  \r\n S 0000000000000000000030,0";
    let (events, err) = read(text);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![
            r(AccessKind::Instr, 0x10, 1),
            r(AccessKind::Load, 0x20, 2),
            r(AccessKind::Store, 0x30, 0)
        ]
    );
    let (events, err) = read("I  ffffffffffffffff,4294967295");
    assert!(err.is_none());
    assert_eq!(events, vec![r(AccessKind::Instr, u64::MAX, u32::MAX)]);
    assert_eq!(read("").0, vec![]);
    assert_eq!(read("\n\n").0, vec![]);
}

#[test]
fn every_error_names_its_line() {
    let cases: &[(&str, u64, &str)] = &[
        ("I  10,1\nX  10,1\n", 2, "unknown record type"),
        ("I  10,1\n\nIX 10,1\n", 3, "space after the record letter"),
        ("I  ,1\n", 1, "hexadecimal address"),
        ("I  10;1\n", 1, "`,` after the address"),
        ("I  10,\n", 1, "decimal size"),
        ("I  10,x\n", 1, "decimal size"),
        ("I  10,1 x\n", 1, "after the size"),
        ("I  10,1x\n", 1, "after the size"),
        ("I  1ffffffffffffffff,1\n", 1, "64 bits"),
        ("I  10,4294967296\n", 1, "32 bits"),
        ("I  10,99999999999999999999999\n", 1, "32 bits"),
        ("I  0x10,1\n", 1, "`,` after the address"),
        (" == not valgrind\n", 1, "unknown record type"),
        ("=\n", 1, "unknown record type"),
        ("i  10,1", 1, "unknown record type"),
        ("I  10,1\nI  10,1\nI  10,", 3, "decimal size"),
    ];
    for (text, line, want) in cases {
        let (l, _, reason) = parse_error(text);
        assert_eq!(l, *line, "{text:?}: {reason}");
        assert!(reason.contains(want), "{text:?}: {reason}");
    }
    let (_, quoted, _) = parse_error("ok\n");
    assert_eq!(quoted, "ok");
    let long = format!("I  10,1\nI  {}\n", "z".repeat(500));
    let (line, quoted, _) = parse_error(&long);
    assert_eq!(line, 2);
    assert_eq!(
        quoted.len(),
        203,
        "quotes are truncated to 200 bytes plus `...`"
    );
}

#[test]
fn events_before_an_error_are_delivered_first() {
    let (events, err) = read_from("I  10,1\n L 20,8\nbad\n".as_bytes(), 1);
    assert_eq!(events.len(), 2);
    assert!(matches!(err, Some(TraceError::Parse { line: 3, .. })));
}

/// Many lines with a line number in them, crossing several 1 MiB chunks.
fn big_text() -> (String, Vec<Event>) {
    let mut text = String::new();
    let mut events = Vec::new();
    for i in 0..300_000u64 {
        if i % 1000 == 0 {
            text.push_str("==1== some valgrind chatter\n");
        }
        let addr = i * 0x1_0001;
        let size = (i % 64) as u32;
        text.push_str(&format!(" L {addr:08x},{size}\n"));
        events.push(r(AccessKind::Load, addr, size));
    }
    (text, events)
}

#[test]
fn lines_straddling_chunks_are_read_whole() {
    let (text, events) = big_text();
    assert!(text.len() > 3 * (1 << 20));
    for (batch, step) in [(usize::MAX, usize::MAX), (7, 4096), (100_000, 13)] {
        let (back, err) = read_from(Trickle(text.as_bytes(), step), batch);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(back, events);
    }
    // An error deep in the file names the right line.
    let bad = text.clone() + "I  12,zz\n";
    let lines = text.lines().count() as u64;
    let (back, err) = read_from(Trickle(bad.as_bytes(), 1 << 19), 1 << 16);
    assert_eq!(back, events);
    assert!(matches!(err, Some(TraceError::Parse { line, .. }) if line == lines + 1));
}

#[test]
fn long_lines() {
    // A Valgrind line longer than the buffer is skipped...
    let text = format!("I  10,1\n=={}\nI  20,2", "x".repeat(3 << 20));
    let (events, err) = read(&text);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![r(AccessKind::Instr, 0x10, 1), r(AccessKind::Instr, 0x20, 2)]
    );
    let text = format!("=={}", "x".repeat(3 << 20));
    let (events, err) = read(&text);
    assert!(events.is_empty() && err.is_none(), "{err:?}");
    // ...and any other is refused.
    let text = format!("I  10,1\nI  {}\n", "0".repeat(2 << 20));
    let (line, _, reason) = parse_error(&text);
    assert_eq!(line, 2);
    assert!(reason.contains("longer than 1 MiB"), "{reason}");
}

fn written(events: &[Event]) -> (String, u64) {
    let mut w = LackeyWriter::new(Vec::new());
    events.iter().for_each(|e| w.write(e).unwrap());
    let dropped = w.dropped();
    (String::from_utf8(w.finish().unwrap()).unwrap(), dropped)
}

#[test]
fn writes_exactly_as_lackey() {
    let events = vec![
        r(AccessKind::Instr, 0x0401ab70, 3),
        r(AccessKind::Store, 0x1fff000758, 8),
        r(AccessKind::Load, 0, 0),
        r(AccessKind::Modify, u64::MAX, u32::MAX),
        Event::Brk { end: VirtAddr(5) },
        r(AccessKind::Instr, 0xabc, 15),
    ];
    let (text, dropped) = written(&events);
    assert_eq!(
        text,
        "I  0401ab70,3\n S 1fff000758,8\n L 00000000,0\n M ffffffffffffffff,4294967295\nI  00000abc,15\n"
    );
    assert_eq!(dropped, 1);
    let mut refs = events.clone();
    refs.retain(|e| matches!(e, Event::Ref(_)));
    let (back, err) = read(&text);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(back, refs);
}

fn arb_ref() -> impl Strategy<Value = Event> {
    let addr = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        any::<u64>(),
        0u64..0x1_0000_0000
    ];
    let size = prop_oneof![Just(0u32), Just(u32::MAX), 0u32..64, any::<u32>()];
    let kind = prop_oneof![
        Just(AccessKind::Instr),
        Just(AccessKind::Load),
        Just(AccessKind::Store),
        Just(AccessKind::Modify)
    ];
    (kind, addr, size).prop_map(|(kind, addr, size)| r(kind, addr, size))
}

proptest! {
    #[test]
    fn references_round_trip(events in proptest::collection::vec(arb_ref(), 0..300), batch in 1usize..50) {
        let (text, dropped) = written(&events);
        prop_assert_eq!(dropped, 0);
        let (back, err) = read_from(text.as_bytes(), batch);
        prop_assert!(err.is_none());
        prop_assert_eq!(back, events);
    }
}

proptest! {
    /// Garbage never panics: it parses or names a line within the input.
    #[test]
    fn garbage_is_an_error_not_a_panic(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b' '), Just(b'I'), Just(b'L'), Just(b','), Just(b'='),
                        Just(b'f'), Just(b'9'), any::<u8>()],
            0..400,
        ),
        batch in 1usize..20,
    ) {
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        if let (_, Some(err)) = read_from(&bytes[..], batch) {
            let is_parse_error_within_input = matches!(err, TraceError::Parse { line, .. } if line <= lines);
            prop_assert!(is_parse_error_within_input, "{}", err);
        }
    }
}

/// The rules of the module docs, line by line over `str`-like slices: the
/// events and the first error's line and reason.
fn reference(text: &[u8]) -> (Vec<Event>, Option<(u64, &'static str)>) {
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if text.is_empty() || text.ends_with(b"\n") {
        lines.pop();
    }
    let mut out = Vec::new();
    for (i, l) in lines.into_iter().enumerate() {
        match reference_line(l) {
            Ok(r) => out.extend(r),
            Err(why) => return (out, Some((i as u64 + 1, why))),
        }
    }
    (out, None)
}

fn reference_line(l: &[u8]) -> Result<Option<Event>, &'static str> {
    let skip = |t: &[u8], set: &[u8]| t.iter().take_while(|b| set.contains(b)).count();
    let blank = |t: &[u8]| skip(t, b" \r") == t.len();
    if l.starts_with(b"==") {
        return Ok(None);
    }
    let t = &l[skip(l, b" ")..];
    let kind = match t.first() {
        Some(b'I') => AccessKind::Instr,
        Some(b'L') => AccessKind::Load,
        Some(b'S') => AccessKind::Store,
        Some(b'M') => AccessKind::Modify,
        _ if blank(t) => return Ok(None),
        _ => return Err("unknown record type"),
    };
    if t.get(1) != Some(&b' ') {
        return Err("expected a space after the record letter");
    }
    let t = &t[1 + skip(&t[1..], b" ")..];
    let hex = t.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if hex == 0 {
        return Err("expected a hexadecimal address");
    }
    let digits = std::str::from_utf8(&t[skip(&t[..hex], b"0")..hex]).unwrap();
    let addr = u64::from_str_radix(digits, 16).or(if digits.is_empty() {
        Ok(0)
    } else {
        Err("address does not fit in 64 bits")
    })?;
    if t.get(hex) != Some(&b',') {
        return Err("expected `,` after the address");
    }
    let t = &t[hex + 1..];
    let dec = t.iter().take_while(|b| b.is_ascii_digit()).count();
    if dec == 0 {
        return Err("expected a decimal size after `,`");
    }
    let digits = std::str::from_utf8(&t[skip(&t[..dec], b"0")..dec]).unwrap();
    let size = if digits.is_empty() {
        0
    } else {
        digits
            .parse::<u32>()
            .map_err(|_| "size does not fit in 32 bits")?
    };
    if !blank(&t[dec..]) {
        return Err("unexpected text after the size");
    }
    Ok(Some(r(kind, addr, size)))
}

/// Mostly lines as Valgrind prints them, with every variant and mistake near them.
fn arb_line() -> impl Strategy<Value = String> {
    let head = prop_oneof![
        8 => prop_oneof![Just("I  "), Just(" L "), Just(" S "), Just(" M ")].prop_map(String::from),
        1 => "[ ]{0,3}[ILSMX=i][ ]{0,3}",
    ];
    let hex = prop_oneof![
        8 => "[0-9a-f]{8,12}",
        2 => "[0-9a-fA-F]{1,16}",
        1 => "0{0,6}[0-9a-f]{15,18}",
        1 => "[0-9a-fx]{0,3}",
    ];
    let size = prop_oneof![
        8 => "[1-9][0-9]?",
        2 => "[0-9]{0,4}",
        1 => "[0-9]{9,12}",
        1 => "[0-9x;]{0,2}",
    ];
    let comma = prop_oneof![12 => Just(","), 1 => Just(";"), 1 => Just("")];
    let tail = prop_oneof![12 => Just(""), 1 => Just(" "), 1 => Just("\r"), 1 => Just(" \r"), 1 => Just("x")];
    let record =
        (head, hex, comma, size, tail).prop_map(|(h, x, c, s, t)| format!("{h}{x}{c}{s}{t}"));
    prop_oneof![
        20 => record,
        1 => "==[0-9]{1,5}==[ -~]{0,60}",
        1 => Just(String::new()),
        1 => "[ -~\r]{0,40}",
        1 => "[ \r]{1,3}",
    ]
}

pub(super) fn arb_text() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(arb_line(), 0..120), any::<bool>()).prop_map(|(lines, last_nl)| {
        let mut text = lines.join("\n");
        if last_nl && !lines.is_empty() {
            text.push('\n');
        }
        text.into_bytes()
    })
}

/// The events and the error, printed, of reading `text` in batches of
/// `batch` (below 64 the fast path never runs) from a reader of `chunk` bytes.
fn outcome(text: &[u8], batch: usize, chunk: usize, step: usize) -> (Vec<Event>, Option<String>) {
    let mut src = LackeyReader::new(Trickle(text, step), "t.lackey").with_chunk(chunk);
    let mut out = Vec::new();
    loop {
        match src.fill(&mut out, batch) {
            Ok(true) => {}
            Ok(false) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The fast path, the careful path and the reference agree on every
    /// event and on the error, its line and its text, whatever the chunks.
    #[test]
    fn fast_careful_and_reference_agree(
        text in arb_text(),
        chunk in 64usize..400,
        step in 1usize..50,
        batch in 1usize..64,
    ) {
        let fast = outcome(&text, usize::MAX, 1 << 20, step);
        let careful = outcome(&text, batch, 1 << 20, step);
        prop_assert_eq!(&fast, &careful);
        let (events, err) = reference(&text);
        prop_assert_eq!(&fast.0, &events);
        match (&fast.1, err) {
            (None, None) => {}
            (Some(got), Some((line, why))) => {
                let want = format!("t.lackey line {line}: ");
                prop_assert!(got.contains(&want) && got.contains(why), "{} / {} {}", got, line, why);
            }
            (got, want) => prop_assert!(false, "error {:?}, reference {:?}", got, want),
        }
        // Small chunks put lines across chunk boundaries at every offset.
        prop_assert_eq!(&outcome(&text, usize::MAX, chunk, step), &fast);
        prop_assert_eq!(&outcome(&text, 1000, chunk, step), &fast);
    }
}

/// `text` in a fresh file of its own, removed when dropped.
pub(super) struct TempFile(std::path::PathBuf);

impl TempFile {
    pub(super) fn new(text: &[u8]) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("pagelab-lackey-{}-{n}.lackey", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    pub(super) fn reader(&self) -> LackeyReader<std::fs::File> {
        let file = std::fs::File::open(&self.0).unwrap();
        LackeyReader::mapped(file, "t.lackey").unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// As [`outcome`], through a memory map of `text` with windows of `chunk` bytes.
fn mapped_outcome(text: &[u8], batch: usize, chunk: usize) -> (Vec<Event>, Option<String>) {
    let file = TempFile::new(text);
    let mut src = file.reader().with_chunk(chunk);
    assert_eq!(src.is_mapped(), !text.is_empty());
    let mut out = Vec::new();
    loop {
        match src.fill(&mut out, batch) {
            Ok(true) => {}
            Ok(false) => {
                assert!(!src.fill(&mut out, batch).unwrap());
                // Read to its end, a mapped file was hashed on the way: the provenance's
                // checksum of the same bytes, with no second pass.
                let want = (!text.is_empty()).then(|| {
                    let mut c = pagelab_core::Checksum::default();
                    c.update(text);
                    (text.len() as u64, c.finish())
                });
                assert_eq!(src.read_checksum(), want, "chunk {chunk}, batch {batch}");
                return (out, None);
            }
            Err(e) => {
                let again = src.fill(&mut out, batch).unwrap_err().to_string();
                assert_eq!(again, e.to_string());
                return (out, Some(e.to_string()));
            }
        }
    }
}

/// Reading in place and reading into a buffer agree, whatever the chunk size.
fn assert_mapped_agrees(text: &[u8], chunks: &[usize]) {
    for &chunk in chunks {
        for batch in [usize::MAX, 1000, 7] {
            let read = outcome(text, batch, chunk, usize::MAX);
            let mapped = mapped_outcome(text, batch, chunk);
            assert_eq!(mapped, read, "chunk {chunk}, batch {batch}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// A mapped file gives the events and the error (line, text, reason) of
    /// reading the same bytes, with windows small enough that lines straddle
    /// them and the copied tail at every offset.
    #[test]
    fn mapped_and_read_agree(
        text in arb_text(),
        chunk in 64usize..400,
        batch in 1usize..64,
    ) {
        let read = outcome(&text, usize::MAX, 1 << 20, usize::MAX);
        prop_assert_eq!(&mapped_outcome(&text, usize::MAX, 1 << 20), &read);
        prop_assert_eq!(&mapped_outcome(&text, usize::MAX, chunk), &read);
        prop_assert_eq!(&mapped_outcome(&text, batch, chunk), &read);
        prop_assert_eq!(&mapped_outcome(&text, 1000, chunk), &read);
    }
}

#[test]
fn mapped_empty_and_unterminated_files() {
    assert_eq!(mapped_outcome(b"", usize::MAX, 1 << 20), (vec![], None));
    assert_eq!(mapped_outcome(b"", 1, 64), (vec![], None));
    assert_mapped_agrees(b"\n", &[64, 1 << 20]);
    assert_mapped_agrees(b"I  10,1", &[64, 1 << 20]);
    assert_mapped_agrees(b"I  10,1\n L 20,2", &[64, 1 << 20]);
    assert_mapped_agrees(b"I  10,1\n L 20,", &[64, 1 << 20]);
    let (events, err) = mapped_outcome(b"I  10,1\n L 20,2", usize::MAX, 1 << 20);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events,
        vec![r(AccessKind::Instr, 0x10, 1), r(AccessKind::Load, 0x20, 2)]
    );
}

/// Files of every length around the window boundaries, with lines of 16
/// bytes, so that last lines (with and without their newline, good or bad)
/// end exactly at a window's end, at the end of the read-ahead after it, and
/// everywhere between.
#[test]
fn mapped_last_line_at_window_boundaries() {
    for lines in 0..40u64 {
        let mut text: Vec<u8> = (0..lines)
            .flat_map(|i| format!(" L {:010x},{}\n", 0x1000 + i, i % 10).into_bytes())
            .collect();
        assert_eq!(text.len() as u64, 16 * lines);
        assert_mapped_agrees(&text, &[64, 80, 128, 1 << 20]);
        text.pop();
        assert_mapped_agrees(&text, &[64, 80, 128]);
        text.extend_from_slice(b"\nI  zz,1\n");
        assert_mapped_agrees(&text, &[64, 80, 128]);
    }
}

#[test]
fn mapped_big_and_long_lines() {
    let (text, events) = big_text();
    for chunk in [1 << 20, 4096 + 7] {
        assert_eq!(
            mapped_outcome(text.as_bytes(), usize::MAX, chunk),
            (events.clone(), None)
        );
    }
    let bad = text.clone() + "I  12,zz\n";
    let read = outcome(bad.as_bytes(), 1 << 16, 1 << 20, 1 << 19);
    assert!(read.1.is_some());
    assert_eq!(mapped_outcome(bad.as_bytes(), 1 << 16, 1 << 20), read);
    assert_eq!(
        mapped_outcome(bad.as_bytes(), 1 << 16, 1000),
        outcome(bad.as_bytes(), 1 << 16, 1000, usize::MAX)
    );

    // Valgrind lines longer than a window are skipped, others refused, as when read.
    let x = "x".repeat(3 << 20);
    let zeros = "0".repeat(2 << 20);
    for text in [
        format!("I  10,1\n=={x}\nI  20,2"),
        format!("I  10,1\n=={x}\nI  20,2\n"),
        format!("=={x}"),
        format!("=={x}\n"),
        format!("I  10,1\nI  {zeros}\n"),
        format!("I  10,1\nI  {zeros}"),
    ] {
        let read = outcome(text.as_bytes(), usize::MAX, 1 << 20, usize::MAX);
        assert_eq!(mapped_outcome(text.as_bytes(), usize::MAX, 1 << 20), read);
    }
    let mut text = String::new();
    for n in [0, 1, 62, 63, 64, 65, 100, 300, 1000] {
        text += &format!("I  10,1\n=={}\n", "y".repeat(n));
        text += &format!("I  10,1\nI  {}\n", "1".repeat(n));
    }
    assert_mapped_agrees(text.as_bytes(), &[64, 100, 128, 1 << 20]);
}

#[test]
fn a_mapped_file_read_in_part_or_in_pieces_has_no_checksum_of_its_own() {
    let text: Vec<u8> = (0..4000u64)
        .flat_map(|i| format!(" L {:x},8\n", 0x1000 + i * 64).into_bytes())
        .collect();
    let file = TempFile::new(&text);
    let mut src = file.reader().with_chunk(1024);
    let mut out = Vec::new();
    assert!(src.fill(&mut out, 10).unwrap());
    assert_eq!(src.read_checksum(), None, "10 lines of 4000 read");
    let untouched = file.reader();
    assert!(untouched.pieces().is_some() || text.len() < 1 << 20);
    assert_eq!(untouched.read_checksum(), None, "nothing read");
    // Through a box, as the CLI holds it.
    let mut boxed: Box<dyn TraceSource> = Box::new(file.reader().with_chunk(1024));
    while boxed.fill(&mut out, 1 << 16).unwrap() {}
    let mut c = pagelab_core::Checksum::default();
    c.update(&text);
    assert_eq!(boxed.read_checksum(), Some((text.len() as u64, c.finish())));
}
