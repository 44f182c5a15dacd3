//! The decoder's fast path: the records that make up nearly all of a stream
//! (a block executed, a load or store below 2^48 by an instruction of a block
//! reported as a whole), decoded straight into the output's spare capacity.
//!
//! It handles exactly the cases where [`PluginReader::decode`]'s general path
//! would neither fail nor emit a `Switch`, with the same result, and stops at
//! the first record it does not handle, leaving that one to the general path.

use super::{PluginReader, NO_BLOCK};
use crate::format::{ADDR_MASK, MAX_INSNS};
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use std::io::Read;

/// Instruction events are copied in groups of this many (a block usually
/// holds 2 to 5 instructions): a fixed-size copy needs no call and no
/// per-event branch; the events copied past the end are overwritten or left
/// in the output's spare capacity.
pub(super) const GROUP: usize = 4;

/// Appends `n` events from `src` at `dst`, writing up to `GROUP - 1` more.
///
/// # Safety
/// `src` is readable and `dst` writable for `n` rounded up to a multiple of
/// `GROUP` events; the events of `src` are `Event::Ref`s (plain data), so a
/// bitwise copy is a clone.
#[inline(always)]
unsafe fn copy_groups(src: *const Event, dst: *mut Event, n: usize) {
    let mut k = 0;
    while k < n {
        // SAFETY: `k` is a multiple of `GROUP` below `n`, so `k + GROUP` is
        // at most `n` rounded up to a multiple of `GROUP`: the range the
        // caller guarantees readable at `src` and writable at `dst`.
        unsafe { std::ptr::copy_nonoverlapping(src.add(k), dst.add(k), GROUP) };
        k += GROUP;
    }
}

impl<R: Read> PluginReader<R> {
    /// Decodes common records from the buffered input into `out` until `out`
    /// holds `limit` events, the buffered words end, or a record needs the
    /// general path. Returns whether it decoded any.
    pub(super) fn fast(&mut self, out: &mut Vec<Event>, limit: usize) -> bool {
        if self.emitted != Some(self.cur.id) || out.len() >= limit {
            return false;
        }
        let words = (self.hi - self.lo) / 8;
        // One record adds at most MAX_INSNS + 1 events, and the group copy
        // writes up to GROUP - 1 more.
        out.reserve(limit - out.len() + MAX_INSNS + GROUP + 1);
        // Where the current block's instructions are (`base`, `len`) and the
        // next one not yet emitted; without a block reported as a whole,
        // `next` is past every index so that nothing is emitted.
        let mut blk = self.cur.block;
        let (mut base, mut len, mut next) = (0usize, 0u32, u32::MAX);
        if blk != NO_BLOCK {
            let b = self.blocks[blk as usize];
            if !b.per_insn {
                (base, len, next) = (b.start, b.len, self.cur.next);
            }
        }
        let src = &self.buf[self.lo..self.lo + 8 * words];
        let blocks = &self.blocks[..];
        let insns = self.insns.as_ptr();
        let start = out.len();
        let begin = out.as_mut_ptr();
        // SAFETY: `dst` stays below `begin + limit` before each record, and
        // the capacity reserved above covers what one record writes past it;
        // `insns` ends with `PAD` (= GROUP) dummy events, so a group copy
        // starting inside a block reads within it.
        let mut dst = unsafe { begin.add(start) };
        // SAFETY: `limit` is within the capacity reserved above.
        let end = unsafe { begin.add(limit) };
        let mut used = 0;
        for chunk in src.chunks_exact(8) {
            if dst >= end {
                break;
            }
            let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            match w >> 62 {
                0 => {
                    let Some(&nb) = blocks.get(w as usize) else {
                        break;
                    };
                    if nb.len == 0 || nb.per_insn {
                        break;
                    }
                    if next < len {
                        let n = (len - next) as usize;
                        // SAFETY: the block's instructions `next..len` lie in
                        // `insns` (with `PAD` dummies after the last for the
                        // group's overrun), and `dst` has room for them and
                        // the overrun (the reservation above).
                        unsafe {
                            copy_groups(insns.add(base + next as usize), dst, n);
                            dst = dst.add(n);
                        }
                    }
                    blk = w as u32;
                    (base, len, next) = (nb.start, nb.len, 0);
                }
                1 => {
                    let index = ((w >> 48) & MAX_INSNS as u64) as u32;
                    if index >= next {
                        if index >= len {
                            break;
                        }
                        let n = (index + 1 - next) as usize;
                        // SAFETY: as above, `index < len`, so `next..=index`
                        // lie in the block's instructions.
                        unsafe {
                            copy_groups(insns.add(base + next as usize), dst, n);
                            dst = dst.add(n);
                        }
                        next = index + 1;
                    }
                    let store = w >> 61 & 1 == 1;
                    let (addr, size) = (w & ADDR_MASK, 1u32 << ((w >> 58) & 7));
                    // A store joining the load just before it (`merges_into_last`).
                    // SAFETY: `dst` and `begin` point into the same allocation,
                    // `dst` at or past `begin`.
                    let written = unsafe { dst.offset_from(begin) } as usize;
                    if store && written > self.merge_from {
                        // SAFETY: `written > 0`, and the events from `begin` to
                        // `dst` are written, so `dst - 1` is an initialised event.
                        if let Event::Ref(p) = unsafe { &mut *dst.sub(1) } {
                            if p.kind == AccessKind::Load && p.addr.0 == addr && p.size == size {
                                p.kind = AccessKind::Modify;
                                used += 1;
                                continue;
                            }
                        }
                    }
                    let kind = if store {
                        AccessKind::Store
                    } else {
                        AccessKind::Load
                    };
                    // SAFETY: `dst < end` at this record's start and one
                    // record writes at most MAX_INSNS + 1 events, within the
                    // capacity reserved past `limit`.
                    // (VirtAddr is #[repr(transparent)] over the u64: the
                    // masked word is written as is, nothing converts.)
                    unsafe {
                        dst.write(Event::Ref(MemRef {
                            addr: VirtAddr(addr),
                            size,
                            kind,
                        }));
                        dst = dst.add(1);
                    }
                }
                _ => break,
            }
            used += 1;
        }
        // SAFETY: every event up to `dst` was written.
        unsafe { out.set_len(dst.offset_from(begin) as usize) };
        self.lo += 8 * used;
        self.offset += 8 * used as u64;
        self.cur.block = blk;
        if next != u32::MAX {
            self.cur.next = next;
        }
        used > 0
    }
}
