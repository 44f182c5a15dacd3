//! Reads the native format, checking every block before handing out its records.

use super::codec::{Cursor, Prev, PADDING};
use super::{
    block_checksum, BLOCK_HEADER_LEN, FILE_HEADER_LEN, MAX_COMPRESSED_LEN, MAX_RAW_LEN,
    NATIVE_MAGIC, NATIVE_OLDEST_VERSION, NATIVE_VERSION,
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
        if h[10..12] != [0, 0] {
            return Err(self.corrupt(10, "unknown flags set in the file header"));
        }
        if h[12..16] != [0; 4] {
            return Err(self.corrupt(12, "reserved header bytes are not zero"));
        }
        self.header_read = true;
        Ok(())
    }

    /// Reads and checks the next block; `Ok(false)` after a valid end marker.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        let at = self.offset;
        let mut h = [0u8; BLOCK_HEADER_LEN];
        match self.read_full(&mut h)? {
            0 => return Err(self.corrupt(at, "trace is truncated: the end marker is missing")),
            BLOCK_HEADER_LEN => {}
            n => {
                return Err(self.corrupt(at + n as u64, "trace is truncated inside a block header"))
            }
        }
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let (clen, rlen, count) = (word(0), word(4), word(8));
        let tail = u64::from_le_bytes(h[12..].try_into().unwrap());
        if clen == 0 {
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
        compressed.resize(clen as usize, 0);
        let got = self.read_full(&mut compressed);
        self.compressed = compressed;
        if got? < clen as usize {
            let reason = format!("trace is truncated inside a block of {clen} compressed bytes");
            return Err(self.corrupt(self.offset, reason));
        }
        if block_checksum(h[..12].try_into().unwrap(), &self.compressed) != tail {
            return Err(self.corrupt(at, "block checksum mismatch"));
        }
        self.decompress(at + BLOCK_HEADER_LEN as u64, rlen)?;
        self.pos = 0;
        self.left = count;
        self.block_records = count;
        self.block_offset = at;
        self.prev = Prev::default();
        Ok(true)
    }

    fn decompress(&mut self, at: u64, rlen: u32) -> Result<(), TraceError> {
        if self.decompressor.is_none() {
            let mut d =
                zstd::bulk::Decompressor::new().map_err(|e| TraceError::io(&self.name, e))?;
            // The block checksum, verified before this, covers the frame's bytes: zstd's own
            // checksum of the content (XXH64 over every decoded byte) adds nothing.
            d.set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true))
                .map_err(|e| TraceError::io(&self.name, e))?;
            self.decompressor = Some(d);
        }
        let d = self.decompressor.as_mut().unwrap();
        self.raw.clear();
        self.raw.reserve(rlen as usize + PADDING);
        let r = d.decompress_to_buffer(&self.compressed[..], &mut self.raw);
        match r {
            Err(e) => Err(self.corrupt(at, format!("zstd frame does not decode: {e}"))),
            Ok(n) if n != rlen as usize => Err(self.corrupt(
                at,
                format!("block decompresses to {n} bytes, header says {rlen}"),
            )),
            Ok(_) => {
                self.raw.extend_from_slice(&[0; PADDING]);
                Ok(())
            }
        }
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

    /// Decodes records into `out` until it has taken `max` more events or the trace ends.
    fn fill_inner<S: RecordSink>(&mut self, out: &mut S, max: usize) -> Result<(), TraceError> {
        if !self.header_read {
            self.read_header()?;
        }
        let goal = out.taken().saturating_add(max);
        while out.taken() < goal {
            if self.left == 0 {
                if self.pos != self.raw_end() {
                    let reason = format!(
                        "block holds {} bytes after its {} records",
                        self.raw_end() - self.pos,
                        self.block_records
                    );
                    return Err(self.corrupt(self.block_offset, reason));
                }
                if self.ended || !self.next_block()? {
                    self.ended = true;
                    return Ok(());
                }
                self.total += self.block_records as u64;
            }
            self.decode(out, goal)?;
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
            |s, out, max| s.fill_inner(&mut PageSink { filter, out }, max),
        )
    }

    fn parses_to_pages(&self) -> bool {
        true
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
