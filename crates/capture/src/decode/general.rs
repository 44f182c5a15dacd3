//! The decoder's general path: the common records (a block executed, a memory access,
//! one instruction of a block) turned into events one at a time, the instructions
//! emitted before the accesses they make, and the end of the stream; the loop over the
//! records, which tries the fast path (`fast.rs`) first and leaves the extended
//! records to `records.rs`.

use super::{push_refs, PluginReader, Thread, NO_BLOCK};
use crate::format::{ADDR_MASK, MAX_INSNS};
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::TraceError;
use std::io::Read;

impl<R: Read> PluginReader<R> {
    #[inline]
    pub(super) fn switch_to_cur(&mut self, out: &mut Vec<Event>) {
        if self.emitted != Some(self.cur.id) {
            out.push(Event::Switch(self.cur.id));
            self.emitted = Some(self.cur.id);
        }
    }

    /// Emits the current block's instructions not yet emitted.
    pub(super) fn finish_block(&mut self, out: &mut Vec<Event>) {
        if self.cur.block == NO_BLOCK {
            return;
        }
        let b = self.blocks[self.cur.block as usize];
        let from = self.cur.next as usize;
        if !b.per_insn && from < b.len as usize {
            if self.emitted != Some(self.cur.id) {
                out.push(Event::Switch(self.cur.id));
                self.emitted = Some(self.cur.id);
            }
            push_refs(out, &self.insns[b.start + from..b.range().end]);
        }
        self.cur.block = NO_BLOCK;
    }

    #[inline]
    fn lookup(&self, at: usize, id: u64) -> Result<u32, TraceError> {
        match self.blocks.get(id as usize) {
            Some(b) if b.len > 0 => Ok(id as u32),
            _ => Err(self.corrupt(at, format!("block {id} executed before its definition"))),
        }
    }

    /// A memory access by instruction `index` of the current block.
    #[inline]
    pub(super) fn access(
        &mut self,
        at: usize,
        index: u32,
        addr: u64,
        shift: u32,
        store: bool,
        out: &mut Vec<Event>,
    ) -> Result<(), TraceError> {
        self.switch_to_cur(out);
        if self.cur.block != NO_BLOCK && index >= self.cur.next {
            let b = self.blocks[self.cur.block as usize];
            if !b.per_insn {
                if index >= b.len {
                    return Err(self.corrupt(
                        at,
                        format!(
                            "memory access by instruction {index} of a block of {}",
                            b.len
                        ),
                    ));
                }
                let from = b.start + self.cur.next as usize;
                push_refs(out, &self.insns[from..=b.start + index as usize]);
                self.cur.next = index + 1;
            }
        }
        if store && self.merges_into_last(out, addr, 1 << shift) {
            return Ok(());
        }
        out.push(Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size: 1 << shift,
            kind: if store {
                AccessKind::Store
            } else {
                AccessKind::Load
            },
        }));
        Ok(())
    }

    /// A store of `size` bytes at `addr` right after a load of the same
    /// bytes with no event between (so by the same instruction: each
    /// instruction's fetch precedes its first access): the load becomes a
    /// modify, and true. QEMU reports a read-modify-write instruction (`addl
    /// $1, (mem)`, `xchg`, ...) as a load then a store; the CPU takes it as
    /// one write (a first touch is one write fault, not a read fault on the
    /// zero page then a copy), and Lackey writes it as one `M`.
    #[inline]
    fn merges_into_last(&self, out: &mut [Event], addr: u64, size: u32) -> bool {
        if out.len() <= self.merge_from {
            return false;
        }
        match out.last_mut() {
            Some(Event::Ref(p))
                if p.kind == AccessKind::Load && p.addr.0 == addr && p.size == size =>
            {
                p.kind = AccessKind::Modify;
                true
            }
            _ => false,
        }
    }

    /// Whether `out`'s last event is a load of this reader's that the next
    /// record may turn into a modify: decoding must not stop after it. Never
    /// while events decoded earlier wait in `staged` (a `fill` that took only
    /// part of them): what is decoded now comes after those.
    #[inline]
    fn ends_in_load(&self, out: &[Event]) -> bool {
        self.staged.is_empty()
            && out.len() > self.merge_from
            && matches!(out.last(), Some(Event::Ref(r)) if r.kind == AccessKind::Load)
    }

    /// Decodes records until `out` holds at least `limit` events (and does
    /// not end in a load a store may join) or the input ends.
    pub(super) fn decode(&mut self, out: &mut Vec<Event>, limit: usize) -> Result<(), TraceError> {
        while (out.len() < limit || self.ends_in_load(out)) && !self.paused {
            if self.hi - self.lo < 8 {
                if !self.refill()? {
                    return self.end(out);
                }
                continue;
            }
            if self.fast_path && self.fast(out, limit) {
                continue;
            }
            let at = self.lo;
            let w = u64::from_le_bytes(self.buf[at..at + 8].try_into().expect("8 bytes"));
            match w >> 62 {
                0 => {
                    if w >> 48 != 0 {
                        return Err(self.corrupt(at, format!("bad block-executed word {w:#018x}")));
                    }
                    self.finish_block(out);
                    self.cur.block = self.lookup(at, w)?;
                    self.cur.next = 0;
                }
                1 => {
                    let index = ((w >> 48) & MAX_INSNS as u64) as u32;
                    let shift = ((w >> 58) & 7) as u32;
                    self.access(at, index, w & ADDR_MASK, shift, w >> 61 & 1 == 1, out)?;
                }
                3 => {
                    self.finish_block(out);
                    let index = ((w >> 48) & MAX_INSNS as u64) as usize;
                    let block = self.lookup(at, w & ADDR_MASK)?;
                    let b = self.blocks[block as usize];
                    let Some(r) = self.insns[b.range()].get(index).cloned() else {
                        return Err(self.corrupt(
                            at,
                            format!(
                                "instruction {index} of block {} is past its end",
                                w & ADDR_MASK
                            ),
                        ));
                    };
                    self.switch_to_cur(out);
                    out.push(r);
                    self.cur.block = block;
                    self.cur.next = index as u32 + 1;
                }
                _ => {
                    let words = ((w >> 40) & 0xffff) as usize;
                    let len = 8 * (1 + words);
                    if self.hi - self.lo < len {
                        if !self.refill()? {
                            return Err(self.truncated(len));
                        }
                        continue;
                    }
                    self.extended(at, w, words, out)?;
                    self.lo = at + len;
                    self.offset += len as u64;
                    continue;
                }
            }
            self.lo = at + 8;
            self.offset += 8;
        }
        Ok(())
    }

    fn truncated(&self, need: usize) -> TraceError {
        self.corrupt(
            self.lo,
            format!(
                "the capture stream ends inside a record ({} of its {need} bytes present)",
                self.hi - self.lo
            ),
        )
    }

    /// At the end of the input: the rest of every thread's current block.
    fn end(&mut self, out: &mut Vec<Event>) -> Result<(), TraceError> {
        if self.hi > self.lo {
            return Err(self.truncated(8));
        }
        self.finish_block(out);
        let mut rest: Vec<Thread> = self.threads.drain().map(|(_, t)| t).collect();
        rest.sort_by_key(|t| (t.id.pid, t.id.tid));
        for t in rest {
            self.cur = t;
            self.finish_block(out);
        }
        Ok(())
    }
}
