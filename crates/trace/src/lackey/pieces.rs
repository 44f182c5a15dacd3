//! A mapped Lackey file read as independent pieces, on as many threads as
//! there are cores.

use super::fast::READ_AHEAD;
use super::reader::LackeyReader;
use crate::{PageBatch, PageFilter, TraceError, TraceSource};
use memmap2::{Mmap, MmapOptions};
use pagelab_core::Checksum;
use std::fs::File;
use std::sync::Arc;
use std::sync::Mutex;

/// Bytes per piece: a few milliseconds of parsing, and a few thousand words; the
/// checksum's segment, so that each piece hashes one.
const PIECE: usize = Checksum::SEGMENT;

/// A piece's own map starts at a multiple of this (of every page size in use).
const MAP_ALIGN: usize = 1 << 16;

/// A plain Lackey file in memory, read as pieces of about 2 MiB that can be
/// parsed in any order, on any thread (from [`TraceSource::pieces`]).
///
/// Piece `i` holds the lines that start in bytes `[i * 2 MiB, (i + 1) * 2 MiB)`
/// of the file (none, if a longer line covers that range). Read each piece
/// through a fresh [`PageFilter`] (see [`Pieces::read`]) and hand the
/// batches on in piece order: by the filter's contract that is as good as
/// one filter over the whole file.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use pagelab_trace::{PageBatch, PageFilter};
/// let path = std::env::temp_dir().join(format!("pieces-doc-{}.lackey", std::process::id()));
/// std::fs::write(&path, "I  04000b20,3\n L 1ffefffc58,8\n")?;
/// let src = pagelab_trace::open(path.to_str().unwrap(), None)?;
/// let pieces = src.pieces().expect("a plain file on disk is mapped");
/// let (mut refs, mut lines) = ([0, 0], 0);
/// for i in 0..pieces.len() {
///     let mut batch = PageBatch::default();
///     lines += pieces.read(i, &mut PageFilter::new(4, false), &mut batch).map_err(|e| e.at_line(lines))?;
///     refs = [refs[0] + batch.refs[0], refs[1] + batch.refs[1]];
/// }
/// assert_eq!((refs, lines), ([1, 1], 2));
/// # std::fs::remove_file(&path)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Pieces {
    /// The whole file: where the pieces start is found here (a page or two each).
    map: Arc<Mmap>,
    /// The file, which each piece maps on its own (see [`Pieces::read`]).
    file: Option<Arc<File>>,
    name: String,
    piece: usize,
    /// The checksum's segments, one per piece, as the pieces are read.
    sums: Option<Arc<SegmentSums>>,
    /// The readers' chunk, when a test sets it.
    #[cfg(test)]
    chunk: Option<usize>,
}

/// A parse error in a piece, with its line counted from the piece's start;
/// [`PieceError::at_line`] makes it the error of the whole file.
#[derive(Debug)]
pub struct PieceError(TraceError);

impl PieceError {
    /// The error, its line number counted from the start of the file, given
    /// the number of lines in the pieces before this one.
    pub fn at_line(self, lines_before: u64) -> TraceError {
        match self.0 {
            TraceError::Parse {
                source_name,
                line,
                text,
                reason,
            } => TraceError::Parse {
                source_name,
                line: line + lines_before,
                text,
                reason,
            },
            other => other,
        }
    }
}

impl Pieces {
    pub(super) fn new(
        map: Arc<Mmap>,
        file: Option<Arc<File>>,
        name: String,
        sums: Option<Arc<SegmentSums>>,
    ) -> Pieces {
        Pieces {
            map,
            file,
            name,
            piece: PIECE,
            sums,
            #[cfg(test)]
            chunk: None,
        }
    }

    /// Pieces of `bytes` bytes (at least 1) instead of 2 MiB: tests use it
    /// to cross many piece boundaries. Their checksum ([`Pieces::checksum`]) is
    /// then [`Checksum::with_segment`]`(bytes)`'s, not the file's: the reader
    /// they came from hashes the file again when asked for its checksum.
    pub fn with_piece_size(mut self, bytes: usize) -> Pieces {
        self.piece = bytes.max(1);
        self.sums = Some(Arc::new(SegmentSums::new(self.piece, self.map.len())));
        self
    }

    /// The checksum of the file's bytes and their number, once every piece was read
    /// (each hashes its own segment as it parses it); `None` before.
    pub fn checksum(&self) -> Option<(u64, String)> {
        self.sums.as_ref()?.checksum()
    }

    /// The file's bytes from `from` to `to`, read as [`Pieces::line_start`] reads.
    fn bytes(&self, from: usize, to: usize) -> Vec<u8> {
        #[cfg(unix)]
        if let Some(file) = &self.file {
            use std::os::unix::fs::FileExt;
            let mut buf = vec![0; to - from];
            if file.read_exact_at(&mut buf, from as u64).is_ok() {
                return buf;
            }
        }
        self.map[from..to].to_vec()
    }

    /// Readers of `chunk` bytes at a time.
    #[cfg(test)]
    pub(super) fn with_reader_chunk(mut self, chunk: usize) -> Pieces {
        self.chunk = Some(chunk);
        self
    }

    /// The number of pieces (some may hold no line).
    pub fn len(&self) -> usize {
        self.map.len().div_ceil(self.piece)
    }

    /// Whether there are no pieces (never, for a mapped file: it is not empty).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first line start at or after byte `at` (the file's length if none).
    ///
    /// Read with `pread` rather than through the whole file's map: touching
    /// that map can map a whole 2 MiB folio of the page cache at a time.
    fn line_start(&self, at: usize) -> usize {
        let len = self.map.len();
        if at == 0 {
            return 0;
        }
        // A line starts at `at` if the byte before it ends one.
        let mut pos = at.min(len) - 1;
        #[cfg(unix)]
        if let Some(file) = &self.file {
            use std::os::unix::fs::FileExt;
            let mut buf = [0u8; 4096];
            while pos < len {
                let want = (len - pos).min(buf.len());
                match file.read_at(&mut buf[..want], pos as u64) {
                    Ok(n) if n > 0 => match memchr::memchr(b'\n', &buf[..n]) {
                        Some(i) => return pos + i + 1,
                        None => pos += n,
                    },
                    // Read the rest through the map instead.
                    _ => break,
                }
            }
        }
        if pos >= len {
            return len;
        }
        memchr::memchr(b'\n', &self.map[pos..]).map_or(len, |i| pos + i + 1)
    }

    /// A map of the bytes from `start` to `end` and `READ_AHEAD` more, and
    /// the file offset where it starts. Each piece maps and unmaps its own
    /// bytes, on its own thread: the whole file's map, which would otherwise
    /// be unmapped at the end on one thread, is barely touched.
    fn piece_map(&self, start: usize, end: usize) -> (Arc<Mmap>, usize) {
        let from = start / MAP_ALIGN * MAP_ALIGN;
        let len = (end + READ_AHEAD).min(self.map.len()) - from;
        let own = self.file.as_ref().filter(|_| len > 0).and_then(|file| {
            // SAFETY: as for the whole file's map (`LackeyReader::mapped`): it
            // is only read, bounds checked, from a file that must not change.
            unsafe { MmapOptions::new().offset(from as u64).len(len).map(&**file) }.ok()
        });
        match own {
            Some(map) => (Arc::new(map), from),
            None => (self.map.clone(), 0),
        }
    }

    /// Reads piece `i` through `filter`, which should be fresh, into `out`,
    /// and flushes the filter; returns the number of lines in the piece.
    pub fn read(
        &self,
        i: usize,
        filter: &mut PageFilter,
        out: &mut PageBatch,
    ) -> Result<u64, PieceError> {
        let start = self.line_start(i * self.piece);
        let end = self.line_start((i + 1).saturating_mul(self.piece));
        let (map, from) = self.piece_map(start, end);
        let mut reader = LackeyReader::piece(map, start - from, end - from, self.name.clone());
        // Piece `i` hashes checksum segment `i`: the bytes from its start to its
        // first line (read here), then its own up to the segment's end, which its
        // reader hashes as it leaves them. (Its lines end at or after that.)
        if self.sums.is_some() {
            let segment = i * self.piece..((i + 1) * self.piece).min(self.map.len());
            let mut sum = Checksum::with_segment(self.piece);
            let before = segment.start..start.min(segment.end);
            if !before.is_empty() {
                sum.update(&self.bytes(before.start, before.end));
            }
            reader = reader.hashing(sum, start - from, segment.end.max(start) - from);
        }
        #[cfg(test)]
        if let Some(chunk) = self.chunk {
            reader = reader.with_chunk(chunk);
        }
        while reader
            .fill_pages(filter, out, usize::MAX)
            .map_err(PieceError)?
        {}
        filter.flush(out);
        let lines = reader.lines();
        if let Some(sums) = &self.sums {
            let digest = reader.hashed_sum().and_then(Checksum::segment_digest);
            sums.set(i, digest);
        }
        Ok(lines)
    }
}

/// The digests of a file's checksum segments, filled in by its pieces in any order, on
/// any thread.
#[derive(Debug)]
pub(super) struct SegmentSums {
    len: usize,
    digests: Mutex<Vec<Option<u64>>>,
}

impl SegmentSums {
    /// No digest yet of a file of `len` bytes in segments of `segment`.
    pub(super) fn new(segment: usize, len: usize) -> SegmentSums {
        SegmentSums {
            len,
            digests: Mutex::new(vec![None; len.div_ceil(segment)]),
        }
    }

    fn set(&self, i: usize, digest: Option<u64>) {
        // A piece that panicked holding the lock wrote nothing half-way: go on.
        let mut d = self.digests.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = d.get_mut(i) {
            *slot = digest;
        }
    }

    /// The file's checksum and length once every segment has its digest.
    pub(super) fn checksum(&self) -> Option<(u64, String)> {
        let d = self.digests.lock().unwrap_or_else(|e| e.into_inner());
        let all: Option<Vec<u64>> = d.iter().copied().collect();
        let len = self.len as u64;
        Some((len, Checksum::from_segments(all?, len)))
    }
}
