//! What pagelab's fuzz targets share: draining a source while checking the
//! [`TraceSource`] contract, a source over a vector, the page words a filter
//! makes of events, and native files built around fuzzed record bytes.
//!
//! The targets compare the paths of one reader against each other (a
//! differential target finds wrong answers, not only panics), so most of
//! what is here turns a path's output into one comparable value.

use pagelab_core::{Event, SourceInfo};
use pagelab_trace::consumer::{of_words, Lru};
use pagelab_trace::{PageBatch, PageFilter, TraceError, TraceSource, PAGE_INDEX_CHUNK};

/// Everything a source gave: its events in order and the error it ended with.
#[derive(Debug, PartialEq, Eq)]
pub struct Drained {
    /// Events in order, those before an error included.
    pub events: Vec<Event>,
    /// The error's message, if the source failed.
    pub error: Option<String>,
}

/// The next batch size from `sizes`, round robin (never 0).
fn size_at(sizes: &[usize], i: usize) -> usize {
    sizes[i % sizes.len()].max(1)
}

/// Reads `src` to its end (at most `cap` events) in batches of `sizes`,
/// appending to one growing vector, and checks the contract of
/// [`TraceSource::fill`]: at most `max` appended, `Ok(true)` only with
/// events, and the same final answer repeated after the end or an error.
pub fn drain(src: &mut dyn TraceSource, sizes: &[usize], cap: usize) -> Drained {
    let mut events = Vec::new();
    let mut i = 0;
    let error = loop {
        if events.len() >= cap {
            return Drained {
                events,
                error: Some("(cap reached)".into()),
            };
        }
        let max = size_at(sizes, i);
        i += 1;
        let before = events.len();
        match src.fill(&mut events, max) {
            Ok(true) => {
                let n = events.len() - before;
                assert!(n > 0, "fill returned Ok(true) with no event");
                assert!(n <= max, "fill appended {n} events for max {max}");
            }
            Ok(false) => {
                assert_eq!(events.len(), before, "fill returned Ok(false) with events");
                assert!(matches!(src.fill(&mut events, max), Ok(false)));
                break None;
            }
            Err(e) => {
                assert_eq!(events.len(), before, "fill failed after appending");
                let again = src.fill(&mut events, max);
                assert_eq!(
                    again.as_ref().map_err(ToString::to_string),
                    Err(e.to_string()),
                    "a failed source must repeat its error"
                );
                check_error(&e);
                break Some(e.to_string());
            }
        }
    };
    Drained { events, error }
}

/// What a page filter made: what the contract's consumer makes of its words, counts, and
/// the error that ended the input. (Readers may make different words that are as good,
/// such as the Lackey windows' depth-1 filter's, so the words are not compared.)
#[derive(Debug, PartialEq, Eq)]
pub struct Paged {
    /// The consumer after the words (see `pagelab_trace::consumer`), after the final flush.
    pub consumer: Lru,
    /// References per side.
    pub refs: [u64; 2],
    /// Other events.
    pub other_events: u64,
    /// The error's message, if the source failed.
    pub error: Option<String>,
}

/// Reads `src` through [`TraceSource::fill_pages`] in batches of `sizes`
/// into one batch and `filter`, then flushes the filter.
pub fn drain_pages(src: &mut dyn TraceSource, filter: &mut PageFilter, sizes: &[usize]) -> Paged {
    let mut batch = PageBatch::default();
    let mut i = 0;
    let error = loop {
        let max = size_at(sizes, i);
        i += 1;
        let before = batch.events();
        match src.fill_pages(filter, &mut batch, max) {
            Ok(true) => {
                let n = batch.events() - before;
                assert!(n > 0, "fill_pages returned Ok(true) taking in nothing");
                // A native page index is taken a chunk at a time.
                assert!(
                    n <= max as u64 || n <= u64::from(PAGE_INDEX_CHUNK),
                    "fill_pages took in {n} events for max {max}"
                );
            }
            Ok(false) => break None,
            Err(e) => {
                check_error(&e);
                break Some(e.to_string());
            }
        }
    };
    filter.flush(&mut batch);
    Paged {
        consumer: of_words(&batch.words),
        refs: batch.refs,
        other_events: batch.other_events,
        error,
    }
}

/// What `filter` makes of `events` (flushed at the end), with `error` carried over.
pub fn filter_events(events: &[Event], mut filter: PageFilter, error: Option<String>) -> Paged {
    let mut batch = PageBatch::default();
    for e in events {
        filter.event(e, &mut batch);
    }
    filter.flush(&mut batch);
    Paged {
        consumer: of_words(&batch.words),
        refs: batch.refs,
        other_events: batch.other_events,
        error,
    }
}

/// An error must say what it is about: non-empty, and a parse error's quoted
/// line is one line.
pub fn check_error(e: &TraceError) {
    let text = e.to_string();
    assert!(!text.trim().is_empty(), "empty error message: {e:?}");
    if let TraceError::Parse { text: quoted, .. } = e {
        assert!(!quoted.contains('\n'), "quoted line holds a newline: {e:?}");
    }
}

/// A source over events in memory.
pub struct VecSource {
    events: Vec<Event>,
    at: usize,
}

impl VecSource {
    /// A source of `events`.
    pub fn new(events: Vec<Event>) -> VecSource {
        VecSource { events, at: 0 }
    }
}

impl TraceSource for VecSource {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let n = max.min(self.events.len() - self.at);
        out.extend_from_slice(&self.events[self.at..self.at + n]);
        self.at += n;
        Ok(n > 0)
    }

    fn info(&self) -> SourceInfo {
        SourceInfo::default()
    }
}

/// The block checksum of `docs/trace-format.md`, written from its text: the
/// 12 header bytes then the frame, zero padded to 8-byte little-endian words.
pub fn native_checksum(header: &[u8; 12], frame: &[u8]) -> u64 {
    const K: u64 = 0x9fb2_1c65_1e98_df25;
    let mut s = header.to_vec();
    s.extend_from_slice(frame);
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ s.len() as u64;
    s.resize(s.len().div_ceil(8) * 8, 0);
    for w in s.chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

/// One block of a native file: its record bytes (compressed here) and the
/// record count its header claims.
pub struct RawBlock<'a> {
    /// The records, before compression.
    pub records: &'a [u8],
    /// `record_count` of the header.
    pub count: u32,
    /// The page block after it, in a file with a page index: its content before
    /// compression, and its chunk count.
    pub index: Option<(&'a [u8], u32)>,
}

/// A native file of `blocks`, each with a valid frame and checksum, and an
/// end marker counting `total` records (`None`: no end marker). When a block
/// has a page block the file is version 5 with a page index for a filter of
/// depth 4 without fragments, and a block without one lacks it.
pub fn native_file(blocks: &[RawBlock<'_>], total: Option<u64>) -> Vec<u8> {
    let indexed = blocks.iter().any(|b| b.index.is_some());
    let mut out = b"PAGELABT".to_vec();
    if indexed {
        out.extend_from_slice(&5u16.to_le_bytes());
        out.extend_from_slice(&[1, 0, 4, 0, 0, 0]);
    } else {
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&[0; 6]);
    }
    let mut frame = |raw: &[u8], count: u32| {
        let frame = zstd::bulk::compress(raw, 1).expect("zstd compresses");
        let mut header = [0u8; 12];
        header[..4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        header[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        header[8..].copy_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&native_checksum(&header, &frame).to_le_bytes());
        out.extend_from_slice(&frame);
    };
    for b in blocks {
        frame(b.records, b.count);
        if let Some((raw, chunks)) = b.index {
            frame(raw, chunks);
        }
    }
    if let Some(total) = total {
        out.extend_from_slice(&[0; 12]);
        out.extend_from_slice(&total.to_le_bytes());
    }
    out
}

/// A byte string read from the front of the input, for targets that split it.
pub fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(data.len());
    let (head, rest) = data.split_at(n);
    *data = rest;
    head
}

pub mod events;
