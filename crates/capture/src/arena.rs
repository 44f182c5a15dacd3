//! The plugin's buffers, kept in a memory file pagelab owns, so that records
//! a dying process never wrote can be read after it is gone.
//!
//! The file is an array of 1 MiB slots (`docs/capture-format.md`): slot 0 is
//! the arena's header, every other slot is free (state 0), a thread's buffer
//! (1) or a process's block definitions (2). A slot's word 1 is
//! `pid | tid << 32`, words 2 and 3 are scratch, and its unwritten records
//! start at word 4 and end at the first zero word found at a record boundary
//! (the plugin zeroes what it writes).

use crate::format::{self, X_THREAD};
use crate::tools::CaptureError;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Words per slot.
pub const SLOT_WORDS: usize = 128 * 1024;
/// Bytes per slot.
pub const SLOT_BYTES: u64 = SLOT_WORDS as u64 * 8;
/// Slots in the arena pagelab makes (its pages exist only once touched).
pub const SLOTS: u64 = 256;

const STATE_THREAD: u64 = 1;
const STATE_DEFS: u64 = 2;
const FIRST_RECORD: usize = 4;

/// A new, empty arena: an anonymous memory file of [`SLOTS`] slots.
pub fn create() -> Result<File, CaptureError> {
    let fd = rustix::fs::memfd_create(c"pagelab-capture", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| CaptureError::io("creating the capture's memory file", e.into()))?;
    let file = File::from(fd);
    file.set_len(SLOTS * SLOT_BYTES)
        .map_err(|e| CaptureError::io("sizing the capture's memory file", e))?;
    Ok(file)
}

/// The records left in the arena's slots, as a stream the decoder reads after
/// the pipe's: every slot's records headed by a THREAD record, block
/// definitions first.
pub fn leftovers(arena: &File) -> std::io::Result<Vec<u8>> {
    let slots = arena.metadata()?.len() / SLOT_BYTES;
    let mut defs = Vec::new();
    let mut threads = Vec::new();
    let mut head = [0u8; 16];
    let mut slot = vec![0u8; SLOT_BYTES as usize];
    for i in 1..slots {
        arena.read_exact_at(&mut head, i * SLOT_BYTES)?;
        let state = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let out = match state {
            STATE_THREAD => &mut threads,
            STATE_DEFS => &mut defs,
            _ => continue,
        };
        arena.read_exact_at(&mut slot, i * SLOT_BYTES)?;
        let words: Vec<u64> = slot
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let end = records_end(&words);
        if end > FIRST_RECORD {
            let ids = words[1];
            let [a, _] = format::thread(0, 0);
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&ids.to_le_bytes());
            out.extend_from_slice(&slot[FIRST_RECORD * 8..end * 8]);
        }
    }
    debug_assert_eq!(format::ext(X_THREAD, 1, 0), format::thread(0, 0)[0]);
    defs.extend_from_slice(&threads);
    Ok(defs)
}

/// Index of the word after a slot's last record.
fn records_end(words: &[u64]) -> usize {
    let mut i = FIRST_RECORD;
    while i < words.len() && words[i] != 0 {
        let w = words[i];
        let len = if w >> 62 == 2 {
            1 + ((w >> 40) & 0xffff) as usize
        } else {
            1
        };
        if i + len > words.len() {
            break;
        }
        i += len;
    }
    i
}
