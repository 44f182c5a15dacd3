//! pagelab's native binary trace format.
//!
//! A 16-byte file header, then blocks, each a 20-byte block header and one
//! zstd frame holding at most 1 MiB of encoded records (and, in a file with a
//! page index, a page block after it), then a 20-byte end marker. The
//! byte-level description is `docs/trace-format.md`; this module holds the
//! constants and the record codec shared by the reader and writer.

mod codec;
mod index;
mod reader;
mod window;
#[cfg(target_arch = "x86_64")]
mod window_pages;
mod writer;

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;

pub use index::{CHUNK_EVENTS as PAGE_INDEX_CHUNK, DEFAULT_INDEX_FILTER};
pub use reader::NativeReader;
pub use writer::NativeWriter;

/// The first eight bytes of every native trace.
pub const NATIVE_MAGIC: [u8; 8] = *b"PAGELABT";

/// The format version this crate writes and reads.
pub const NATIVE_VERSION: u16 = 5;
/// The oldest format version this crate reads (version 2 added the Exec and
/// MapRequest records, version 3 the exec'd program's record, version 4 the
/// fork with clone flags, version 5 the page index; an older file is a newer
/// one without them, its forks plain forks).
pub const NATIVE_OLDEST_VERSION: u16 = 1;

/// The file header's flag for a page index: a page block after every block
/// (version 5 on).
pub(crate) const FLAG_PAGE_INDEX: u16 = 1;

/// Bytes in the file header: magic, version, flags, reserved.
pub(crate) const FILE_HEADER_LEN: usize = 16;

/// Bytes in a block header (and in the end marker).
pub(crate) const BLOCK_HEADER_LEN: usize = 20;

/// Raw (decompressed) bytes the writer puts in a block, at most.
pub(crate) const BLOCK_RAW_TARGET: usize = 1 << 20;

/// Largest raw block a reader accepts (bounds its memory).
pub(crate) const MAX_RAW_LEN: u32 = 1 << 24;

/// Largest compressed block a reader accepts.
pub(crate) const MAX_COMPRESSED_LEN: u32 = (1 << 24) + (1 << 20);

/// The 64-bit block checksum of `header` (the block header's first 12 bytes)
/// followed by `data` (the zstd frame).
///
/// Defined in `docs/trace-format.md`: the bytes are taken as little-endian
/// 64-bit words (the last one zero padded), and each word `w` updates
/// `h = rotl((h ^ w) * K, 29)`. Every step is a bijection of `h`, so a change
/// confined to one word is always detected.
pub(crate) fn block_checksum(header: &[u8; 12], data: &[u8]) -> u64 {
    const K: u64 = 0x9fb2_1c65_1e98_df25;
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ (12 + data.len() as u64);
    let mut step = |w: u64| h = (h ^ w).wrapping_mul(K).rotate_left(29);
    step(u64::from_le_bytes(header[..8].try_into().unwrap()));
    let mut first = [0u8; 8];
    first[..4].copy_from_slice(&header[8..]);
    let n = data.len().min(4);
    first[4..4 + n].copy_from_slice(&data[..n]);
    step(u64::from_le_bytes(first));
    let rest = &data[n..];
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        step(u64::from_le_bytes(w.try_into().unwrap()));
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        step(u64::from_le_bytes(last));
    }
    h ^ (h >> 32)
}
