//! Writes the native format: header, zstd blocks, end marker.

use super::codec::{encode, max_len, Prev, MAX_EXEC_PATH};
use super::index::{IndexBuilder, DEFAULT_INDEX_FILTER};
use super::{block_checksum, BLOCK_RAW_TARGET, FLAG_PAGE_INDEX, NATIVE_MAGIC, NATIVE_VERSION};
use pagelab_core::Event;
use std::io::{self, Write};

/// The zstd level used unless [`NativeWriter::with_level`] says otherwise.
const DEFAULT_LEVEL: i32 = 3;

/// Writes events in pagelab's native binary format (`docs/trace-format.md`).
///
/// Records are gathered into blocks of at most 1 MiB, each compressed as an
/// independent zstd frame; memory use is constant. [`NativeWriter::finish`]
/// writes the end marker: a writer dropped without `finish` leaves a file that
/// readers report as truncated.
///
/// Unless [`NativeWriter::without_page_index`] says otherwise, each block is
/// followed by its page index: the words of a page filter over its references
/// (four pages a side, no fragments), which a page-size study with that filter
/// reads instead of decoding the records.
pub struct NativeWriter<W: Write> {
    inner: W,
    /// Whether the file header is written yet (it records the page index's filter).
    header_written: bool,
    index: Option<IndexBuilder>,
    index_raw: Vec<u8>,
    raw: Vec<u8>,
    compressed: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
    prev: Prev,
    /// Raw bytes per block, at most.
    block_target: usize,
    block_records: u32,
    total: u64,
}

impl<W: Write> NativeWriter<W> {
    /// A writer into `inner` at the default zstd level; the file header goes out with the
    /// first event (or at [`NativeWriter::finish`]).
    pub fn new(inner: W) -> io::Result<Self> {
        Self::with_level(inner, DEFAULT_LEVEL)
    }

    /// A writer into `inner` compressing at zstd `level` (1 fastest .. 19 smallest).
    pub fn with_level(inner: W, level: i32) -> io::Result<Self> {
        let mut compressor = zstd::bulk::Compressor::new(level)?;
        compressor.include_checksum(true)?;
        compressor.include_contentsize(true)?;
        let (depth, fragments) = DEFAULT_INDEX_FILTER;
        Ok(NativeWriter {
            inner,
            header_written: false,
            index: Some(IndexBuilder::new(depth, fragments)),
            index_raw: Vec::new(),
            raw: Vec::with_capacity(BLOCK_RAW_TARGET),
            compressed: Vec::with_capacity(zstd::zstd_safe::compress_bound(BLOCK_RAW_TARGET)),
            compressor,
            prev: Prev::default(),
            block_target: BLOCK_RAW_TARGET,
            block_records: 0,
            total: 0,
        })
    }

    /// Writes no page index (a smaller file, which every reader decodes record by record).
    /// Like [`NativeWriter::with_page_index`], before the first event: the file header,
    /// written with it, records the choice.
    pub fn without_page_index(mut self) -> Self {
        self.index = None;
        self
    }

    /// Makes the page index with a filter of `depth` pages a side (1..=4) and
    /// `fragments` (see [`crate::PageFilter::new`]), for a study whose TLB's filter is
    /// that one. Before the first event (see [`NativeWriter::without_page_index`]).
    pub fn with_page_index(mut self, depth: usize, fragments: bool) -> Self {
        self.index = Some(IndexBuilder::new(depth, fragments));
        self
    }

    fn write_header(&mut self) -> io::Result<()> {
        let mut header = [0u8; super::FILE_HEADER_LEN];
        header[..8].copy_from_slice(&NATIVE_MAGIC);
        header[8..10].copy_from_slice(&NATIVE_VERSION.to_le_bytes());
        if let Some(index) = &self.index {
            let (depth, fragments) = index.params();
            header[10..12].copy_from_slice(&FLAG_PAGE_INDEX.to_le_bytes());
            header[12] = depth as u8;
            header[13] = u8::from(fragments);
        }
        self.inner.write_all(&header)?;
        self.header_written = true;
        Ok(())
    }

    /// Makes blocks of at most `bytes` raw bytes (at least one record each), so
    /// that tests can make many blocks from few events.
    #[cfg(test)]
    pub(crate) fn with_block_target(mut self, bytes: usize) -> Self {
        self.block_target = bytes.min(BLOCK_RAW_TARGET);
        self
    }

    /// Ends the page index's chunks every `events` events (tests only).
    #[cfg(test)]
    pub(crate) fn with_chunk_target(mut self, events: u32) -> Self {
        if let Some(index) = &mut self.index {
            index.set_chunk_target(events);
        }
        self
    }

    /// Appends one event.
    #[inline]
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        if let Event::Exec(Some(img)) = event {
            if img.path.len() > MAX_EXEC_PATH {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "an exec record's path of {} bytes (at most 4096)",
                        img.path.len()
                    ),
                ));
            }
        }
        if !self.header_written {
            self.write_header()?;
        }
        if self.raw.len() + max_len(event) > self.block_target {
            self.flush_block()?;
        }
        encode(&mut self.raw, &mut self.prev, event);
        if let Some(index) = &mut self.index {
            index.event(event);
        }
        self.block_records += 1;
        Ok(())
    }

    /// Events written so far.
    pub fn written(&self) -> u64 {
        self.total + self.block_records as u64
    }

    /// Writes the last block and the end marker, flushes, and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.header_written {
            self.write_header()?;
        }
        self.flush_block()?;
        let mut end = [0u8; super::BLOCK_HEADER_LEN];
        end[12..].copy_from_slice(&self.total.to_le_bytes());
        self.inner.write_all(&end)?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.block_records == 0 {
            return Ok(());
        }
        let count = self.block_records;
        write_frame(
            &mut self.inner,
            &mut self.compressor,
            &mut self.compressed,
            &self.raw,
            count,
        )?;
        if let Some(index) = &mut self.index {
            let chunks = index.finish_block(&mut self.index_raw);
            write_frame(
                &mut self.inner,
                &mut self.compressor,
                &mut self.compressed,
                &self.index_raw,
                chunks,
            )?;
        }
        self.total += count as u64;
        self.block_records = 0;
        self.raw.clear();
        self.prev = Prev::default();
        Ok(())
    }
}

/// Writes `raw` compressed as one block (or page block): its 20-byte header, whose
/// third field is `count`, then the frame.
fn write_frame<W: Write>(
    inner: &mut W,
    compressor: &mut zstd::bulk::Compressor<'static>,
    compressed: &mut Vec<u8>,
    raw: &[u8],
    count: u32,
) -> io::Result<()> {
    compressed.clear();
    compressed.reserve(zstd::zstd_safe::compress_bound(raw.len()));
    compressor.compress_to_buffer(raw, compressed)?;
    let mut header = [0u8; super::BLOCK_HEADER_LEN];
    header[..4].copy_from_slice(&(compressed.len() as u32).to_le_bytes());
    header[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    header[8..12].copy_from_slice(&count.to_le_bytes());
    let check = block_checksum(header[..12].try_into().unwrap(), compressed);
    header[12..].copy_from_slice(&check.to_le_bytes());
    inner.write_all(&header)?;
    inner.write_all(compressed)
}
