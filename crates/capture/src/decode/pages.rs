//! Decoding straight into page words ([`TraceSource::fill_pages`]): the
//! references go through the study's [`PageFilter`] as they are decoded, and
//! no event is stored for them.
//!
//! The common records take a fast path like `fast.rs`'s, with the filter in
//! place of the output; every other record is decoded into events by the
//! general path and those go through the filter, so the filter sees exactly
//! the events `fill` would give, in the same order.

use super::{PluginReader, NO_BLOCK};
use crate::format::{ADDR_MASK, MAX_INSNS};
use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
use pagelab_trace::{PageBatch, PageFilter, TraceError};
use std::io::Read;

/// The most events one record can give: the rest of a block and an access.
const RECORD_MAX: u64 = MAX_INSNS as u64 + 1;

/// No page: what `last` holds when the filter's most recent instruction page is not known.
const UNKNOWN_PAGE: u64 = u64::MAX;

/// Takes in `insns`, instructions of one block; `one_page`: the block's
/// instructions all lie in one 4K page. `last` is the 4K page that is the
/// filter's most recent on the instruction side, when known.
///
/// A reference within one 4K page leaves that page the side's most recent,
/// and the filter drops a repeat of the most recent page at once, changing
/// nothing but the count: such repeats are only counted here.
#[inline(always)]
fn instructions(
    filter: &mut PageFilter,
    out: &mut PageBatch,
    insns: &[Event],
    one_page: bool,
    last: &mut u64,
) {
    let Some(Event::Ref(first)) = insns.first() else {
        return;
    };
    if one_page {
        let page = first.addr.vpn(PageSize::MIN).0;
        let mut n = insns.len() as u64;
        if page != *last {
            filter.reference(first, out);
            *last = page;
            n -= 1;
        }
        out.refs[0] += n;
    } else {
        for e in insns {
            if let Event::Ref(r) = e {
                filter.reference(r, out);
            }
        }
        *last = UNKNOWN_PAGE;
    }
}

impl<R: Read> PluginReader<R> {
    /// [`TraceSource::fill_pages`](pagelab_trace::TraceSource::fill_pages):
    /// as `fill`, with events counted in `out` instead of stored.
    pub(super) fn fill_pages_impl(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        let start = out.events();
        // As in `fill`: `max` may be `usize::MAX`.
        let max = max.min(super::MAX_FILL);
        let goal = start.saturating_add(max as u64);
        // Known only while this call alone feeds the filter.
        self.last_ipage = UNKNOWN_PAGE;
        // Events decoded past the last call's goal come first.
        let n = self.staged.len().min(max);
        for e in self.staged.drain(..n) {
            filter.event(&e, out);
        }
        match &self.done {
            Some(Ok(())) => return Ok(out.events() > start),
            Some(Err(e)) if out.events() == start => return Err(e.duplicate()),
            Some(Err(_)) => return Ok(true),
            None => {}
        }
        let r = self.decode_pages(filter, out, goal);
        match r {
            Ok(()) => {
                if out.events() < goal {
                    self.done = Some(Ok(()));
                }
                Ok(out.events() > start)
            }
            Err(e) if out.events() > start => {
                self.done = Some(Err(e));
                Ok(true)
            }
            Err(e) => {
                self.done = Some(Err(e.duplicate()));
                Err(e)
            }
        }
    }

    /// Decodes until `out` has taken in `goal` events or the input ends.
    fn decode_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        goal: u64,
    ) -> Result<(), TraceError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let r = loop {
            let have = out.events();
            if have >= goal {
                break Ok(());
            }
            if self.fast_path
                && have + RECORD_MAX < goal
                && self.hi - self.lo >= 8
                && self.fast_pages(filter, out, goal - RECORD_MAX - have)
            {
                continue;
            }
            // The general path, for the next event or events.
            scratch.clear();
            self.merge_from = 0;
            let r = self.decode(&mut scratch, 1);
            // Placement questions are answered on `fill`'s path only (a relocated capture).
            self.paused = false;
            let room = (goal - out.events()) as usize;
            for e in &scratch[..room.min(scratch.len())] {
                filter.event(e, out);
            }
            self.last_ipage = UNKNOWN_PAGE;
            if scratch.len() > room {
                self.staged.extend(scratch.drain(room..));
            }
            match r {
                Err(e) => break Err(e),
                Ok(()) if scratch.is_empty() => break Ok(()),
                Ok(()) => {}
            }
        };
        scratch.clear();
        self.scratch = scratch;
        r
    }

    /// `fast` through the filter: decodes common records while fewer than
    /// `budget` events have been taken in. Returns whether it decoded any.
    fn fast_pages(&mut self, filter: &mut PageFilter, out: &mut PageBatch, budget: u64) -> bool {
        if self.emitted != Some(self.cur.id) {
            return false;
        }
        let words = (self.hi - self.lo) / 8;
        // As in `fast`: without a block reported as a whole, `next` is past every index.
        let mut blk = self.cur.block;
        let (mut base, mut len, mut next, mut one) = (0usize, 0u32, u32::MAX, false);
        if blk != NO_BLOCK {
            let b = self.blocks[blk as usize];
            if !b.per_insn {
                (base, len, next, one) = (b.start, b.len, self.cur.next, b.one_page);
            }
        }
        let src = &self.buf[self.lo..self.lo + 8 * words];
        let blocks = &self.blocks[..];
        let insns = &self.insns[..];
        let mut taken = 0u64;
        let mut last = self.last_ipage;
        let mut used = 0;
        // A load not yet given to the filter, which the next record may turn
        // into a modify (`merges_into_last`), and the words used before it.
        let mut pending: Option<(MemRef, usize)> = None;
        for chunk in src.chunks_exact(8) {
            if taken >= budget {
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
                    if let Some((p, _)) = pending.take() {
                        filter.reference(&p, out);
                    }
                    if next < len {
                        let (from, to) = (base + next as usize, base + len as usize);
                        instructions(filter, out, &insns[from..to], one, &mut last);
                        taken += (len - next) as u64;
                    }
                    blk = w as u32;
                    (base, len, next, one) = (nb.start, nb.len, 0, nb.one_page);
                }
                1 => {
                    let index = ((w >> 48) & MAX_INSNS as u64) as u32;
                    if index >= next {
                        if index >= len {
                            break;
                        }
                        if let Some((p, _)) = pending.take() {
                            filter.reference(&p, out);
                        }
                        let (from, to) = (base + next as usize, base + index as usize + 1);
                        instructions(filter, out, &insns[from..to], one, &mut last);
                        taken += (index + 1 - next) as u64;
                        next = index + 1;
                    }
                    let store = w >> 61 & 1 == 1;
                    let mut r = MemRef {
                        addr: VirtAddr(w & ADDR_MASK),
                        size: 1 << ((w >> 58) & 7),
                        kind: AccessKind::Load,
                    };
                    match pending.take() {
                        // Counted in `taken` when it was pending.
                        Some((p, _)) if store && p.addr == r.addr && p.size == r.size => {
                            r.kind = AccessKind::Modify;
                            filter.reference(&r, out);
                        }
                        p => {
                            if let Some((p, _)) = p {
                                filter.reference(&p, out);
                            }
                            taken += 1;
                            if store {
                                r.kind = AccessKind::Store;
                                filter.reference(&r, out);
                            } else {
                                pending = Some((r, used));
                            }
                        }
                    }
                }
                _ => break,
            }
            used += 1;
        }
        // A load still pending is left to the general path, which decodes
        // past it: its instructions were taken in and `next` counts them.
        if let Some((_, at)) = pending {
            used = at;
        }
        self.last_ipage = last;
        self.lo += 8 * used;
        self.offset += 8 * used as u64;
        self.cur.block = blk;
        if next != u32::MAX {
            self.cur.next = next;
        }
        used > 0
    }
}
