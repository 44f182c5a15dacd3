//! Reads the native format, checking every block before handing out its records.

use super::codec::{Cursor, Prev, PADDING};
use super::index::{PageIndex, CHUNK_ENTRY_LEN, MAX_INDEX_COMPRESSED_LEN, MAX_INDEX_RAW_LEN};
use super::{
    block_checksum, BLOCK_HEADER_LEN, FILE_HEADER_LEN, FLAG_PAGE_INDEX, MAX_COMPRESSED_LEN,
    MAX_RAW_LEN, NATIVE_MAGIC, NATIVE_OLDEST_VERSION, NATIVE_VERSION,
};
use crate::{Latch, PageBatch, PageFilter, TraceError, TraceSource};
use crate::{PageSink, RecordSink};
use pagelab_core::{Event, SourceInfo};
use std::io::{ErrorKind, Read};

/// Reads pagelab's native binary format (`docs/trace-format.md`).
///
/// Each block's checksum, zstd frame and length are verified before any of
/// its records is handed out; a damaged or missing end marker, a short block,
/// or a record that does not decode is a [`TraceError::Corrupt`] naming the
/// byte offset in the file (for a bad record, the offset of its block). All
/// events before the damage are delivered first; none after it. Memory use is
/// bounded by one block.
///
/// A file with a page index (`docs/trace-format.md`, "Page blocks") hands
/// [`TraceSource::fill_pages`] a block's words from it, without decoding the
/// records, whenever the caller's filter is the one the index was made with;
/// both frames' checksums are verified either way.
pub struct NativeReader<R: Read> {
    inner: R,
    name: String,
    compression: Option<String>,
    /// Bytes of the file consumed so far.
    offset: u64,
    header_read: bool,
    /// The end marker has been read and checked.
    ended: bool,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    compressed: Vec<u8>,
    raw: Vec<u8>,
    /// The current block's decompressed length, as its header says.
    block_raw_len: u32,
    /// Whether the current block's records are decompressed into `raw` (and `pos`
    /// and `prev` follow them).
    records_loaded: bool,
    /// The page index's filter (depth, fragments), in a file that has one.
    index_filter: Option<(usize, bool)>,
    /// The current block's page block: its frame, decompressed length, chunks and offset
    /// (decompressed into `index`).
    index_compressed: Vec<u8>,
    index_raw_len: u32,
    index_chunks: u32,
    index_offset: u64,
    /// That page block decoded, once `index_loaded`.
    index: PageIndex,
    index_loaded: bool,
    /// Whether the words `fill_pages` handed out last came from a page index (so the
    /// caller's filter must start afresh before it filters records again).
    index_last: bool,
    /// Next record in `raw`.
    pos: usize,
    /// Records of the current block not yet decoded.
    left: u32,
    /// Records in the current block, and where its header starts.
    block_records: u32,
    block_offset: u64,
    prev: Prev,
    /// Records of the blocks read so far.
    total: u64,
    latch: Latch,
}

impl<R: Read> NativeReader<R> {
    /// A reader of `inner`, named `name` (a path or `-`) in errors and [`SourceInfo`].
    pub fn new(inner: R, name: impl Into<String>) -> Self {
        NativeReader {
            inner,
            name: name.into(),
            compression: None,
            offset: 0,
            header_read: false,
            ended: false,
            decompressor: None,
            compressed: Vec::new(),
            raw: Vec::new(),
            block_raw_len: 0,
            records_loaded: false,
            index_filter: None,
            index_compressed: Vec::new(),
            index_raw_len: 0,
            index_chunks: 0,
            index_offset: 0,
            index: PageIndex::default(),
            index_loaded: false,
            index_last: false,
            pos: 0,
            left: 0,
            block_records: 0,
            block_offset: 0,
            prev: Prev::default(),
            total: 0,
            latch: Latch::Open,
        }
    }

    /// Records that `inner` is a decompressor (the file was compressed again), for [`SourceInfo`].
    pub fn with_compression(mut self, compression: Option<String>) -> Self {
        self.compression = compression;
        self
    }

    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            source_name: self.name.clone(),
            offset,
            reason: reason.into(),
        }
    }

    /// Reads until `buf` is full or the input ends; returns the bytes read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceError::io(&self.name, e)),
            }
        }
        self.offset += n as u64;
        Ok(n)
    }

    fn read_header(&mut self) -> Result<(), TraceError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        let n = self.read_full(&mut h)?;
        if n >= 8 && h[..8] != NATIVE_MAGIC || n < 8 && h[..n] != NATIVE_MAGIC[..n] {
            return Err(self.corrupt(0, "not a pagelab native trace (bad magic)"));
        }
        if n < FILE_HEADER_LEN {
            return Err(self.corrupt(n as u64, "truncated file header"));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if !(NATIVE_OLDEST_VERSION..=NATIVE_VERSION).contains(&version) {
            let reason = format!(
                "unsupported version {version}; this reader reads versions \
                 {NATIVE_OLDEST_VERSION} to {NATIVE_VERSION} (a newer pagelab wrote it?)"
            );
            return Err(self.corrupt(8, reason));
        }
        let flags = u16::from_le_bytes([h[10], h[11]]);
        let known = if version >= 5 { FLAG_PAGE_INDEX } else { 0 };
        if flags & !known != 0 {
            return Err(self.corrupt(10, "unknown flags set in the file header"));
        }
        if flags & FLAG_PAGE_INDEX != 0 {
            let (depth, fragments) = (h[12], h[13]);
            if !(1..=crate::MAX_FILTER_DEPTH as u8).contains(&depth) {
                let reason = format!("page index filter depth {depth} (1 to 4)");
                return Err(self.corrupt(12, reason));
            }
            if fragments > 1 {
                let reason = format!("page index fragments flag {fragments} (0 or 1)");
                return Err(self.corrupt(13, reason));
            }
            if h[14..16] != [0; 2] {
                return Err(self.corrupt(14, "reserved header bytes are not zero"));
            }
            self.index_filter = Some((depth as usize, fragments == 1));
        } else if h[12..16] != [0; 4] {
            return Err(self.corrupt(12, "reserved header bytes are not zero"));
        }
        self.header_read = true;
        Ok(())
    }

    /// Reads a block header at the current offset: `None` at end of input.
    fn read_block_header(&mut self) -> Result<(u64, [u8; BLOCK_HEADER_LEN]), TraceError> {
        let at = self.offset;
        let mut h = [0u8; BLOCK_HEADER_LEN];
        match self.read_full(&mut h)? {
            0 => Err(self.corrupt(at, "trace is truncated: the end marker is missing")),
            BLOCK_HEADER_LEN => Ok((at, h)),
            n => Err(self.corrupt(at + n as u64, "trace is truncated inside a block header")),
        }
    }

    /// Reads `clen` bytes of frame into `buf` and checks them against the checksum in
    /// `h`, the header read at `at`.
    fn read_frame(
        &mut self,
        at: u64,
        h: &[u8; BLOCK_HEADER_LEN],
        buf: &mut Vec<u8>,
        clen: u32,
    ) -> Result<(), TraceError> {
        buf.resize(clen as usize, 0);
        if self.read_full(buf)? < clen as usize {
            let reason = format!("trace is truncated inside a block of {clen} compressed bytes");
            return Err(self.corrupt(self.offset, reason));
        }
        let tail = u64::from_le_bytes(h[12..].try_into().unwrap());
        if block_checksum(h[..12].try_into().unwrap(), buf) != tail {
            return Err(self.corrupt(at, "block checksum mismatch"));
        }
        Ok(())
    }

    /// Reads and checks the next block (and its page block); `Ok(false)` after a valid
    /// end marker. Nothing is decompressed yet.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        let (at, h) = self.read_block_header()?;
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let (clen, rlen, count) = (word(0), word(4), word(8));
        if clen == 0 {
            let tail = u64::from_le_bytes(h[12..].try_into().unwrap());
            return self.end_marker(at, rlen, count, tail).map(|()| false);
        }
        if rlen == 0
            || rlen > MAX_RAW_LEN
            || clen > MAX_COMPRESSED_LEN
            || count == 0
            || count > rlen
        {
            let reason = format!(
                "implausible block header (compressed {clen} bytes, raw {rlen} bytes, {count} records)"
            );
            return Err(self.corrupt(at, reason));
        }
        let mut compressed = std::mem::take(&mut self.compressed);
        let got = self.read_frame(at, &h, &mut compressed, clen);
        self.compressed = compressed;
        got?;
        if self.index_filter.is_some() {
            self.next_page_block(count)?;
        }
        self.block_raw_len = rlen;
        self.records_loaded = false;
        self.pos = 0;
        self.left = count;
        self.block_records = count;
        self.block_offset = at;
        self.prev = Prev::default();
        Ok(true)
    }

    /// Reads and checks the page block after a block of `records` records.
    fn next_page_block(&mut self, records: u32) -> Result<(), TraceError> {
        let (at, h) = self.read_block_header()?;
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let (clen, rlen, chunks) = (word(0), word(4), word(8));
        if clen == 0
            || rlen > MAX_INDEX_RAW_LEN
            || clen > MAX_INDEX_COMPRESSED_LEN
            || chunks == 0
            || chunks > records
            || (chunks as u64) * CHUNK_ENTRY_LEN as u64 > rlen as u64
        {
            let reason = format!(
                "implausible page block header (compressed {clen} bytes, raw {rlen} bytes, \
                 {chunks} chunks, after a block of {records} records; the file header \
                 says every block has a page block)"
            );
            return Err(self.corrupt(at, reason));
        }
        let mut compressed = std::mem::take(&mut self.index_compressed);
        let got = self.read_frame(at, &h, &mut compressed, clen);
        self.index_compressed = compressed;
        got?;
        self.index_raw_len = rlen;
        self.index_chunks = chunks;
        self.index_offset = at;
        self.index_loaded = false;
        Ok(())
    }

    /// Decompresses the current block's records, and skips those already handed out
    /// from its page index.
    fn load_records(&mut self) -> Result<(), TraceError> {
        let at = self.block_offset + BLOCK_HEADER_LEN as u64;
        let (rlen, mut raw) = (self.block_raw_len, std::mem::take(&mut self.raw));
        raw.clear();
        raw.reserve(rlen as usize + PADDING);
        let d = decompressor(&mut self.decompressor, &self.name)?;
        let r = d.decompress_to_buffer(&self.compressed[..], &mut raw);
        raw.extend_from_slice(&[0; PADDING]);
        self.raw = raw;
        match r {
            Err(e) => return Err(self.corrupt(at, format!("zstd frame does not decode: {e}"))),
            Ok(n) if n != rlen as usize => {
                let reason = format!("block decompresses to {n} bytes, header says {rlen}");
                return Err(self.corrupt(at, reason));
            }
            Ok(_) => {}
        }
        self.records_loaded = true;
        let skip = (self.block_records - self.left) as usize;
        self.left = self.block_records;
        let mut skipped = Skip(0);
        while skipped.0 < skip {
            self.decode(&mut skipped, skip)?;
        }
        Ok(())
    }

    /// Decompresses and checks the current block's page block.
    fn load_index(&mut self) -> Result<(), TraceError> {
        let rlen = self.index_raw_len;
        let raw = self.index.raw_mut();
        raw.clear();
        raw.reserve(rlen as usize);
        let d = decompressor(&mut self.decompressor, &self.name)?;
        let r = d.decompress_to_buffer(&self.index_compressed[..], raw);
        let checked = match r {
            Err(e) => Err(format!("zstd frame does not decode: {e}")),
            Ok(n) if n != rlen as usize => Err(format!(
                "page block decompresses to {n} bytes, header says {rlen}"
            )),
            Ok(_) => self.index.load(self.index_chunks, self.block_records),
        };
        checked.map_err(|why| self.corrupt(self.index_offset, why))?;
        self.index_loaded = true;
        Ok(())
    }

    fn end_marker(&mut self, at: u64, rlen: u32, count: u32, total: u64) -> Result<(), TraceError> {
        if rlen != 0 || count != 0 {
            return Err(self.corrupt(at, "damaged end marker (non-zero length or count)"));
        }
        if total != self.total {
            let reason = format!(
                "end marker counts {total} records, the blocks hold {}",
                self.total
            );
            return Err(self.corrupt(at, reason));
        }
        let mut probe = [0u8; 1];
        if self.read_full(&mut probe)? != 0 {
            return Err(self.corrupt(self.offset - 1, "data after the end marker"));
        }
        Ok(())
    }

    /// Moves on to the next block when the current one is done; `Ok(false)` at the end
    /// of the trace.
    fn block_left(&mut self) -> Result<bool, TraceError> {
        if self.left > 0 {
            return Ok(true);
        }
        if self.records_loaded && self.pos != self.raw_end() {
            let reason = format!(
                "block holds {} bytes after its {} records",
                self.raw_end() - self.pos,
                self.block_records
            );
            return Err(self.corrupt(self.block_offset, reason));
        }
        if self.ended || !self.next_block()? {
            self.ended = true;
            return Ok(false);
        }
        self.total += self.block_records as u64;
        Ok(true)
    }

    /// Decodes records into `out` until it has taken `max` more events or the trace ends.
    fn fill_inner<S: RecordSink>(&mut self, out: &mut S, max: usize) -> Result<(), TraceError> {
        if !self.header_read {
            self.read_header()?;
        }
        let goal = out.taken().saturating_add(max);
        while out.taken() < goal && self.block_left()? {
            if !self.records_loaded {
                self.load_records()?;
            }
            self.decode(out, goal)?;
        }
        Ok(())
    }

    /// [`TraceSource::fill_pages`]: from the page index where `filter` is the one it was
    /// made with, a chunk at a time (at least one, so up to [`super::index::CHUNK_EVENTS`]
    /// events past a smaller `max`); else, and in a block `fill` began, through `filter`.
    fn fill_pages_inner(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<(), TraceError> {
        if !self.header_read {
            self.read_header()?;
        }
        if self.index_filter != Some((filter.depth(), filter.fragments())) {
            return self.fill_inner(&mut PageSink { filter, out }, max);
        }
        let start = out.events();
        let goal = start.saturating_add(max as u64);
        while out.events() < goal && self.block_left()? {
            if self.records_loaded {
                // A block `fill` began goes on record by record, through a filter that
                // knows nothing of the index's words before.
                if self.index_last {
                    filter.reset();
                    self.index_last = false;
                }
                let goal = usize::try_from(goal).unwrap_or(usize::MAX);
                self.decode(&mut PageSink { filter, out }, goal)?;
                continue;
            }
            if !self.index_loaded {
                self.load_index()?;
            }
            let Some(events) = self.index.next_events() else {
                let reason = "page block's chunks end before the block's records";
                return Err(self.corrupt(self.index_offset, reason));
            };
            if out.events() + events > goal && out.events() > start {
                break;
            }
            if !self.index_last {
                // The filter's own words so far stand on their own; then it starts afresh.
                filter.flush(out);
                filter.reset();
                self.index_last = true;
            }
            self.index.take(out);
            self.left -= events as u32;
        }
        Ok(())
    }

    /// End of the current block's raw bytes (before the padding).
    fn raw_end(&self) -> usize {
        self.raw.len().saturating_sub(PADDING)
    }

    /// Decodes records of the current block until it is done or `out` reaches `goal`.
    fn decode<S: RecordSink>(&mut self, out: &mut S, goal: usize) -> Result<(), TraceError> {
        let n = (goal - out.taken()).min(self.left as usize);
        out.reserve(n);
        let end = self.raw_end();
        let mut cur = Cursor {
            buf: &self.raw,
            end,
            pos: self.pos,
        };
        let mut prev = self.prev;
        #[cfg(target_arch = "x86_64")]
        use pagelab_core::isa::Isa;
        #[cfg(target_arch = "x86_64")]
        let (done, r) = match pagelab_core::isa::active() {
            // SAFETY: the `avx512` tier is active, so the CPU has its features, and
            // `vbmi2_supported` checked VBMI and VBMI2.
            Isa::Avx512 if pagelab_core::isa::vbmi2_supported() => unsafe {
                cur.decode_into_vbmi2(&mut prev, out, n)
            },
            // SAFETY: the `avx512` tier is active, so the CPU has its features.
            Isa::Avx512 => unsafe { cur.decode_into_avx512(&mut prev, out, n) },
            // SAFETY: the `avx2` tier is active, so the CPU has its features.
            Isa::Avx2 => unsafe { cur.decode_into_avx2(&mut prev, out, n) },
            Isa::Portable => cur.decode_into(&mut prev, out, n),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let (done, r) = cur.decode_into(&mut prev, out, n);
        let failure = r.err().map(|reason| (cur.pos, reason));
        self.pos = cur.pos;
        self.prev = prev;
        self.left -= done as u32;
        match failure {
            None => Ok(()),
            Some((pos, reason)) => {
                let index = self.block_records - self.left;
                let reason = format!(
                    "in the block starting here, record {index} (counting from 0; near byte {pos} of {} decompressed): {reason}",
                    self.raw_end()
                );
                Err(self.corrupt(self.block_offset, reason))
            }
        }
    }
}

/// The zstd decompressor in `slot`, made on first use (errors name the input `name`).
fn decompressor<'a>(
    slot: &'a mut Option<zstd::bulk::Decompressor<'static>>,
    name: &str,
) -> Result<&'a mut zstd::bulk::Decompressor<'static>, TraceError> {
    if slot.is_none() {
        let mut d = zstd::bulk::Decompressor::new().map_err(|e| TraceError::io(name, e))?;
        // The block checksum, verified before this, covers the frame's bytes: zstd's own
        // checksum of the content (XXH64 over every decoded byte) adds nothing.
        d.set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true))
            .map_err(|e| TraceError::io(name, e))?;
        *slot = Some(d);
    }
    Ok(slot.as_mut().expect("made above"))
}

/// A sink that takes in records and keeps nothing: the records of a block that its
/// page index handed out already.
struct Skip(usize);

impl RecordSink for Skip {
    fn taken(&self) -> usize {
        self.0
    }
    fn reserve(&mut self, _n: usize) {}
    fn reference(&mut self, _r: pagelab_core::MemRef) {
        self.0 += 1;
    }
    fn event(&mut self, _e: Event) {
        self.0 += 1;
    }
}

impl<R: Read> TraceSource for NativeReader<R> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        crate::fill_latched(self, out, max, |s| &mut s.latch, Self::fill_inner)
    }

    /// Filters as it decodes: no event is stored for a reference the filter drops.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        crate::fill_latched_counted(
            self,
            out,
            max,
            PageBatch::events,
            |s| &mut s.latch,
            |s, out, max| s.fill_pages_inner(filter, out, max),
        )
    }

    fn parses_to_pages(&self) -> bool {
        true
    }

    fn page_index(&self) -> Option<(usize, bool)> {
        self.index_filter
    }

    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: "native".into(),
            name: self.name.clone(),
            compression: self.compression.clone(),
            ..SourceInfo::default()
        }
    }
}
