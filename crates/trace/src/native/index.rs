//! The page index: each block's references as the words of a [`PageFilter`], made by
//! the writer, so that a page-size study reads them instead of decoding the records
//! (`docs/trace-format.md`, "Page blocks").
//!
//! A page block's content is a chunk table followed by the words, every field a
//! little-endian `u64`. Each chunk is two fields: the end of its words (bits 0..32)
//! with its instruction references (bits 32..64), then its data references (bits
//! 0..32) with its other events (bits 32..64). The writer ends a chunk every
//! [`CHUNK_EVENTS`] events and at the block's end, and flushes its filter there, so
//! the words of chunks taken in order, from any chunk on, are as good as one
//! filter's words over the events.

use crate::pages::page_word::{CHANGE_MASK, CHANGE_SHIFT, PAGE_SHIFT, REPLAY, STRADDLE};
use crate::{PageBatch, PageFilter};
use pagelab_core::Event;

/// Events in a page block's chunk (the last of a block may have fewer): what a
/// reader hands out at once from the index.
pub const CHUNK_EVENTS: u32 = 1 << 14;

/// Largest page block content a reader accepts. The writer's 1 MiB of records hold
/// at most 512 Ki references, each at most two words and three replays (21 MiB).
pub(crate) const MAX_INDEX_RAW_LEN: u32 = 1 << 26;

/// Largest compressed page block a reader accepts.
pub(crate) const MAX_INDEX_COMPRESSED_LEN: u32 = (1 << 26) + (1 << 20);

/// Bytes of a chunk's entry in the table.
pub(crate) const CHUNK_ENTRY_LEN: u32 = 16;

/// The filter the writer makes the index with unless told otherwise: four pages per
/// side, no fragments (the study's filter for the default TLB and every preset whose
/// L1 arrays have four ways or more).
pub const DEFAULT_INDEX_FILTER: (usize, bool) = (4, false);

/// One chunk of a page block: where its words end, and what it counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) words_end: u32,
    pub(crate) refs: [u32; 2],
    pub(crate) other_events: u32,
}

impl Chunk {
    pub(crate) fn events(&self) -> u64 {
        self.refs[0] as u64 + self.refs[1] as u64 + self.other_events as u64
    }
}

/// The writer's side: filters each event of the block being written.
pub(crate) struct IndexBuilder {
    filter: PageFilter,
    /// Events a chunk ends at ([`CHUNK_EVENTS`] but in tests).
    chunk_target: u32,
    /// The block's words so far, and the current chunk's counts.
    batch: PageBatch,
    chunks: Vec<Chunk>,
    chunk_events: u32,
}

impl IndexBuilder {
    pub(crate) fn new(depth: usize, fragments: bool) -> IndexBuilder {
        IndexBuilder {
            filter: PageFilter::new(depth, fragments),
            chunk_target: CHUNK_EVENTS,
            batch: PageBatch::default(),
            chunks: Vec::new(),
            chunk_events: 0,
        }
    }

    /// Ends chunks every `events` events, so that tests can make many from few.
    #[cfg(test)]
    pub(crate) fn set_chunk_target(&mut self, events: u32) {
        self.chunk_target = events.clamp(1, CHUNK_EVENTS);
    }

    /// The filter's depth and fragments, as the file header records them.
    pub(crate) fn params(&self) -> (usize, bool) {
        (self.filter.depth(), self.filter.fragments())
    }

    /// Takes in the block's next event.
    #[inline]
    pub(crate) fn event(&mut self, e: &Event) {
        self.filter.event(e, &mut self.batch);
        self.chunk_events += 1;
        if self.chunk_events == self.chunk_target {
            self.end_chunk();
        }
    }

    fn end_chunk(&mut self) {
        self.filter.flush(&mut self.batch);
        let b = &mut self.batch;
        self.chunks.push(Chunk {
            words_end: u32::try_from(b.words.len()).expect("a block's words fit in u32"),
            refs: b.refs.map(|r| r as u32),
            other_events: b.other_events as u32,
        });
        b.refs = [0; 2];
        b.other_events = 0;
        self.chunk_events = 0;
    }

    /// Writes the block's page block content to `raw` (cleared first), returns the
    /// number of chunks, and starts afresh for the next block.
    pub(crate) fn finish_block(&mut self, raw: &mut Vec<u8>) -> u32 {
        if self.chunk_events > 0 {
            self.end_chunk();
        }
        raw.clear();
        raw.reserve(self.chunks.len() * CHUNK_ENTRY_LEN as usize + self.batch.words.len() * 8);
        for c in &self.chunks {
            let first = c.words_end as u64 | (c.refs[0] as u64) << 32;
            let second = c.refs[1] as u64 | (c.other_events as u64) << 32;
            raw.extend_from_slice(&first.to_le_bytes());
            raw.extend_from_slice(&second.to_le_bytes());
        }
        for w in &self.batch.words {
            raw.extend_from_slice(&w.to_le_bytes());
        }
        let chunks = self.chunks.len() as u32;
        self.chunks.clear();
        self.batch.clear();
        self.filter.reset();
        chunks
    }
}

/// The reader's side: one block's page block, decoded and checked.
#[derive(Default)]
pub(crate) struct PageIndex {
    chunks: Vec<Chunk>,
    /// The page block's content as decompressed: the chunk table, then the words
    /// (kept as bytes, so that each word is copied once, into the caller's batch).
    raw: Vec<u8>,
    /// Where the words start in `raw`.
    words_at: usize,
    /// The next chunk to hand out.
    next: usize,
}

/// The little-endian `u64` of 8 bytes.
fn field(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

impl PageIndex {
    /// The buffer a page block's content is decompressed into before [`PageIndex::load`].
    pub(crate) fn raw_mut(&mut self) -> &mut Vec<u8> {
        &mut self.raw
    }

    /// Decodes the page block's content in the buffer ([`PageIndex::raw_mut`];
    /// `chunk_count` chunks) of a block of `records` records, checking everything a
    /// study relies on: the chunks add up to the block's records, their words end in
    /// order at the end, every word's flags and change distance are ones a filter
    /// makes, and a spanning reference's last page follows its word within the chunk,
    /// after its first page and no further than a reference of
    /// [`crate::max_ref_size`] bytes reaches. `Err` says what is wrong.
    pub(crate) fn load(&mut self, chunk_count: u32, records: u32) -> Result<(), String> {
        let raw = &self.raw;
        let table = chunk_count as usize * CHUNK_ENTRY_LEN as usize;
        if raw.len() < table || !(raw.len() - table).is_multiple_of(8) {
            return Err(format!(
                "page block of {} bytes cannot hold {chunk_count} chunk entries of 16 bytes and whole 8-byte words",
                raw.len()
            ));
        }
        self.chunks.clear();
        self.chunks.extend(raw[..table].chunks_exact(16).map(|e| {
            let (first, second) = (field(&e[..8]), field(&e[8..]));
            Chunk {
                words_end: first as u32,
                refs: [(first >> 32) as u32, second as u32],
                other_events: (second >> 32) as u32,
            }
        }));
        self.words_at = table;
        self.next = 0;
        let words = &raw[table..];
        let count = words.len() / 8;
        let (mut start, mut events) = (0usize, 0u64);
        // The most 4K pages a reference within the size limit spans past its first.
        let max_span = (u64::from(crate::max_ref_size().max(1)) - 1 + 4095) >> PAGE_SHIFT;
        for (i, c) in self.chunks.iter().enumerate() {
            let end = c.words_end as usize;
            if end < start || end > count {
                return Err(format!(
                    "page block chunk {i} ends its words at {end}, outside {start}..={count}"
                ));
            }
            if c.events() == 0 {
                return Err(format!("page block chunk {i} counts no events"));
            }
            events += c.events();
            check_words(&words[8 * start..8 * end], max_span).map_err(|(at, why)| {
                format!("page block word {} (in chunk {i}): {why}", start + at)
            })?;
            start = end;
        }
        if start != count {
            return Err(format!(
                "page block holds {} words after its last chunk's",
                count - start
            ));
        }
        if events != records as u64 {
            return Err(format!(
                "page block's chunks count {events} events, the block holds {records} records"
            ));
        }
        Ok(())
    }

    /// Events of the next chunk, if any is left.
    pub(crate) fn next_events(&self) -> Option<u64> {
        self.chunks.get(self.next).map(Chunk::events)
    }

    /// Appends the next chunk's words and counts to `out`; returns its events.
    pub(crate) fn take(&mut self, out: &mut PageBatch) -> u64 {
        let c = self.chunks[self.next];
        let start = match self.next {
            0 => 0,
            n => self.chunks[n - 1].words_end as usize,
        };
        let words = &self.raw[self.words_at + 8 * start..self.words_at + 8 * c.words_end as usize];
        out.words.extend(words.chunks_exact(8).map(field));
        out.refs[0] += c.refs[0] as u64;
        out.refs[1] += c.refs[1] as u64;
        out.other_events += c.other_events as u64;
        self.next += 1;
        c.events()
    }
}

/// Checks one chunk's words (see [`PageIndex::load`]); `Err` gives the word's index
/// in `bytes` (little-endian `u64`s) and what is wrong with it.
fn check_words(bytes: &[u8], max_span: u64) -> Result<(), (usize, String)> {
    let count = bytes.len() / 8;
    let word = |i: usize| field(&bytes[8 * i..8 * i + 8]);
    const FLAGS: u64 = (1 << CHANGE_SHIFT) - 1;
    const KNOWN: u64 = FLAGS | CHANGE_MASK << CHANGE_SHIFT | !0 << PAGE_SHIFT;
    let mut i = 0;
    while i < count {
        let w = word(i);
        if w & !KNOWN != 0 {
            return Err((i, format!("{w:#x} sets bits no page word has")));
        }
        let change = (w >> CHANGE_SHIFT) & CHANGE_MASK;
        if change > 64 {
            return Err((
                i,
                format!("{w:#x} has a change distance of {change} (at most 64)"),
            ));
        }
        if w & STRADDLE == 0 {
            i += 1;
            continue;
        }
        if w & REPLAY != 0 {
            return Err((i, format!("{w:#x} is a replay spanning pages")));
        }
        let first = w >> PAGE_SHIFT;
        let Some(last) = (i + 1 < count).then(|| word(i + 1)) else {
            return Err((
                i,
                format!("{w:#x} spans pages, and its chunk ends before its last page"),
            ));
        };
        if last <= first || last >> (64 - PAGE_SHIFT) != 0 {
            return Err((
                i + 1,
                format!("last page {last:#x} of a reference from page {first:#x} is not after it, or not a page of a 64-bit address"),
            ));
        }
        if last - first > max_span {
            return Err((
                i + 1,
                format!(
                    "a reference from page {first:#x} to {last:#x}: {}",
                    crate::REF_TOO_LARGE
                ),
            ));
        }
        i += 2;
    }
    Ok(())
}
