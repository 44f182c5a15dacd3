//! Writes the native format: header, zstd blocks, end marker.

use super::codec::{encode, max_len, Prev, MAX_EXEC_PATH};
use super::{block_checksum, BLOCK_RAW_TARGET, NATIVE_MAGIC, NATIVE_VERSION};
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
pub struct NativeWriter<W: Write> {
    inner: W,
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
    /// A writer into `inner` at the default zstd level; writes the file header now.
    pub fn new(inner: W) -> io::Result<Self> {
        Self::with_level(inner, DEFAULT_LEVEL)
    }

    /// A writer into `inner` compressing at zstd `level` (1 fastest .. 19 smallest).
    pub fn with_level(mut inner: W, level: i32) -> io::Result<Self> {
        let mut compressor = zstd::bulk::Compressor::new(level)?;
        compressor.include_checksum(true)?;
        compressor.include_contentsize(true)?;
        let mut header = [0u8; super::FILE_HEADER_LEN];
        header[..8].copy_from_slice(&NATIVE_MAGIC);
        header[8..10].copy_from_slice(&NATIVE_VERSION.to_le_bytes());
        inner.write_all(&header)?;
        Ok(NativeWriter {
            inner,
            raw: Vec::with_capacity(BLOCK_RAW_TARGET),
            compressed: Vec::with_capacity(zstd::zstd_safe::compress_bound(BLOCK_RAW_TARGET)),
            compressor,
            prev: Prev::default(),
            block_target: BLOCK_RAW_TARGET,
            block_records: 0,
            total: 0,
        })
    }

    /// Makes blocks of at most `bytes` raw bytes (at least one record each), so
    /// that tests can make many blocks from few events.
    #[cfg(test)]
    pub(crate) fn with_block_target(mut self, bytes: usize) -> Self {
        self.block_target = bytes.min(BLOCK_RAW_TARGET);
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
        if self.raw.len() + max_len(event) > self.block_target {
            self.flush_block()?;
        }
        encode(&mut self.raw, &mut self.prev, event);
        self.block_records += 1;
        Ok(())
    }

    /// Events written so far.
    pub fn written(&self) -> u64 {
        self.total + self.block_records as u64
    }

    /// Writes the last block and the end marker, flushes, and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
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
        self.compressed.clear();
        self.compressor
            .compress_to_buffer(&self.raw[..], &mut self.compressed)?;
        let mut header = [0u8; super::BLOCK_HEADER_LEN];
        header[..4].copy_from_slice(&(self.compressed.len() as u32).to_le_bytes());
        header[4..8].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        header[8..12].copy_from_slice(&self.block_records.to_le_bytes());
        let check = block_checksum(header[..12].try_into().unwrap(), &self.compressed);
        header[12..].copy_from_slice(&check.to_le_bytes());
        self.inner.write_all(&header)?;
        self.inner.write_all(&self.compressed)?;
        self.total += self.block_records as u64;
        self.block_records = 0;
        self.raw.clear();
        self.prev = Prev::default();
        Ok(())
    }
}
