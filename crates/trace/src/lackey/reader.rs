//! The Lackey parser: a fast path for Valgrind's own line shapes
//! ([`super::fast`]) over 1 MiB chunks, and careful byte parsing for the rest.
//!
//! A chunk is either read into the reader's own buffer or, for a mapped
//! file, a window on the map; everything after [`LackeyReader::refill`] sees
//! the same bytes through [`LackeyReader::data`] either way.

use super::fast::{EventSink, PageSink, Sink, READ_AHEAD};
use super::line::{parse_line, with_syntax};
use super::pieces::SegmentSums;
use super::VALID_LINE;
use crate::{Latch, PageBatch, PageFilter, Pieces, TraceError, TraceSource};
use memmap2::Mmap;
use pagelab_core::{Checksum, Event, SourceInfo};
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::sync::Arc;

/// Bytes read from the input at a time; also the longest line accepted
/// (except Valgrind's own `==` lines, which may be of any length).
const CHUNK: usize = 1 << 20;

/// Longest piece of an offending line quoted in an error.
const QUOTE_MAX: usize = 200;

/// Reads Valgrind Lackey text (`--trace-mem=yes` output) as [`Event::Ref`]s.
///
/// Accepted lines: `I  <hex>,<dec>` (instruction fetch), ` L`, ` S`, ` M`
/// lines (load, store, modify), Valgrind's own lines starting with `==`
/// (skipped) and empty lines (skipped). Any number of spaces may precede the
/// letter, at least one must follow it, and spaces or a carriage return may end
/// the line; the final newline may be missing. Anything else, and addresses
/// beyond 64 bits or sizes beyond 32 bits, are a [`TraceError::Parse`] naming
/// the 1-based line.
///
/// The reader takes 1 MiB at a time from `R` and needs no buffering around it;
/// [`LackeyReader::mapped`] reads a file in place, without copying it.
pub struct LackeyReader<R: Read> {
    inner: R,
    /// The whole input, for a mapped file; `inner` is then not read.
    map: Option<Arc<Mmap>>,
    /// The mapped file, for [`Pieces`] to map piece by piece.
    file: Option<Arc<File>>,
    /// Mapped input: `data()` is `map[base..]` while `windowed`; after,
    /// `map[base..limit]` is what `read_more` has still to copy into `buf`.
    base: usize,
    /// Mapped input: where this reader's input ends in the map (the map's
    /// length, or the end of a piece, which is a line start).
    limit: usize,
    /// `data()` is a window on `map`: while the window and `READ_AHEAD`
    /// bytes after it lie in the map.
    windowed: bool,
    name: String,
    compression: Option<String>,
    /// `chunk` bytes of input and `READ_AHEAD` more that the fast path may read
    /// (empty for a mapped file until its last window).
    buf: Vec<u8>,
    /// Bytes read at a time: `CHUNK`, smaller in tests to cross many chunk boundaries.
    chunk: usize,
    /// Next byte of `data()` to parse.
    start: usize,
    /// One past the last newline in `data()[..end]`: `data()[start..complete]` holds whole lines.
    complete: usize,
    /// End of the valid data in `data()`.
    end: usize,
    eof: bool,
    /// Lines consumed so far.
    line: u64,
    latch: Latch,
    /// A whole mapped file's running checksum, of `map[..hashed]`: each window is hashed
    /// as the parser leaves it, while its bytes are still in the caches, where a second
    /// pass for the provenance would read the file from memory again.
    sum: Option<Checksum>,
    hashed: usize,
    /// Where hashing stops in the map: a piece hashes its own checksum segment only
    /// (see [`Pieces::read`]).
    hash_end: usize,
    /// A whole mapped file's segments, as its pieces hash them (see [`LackeyReader::pieces`]).
    segments: Option<Arc<SegmentSums>>,
}

impl<R: Read> LackeyReader<R> {
    /// A reader of `inner`, named `name` (a path or `-`) in errors and [`SourceInfo`].
    pub fn new(inner: R, name: impl Into<String>) -> Self {
        Self::with_input(inner, None, name.into())
    }

    fn with_input(inner: R, map: Option<Arc<Mmap>>, name: String) -> Self {
        LackeyReader {
            inner,
            limit: map.as_ref().map_or(0, |m| m.len()),
            file: None,
            windowed: map.is_some(),
            buf: if map.is_some() {
                Vec::new()
            } else {
                vec![0; CHUNK + READ_AHEAD]
            },
            map,
            base: 0,
            name,
            compression: None,
            chunk: CHUNK,
            start: 0,
            complete: 0,
            end: 0,
            eof: false,
            line: 0,
            latch: Latch::Open,
            sum: None,
            hashed: 0,
            hash_end: usize::MAX,
            segments: None,
        }
    }

    /// Records that `inner` is a decompressor (`zstd`, `xz`), for [`SourceInfo`].
    pub fn with_compression(mut self, compression: Option<String>) -> Self {
        self.compression = compression;
        self
    }

    /// Reads `chunk` bytes at a time instead of 1 MiB (which is also the longest line).
    #[cfg(test)]
    pub(crate) fn with_chunk(mut self, chunk: usize) -> Self {
        self.chunk = chunk;
        if self.map.is_none() {
            self.buf = vec![0; chunk + READ_AHEAD];
        }
        self
    }

    /// Whether the input is a memory map.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// The input as the parser sees it: the reader's buffer, or a window on the map.
    #[inline(always)]
    fn data(&self) -> &[u8] {
        match &self.map {
            Some(map) if self.windowed => &map[self.base..],
            _ => &self.buf,
        }
    }

    /// Number of lines consumed so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    fn fill_inner(&mut self, out: &mut Vec<Event>, max: usize) -> Result<(), TraceError> {
        let goal = out.len().saturating_add(max);
        out.reserve(max.min(1 << 16));
        self.fill_sink(&mut EventSink::new(out, goal))
    }

    /// Parses into `out` until it is full or the input ends.
    fn fill_sink<S: Sink>(&mut self, out: &mut S) -> Result<(), TraceError> {
        while out.room() > 0 {
            if self.start < self.complete {
                self.parse_fast(out)?;
                self.parse_lines(out)?;
            } else if self.eof {
                return Ok(());
            } else {
                self.refill()?;
            }
        }
        Ok(())
    }

    /// Moves the unparsed tail to the front and reads until the buffer is full or the input ends.
    fn refill(&mut self) -> Result<(), TraceError> {
        self.shift();
        if self.end == self.chunk {
            self.long_line()?;
        } else {
            self.read_more()?;
        }
        if self.eof && self.end > 0 && self.data()[self.end - 1] != b'\n' {
            // (A window never reaches the end of the map: `buf` is ours here.)
            debug_assert!(!self.windowed);
            if self.end < self.chunk {
                // A last line without its newline: give it one.
                self.buf[self.end] = b'\n';
                self.end += 1;
            } else {
                // No room: the whole lines go first, the tail on the next refill.
                self.eof = false;
            }
        }
        self.complete = memchr::memrchr(b'\n', &self.data()[..self.end]).map_or(0, |i| i + 1);
        Ok(())
    }

    /// Drops `data()[..start]`: the rest moves to the front of `buf`, or the
    /// window moves forward. A window that could reach within `READ_AHEAD`
    /// of the map's end becomes a copy in `buf`, from where on the file is
    /// read as any other input.
    fn shift(&mut self) {
        let map_len = self.map.as_ref().map_or(0, |m| m.len());
        // A window shows `chunk` bytes, fewer at `limit`, and needs `READ_AHEAD` more in the map.
        let fits = self.limit + READ_AHEAD <= map_len
            || self.base + self.start + self.chunk + READ_AHEAD <= map_len;
        if self.windowed && fits {
            self.hash_to(self.base + self.start);
            self.base += self.start;
            self.end -= self.start;
        } else if self.windowed {
            // What is left is all copied from here on: hash it now.
            self.hash_to(self.limit);
            let tail = self.base + self.start..self.base + self.end;
            self.buf.resize(self.chunk + READ_AHEAD, 0);
            let map = self.map.as_ref().expect("a window is on a map");
            self.buf[..tail.len()].copy_from_slice(&map[tail.clone()]);
            self.windowed = false;
            self.base = tail.end;
            self.end = tail.len();
        } else {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
        }
        self.start = 0;
        self.complete = 0;
    }

    /// Feeds `map[hashed..end]` to the running checksum, if there is one.
    fn hash_to(&mut self, end: usize) {
        let end = end.min(self.hash_end);
        if let (Some(sum), Some(map)) = (&mut self.sum, &self.map) {
            if end > self.hashed {
                sum.update(&map[self.hashed..end]);
                self.hashed = end;
            }
        }
    }

    /// Fills `data()` up to `chunk` bytes, or to the end of the input (`eof`).
    fn read_more(&mut self) -> Result<(), TraceError> {
        if let Some(map) = &self.map {
            if self.windowed {
                // The map holds `READ_AHEAD` bytes past the window (see `shift`);
                // a piece's window may reach its limit, where a line starts.
                self.end = self.chunk.min(self.limit - self.base);
                self.eof = self.base + self.end == self.limit;
            } else if self.end < self.chunk {
                let n = (self.chunk - self.end).min(self.limit - self.base);
                self.buf[self.end..self.end + n].copy_from_slice(&map[self.base..self.base + n]);
                self.base += n;
                self.end += n;
                // As `read` returning 0: only once something was asked for.
                self.eof = self.end < self.chunk;
            }
            return Ok(());
        }
        while self.end < self.chunk {
            match self.inner.read(&mut self.buf[self.end..self.chunk]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.read_error(e)),
            }
        }
        Ok(())
    }

    /// A failed read (a corrupt compressed input, most often), naming the line it cut
    /// short: the decompressor's offsets alone do not say where in the text that is.
    #[cold]
    fn read_error(&self, e: std::io::Error) -> TraceError {
        let held = &self.data()[self.start..self.end];
        let line = self.line + 1 + memchr::memchr_iter(b'\n', held).count() as u64;
        let err = std::io::Error::new(e.kind(), format!("{e}, in Lackey line {line}"));
        TraceError::io(&self.name, err)
    }

    /// The buffer holds one line without a newline: skip it if it is Valgrind's, else refuse it.
    #[cold]
    fn long_line(&mut self) -> Result<(), TraceError> {
        if !self.data().starts_with(b"==") {
            return Err(self.error_at(0, "line longer than 1 MiB; ".to_string() + VALID_LINE));
        }
        loop {
            self.start = self.end;
            self.shift();
            self.read_more()?;
            if let Some(i) = memchr::memchr(b'\n', &self.data()[..self.end]) {
                self.start = i + 1;
                self.line += 1;
                return Ok(());
            }
            if self.eof {
                self.end = 0;
                self.line += 1;
                return Ok(());
            }
        }
    }

    /// Parses whole lines from `buf[start..complete]` 64 bytes at a time while
    /// `out` has room for 64 more; [`Self::parse_lines`] does the rest.
    ///
    /// Each block's newlines are found at once, so where a line starts never
    /// depends on parsing the line before it. Lines of the shape Valgrind
    /// prints take the fast path; any other goes to [`parse_line`], which
    /// decides what it is (and every error) exactly as if it were alone.
    fn parse_fast<S: Sink>(&mut self, out: &mut S) -> Result<(), TraceError> {
        let complete = self.complete;
        let buf = &self.data()[..complete + READ_AHEAD];
        let (start, line, result) = out.parse(buf, complete, self.start, self.line);
        self.start = start;
        self.line = line;
        result.map_err(|reason| self.error_at(start, with_syntax(reason)))
    }

    /// Parses whole lines from `buf[start..complete]` until `out` is full.
    fn parse_lines<S: Sink>(&mut self, out: &mut S) -> Result<(), TraceError> {
        // Every line of `buf` ends with b'\n', so each scan below stops at the latest there.
        let buf = &self.data()[..self.complete];
        let mut pos = self.start;
        let mut line = self.line;
        let result = loop {
            if pos >= buf.len() || out.room() == 0 {
                break Ok(());
            }
            match parse_line(buf, pos) {
                Ok((next, Some(r))) => {
                    out.push_one(r);
                    pos = next;
                }
                Ok((next, None)) => pos = next,
                Err(reason) => break Err(reason),
            }
            line += 1;
        };
        self.start = pos;
        self.line = line;
        result.map_err(|reason| self.error_at(pos, with_syntax(reason)))
    }

    /// A parse error for the line that starts at `buf[at]`, numbered `self.line + 1`.
    #[cold]
    fn error_at(&self, at: usize, reason: String) -> TraceError {
        let rest = &self.data()[at..self.end];
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..len.min(QUOTE_MAX)];
        let mut text = pagelab_core::escape_bytes(line);
        if len > QUOTE_MAX {
            text.push_str("...");
        }
        TraceError::Parse {
            source_name: self.name.clone(),
            line: self.line + 1,
            text,
            reason,
        }
    }
}

impl LackeyReader<File> {
    /// A reader of the regular file `file`, from its start, that parses the
    /// file in place through a memory map instead of copying it into a buffer.
    ///
    /// Events and errors are those of [`LackeyReader::new`] on the same bytes.
    /// An empty file, or one that cannot be mapped, is read as by `new`.
    ///
    /// The file must not change while it is read: a trace is written once,
    /// then read. If another process does change it, the lines read may be
    /// wrong or the reader may panic at a bounds check, and if it truncates
    /// the file, reading a page past the new end raises `SIGBUS`; memmap2
    /// documents these as the risks of a mapped file, and no code here
    /// depends on the bytes for memory safety (every access is bounds checked).
    pub fn mapped(mut file: File, name: impl Into<String>) -> Result<Self, TraceError> {
        let name = name.into();
        let len = file.metadata().map_err(|e| TraceError::io(&name, e))?.len();
        let map = if len == 0 {
            // Nothing to map (and Linux refuses a map of length 0).
            None
        } else {
            // SAFETY: the map is only read, through `&[u8]`s, all bounds
            // checked; a file changed under us is the caller's promise not to
            // (see above), as memmap2's `Mmap::map` requires.
            unsafe { Mmap::map(&file) }.ok()
        };
        match map {
            Some(map) => {
                // Only a hint (read-ahead, early reclaim); reading works without it.
                #[cfg(unix)]
                let _ = map.advise(memmap2::Advice::Sequential);
                let shared = file.try_clone().ok().map(Arc::new);
                let mut r = Self::with_input(file, Some(Arc::new(map)), name);
                r.file = shared;
                r.segments = Some(Arc::new(SegmentSums::new(Checksum::SEGMENT, r.limit)));
                r.sum = Some(Checksum::default());
                Ok(r)
            }
            None => {
                file.seek(SeekFrom::Start(0))
                    .map_err(|e| TraceError::io(&name, e))?;
                Ok(Self::with_input(file, None, name))
            }
        }
    }
}

impl LackeyReader<std::io::Empty> {
    /// A reader of `map[start..end]`, where both are line starts (or the map's end).
    pub(super) fn piece(map: Arc<Mmap>, start: usize, end: usize, name: String) -> Self {
        let mut r = Self::with_input(std::io::empty(), Some(map), name);
        r.base = start;
        r.limit = end;
        r
    }

    /// Hashes the map's bytes from `from` to `to` into `sum` as the parser leaves them
    /// (`sum` holds what came before `from`).
    pub(super) fn hashing(mut self, sum: Checksum, from: usize, to: usize) -> Self {
        self.sum = Some(sum);
        self.hashed = from;
        self.hash_end = to;
        self
    }

    /// The checksum of what [`Self::hashing`] asked for, once the reader is done.
    pub(super) fn hashed_sum(mut self) -> Option<Checksum> {
        let end = self.hash_end.min(self.limit);
        self.hash_to(end);
        (self.hashed >= end).then_some(self.sum?)
    }
}

impl<R: Read> TraceSource for LackeyReader<R> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        crate::fill_latched(self, out, max, |s| &mut s.latch, Self::fill_inner)
    }

    /// Filters as it parses: no event is stored for a reference the filter drops.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        let count = |o: &PageBatch| o.events();
        crate::fill_latched_counted(
            self,
            out,
            max,
            count,
            |s| &mut s.latch,
            |s, out, max| {
                let goal = out.events().saturating_add(max as u64);
                s.fill_sink(&mut PageSink { filter, out, goal })
            },
        )
    }

    fn parses_to_pages(&self) -> bool {
        true
    }

    /// Known once every byte of the map was hashed: by the reader, as it leaves its last
    /// window (within `READ_AHEAD` of the end), or by its pieces (see [`Pieces::read`]),
    /// once every one was read.
    fn read_checksum(&self) -> Option<(u64, String)> {
        let (sum, map) = (self.sum.as_ref()?, self.map.as_ref()?);
        if self.hashed == map.len() {
            return Some((sum.len(), sum.clone().finish()));
        }
        self.segments.as_ref()?.checksum()
    }

    /// A mapped file not yet read splits into pieces.
    fn pieces(&self) -> Option<Pieces> {
        let untouched = self.base == 0 && self.end == 0 && self.line == 0;
        match &self.map {
            Some(map) if untouched && self.windowed => Some(Pieces::new(
                map.clone(),
                self.file.clone(),
                self.name.clone(),
                self.segments.clone(),
            )),
            _ => None,
        }
    }

    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: "lackey".into(),
            name: self.name.clone(),
            compression: self.compression.clone(),
            ..SourceInfo::default()
        }
    }
}
