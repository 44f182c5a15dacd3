//! Decoding the plugin's record stream into trace events, streaming.

use crate::format::{self, ADDR_MASK, MAX_INSNS, TB_ADDRS, TB_PER_INSN};
use crate::syscalls::{nr, AddressSpaces};
use pagelab_core::{
    AccessKind, CloneFlags, Event, ExecImage, MemRef, PageSize, SourceInfo, ThreadId, VirtAddr,
};
use pagelab_trace::{PageBatch, PageFilter, TraceError, TraceSource};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Read;

mod fast;
mod pages;
mod records;

/// Bytes read from the input at a time (the plugin writes 1 MiB blocks).
const READ_CHUNK: usize = 1 << 20;
/// Most events one `fill` or `fill_pages` takes in, whatever its `max`: the
/// fast path reserves room up to its limit and works with pointers to it.
pub(super) const MAX_FILL: usize = 1 << 20;
/// An extended record is at most 1 + 65535 words.
const MAX_RECORD: usize = 8 * (1 + 0xffff);
const NO_BLOCK: u32 = u32::MAX;
const DUMMY: MemRef = MemRef {
    addr: VirtAddr(0),
    size: 0,
    kind: AccessKind::Instr,
};

/// Dummy events after the last block's instructions in [`PluginReader::insns`],
/// so that the fast path may copy whole groups of [`fast::GROUP`] events.
const PAD: usize = fast::GROUP;

/// A translation block: where its instructions are in [`PluginReader::insns`].
#[derive(Clone, Copy, Debug)]
struct Block {
    start: usize,
    len: u32,
    per_insn: bool,
    /// Every byte of every instruction is in one 4K page.
    one_page: bool,
}

/// What `blocks` holds for an id not (yet) defined.
const UNKNOWN: Block = Block {
    start: 0,
    len: 0,
    per_insn: false,
    one_page: false,
};

impl Block {
    fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len as usize
    }
}

/// Appends copies of `src`, whose elements are all `Event::Ref`.
///
/// Copying bitwise is the decoder's hottest loop: a `map(|r| Event::Ref(*r))`
/// builds each event on the stack and reloads it, a store-forwarding stall
/// per instruction that halved the decoder's speed.
#[inline]
fn push_refs(out: &mut Vec<Event>, src: &[Event]) {
    debug_assert!(src.iter().all(|e| matches!(e, Event::Ref(_))));
    out.reserve(src.len());
    // SAFETY: every element of `src` is an `Event::Ref`, plain data owning no
    // heap memory, so a bitwise copy is a clone; `reserve` made the room.
    unsafe {
        let len = out.len();
        std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr().add(len), src.len());
        out.set_len(len + src.len());
    }
}

/// Where one thread is in its current block.
#[derive(Clone, Copy, Debug)]
struct Thread {
    id: ThreadId,
    /// Block id, or `NO_BLOCK`.
    block: u32,
    /// Next instruction of the block not yet emitted (blocks reported as a whole).
    next: u32,
}

impl Thread {
    fn new(id: ThreadId) -> Thread {
        Thread {
            id,
            block: NO_BLOCK,
            next: 0,
        }
    }
}

/// Reads the QEMU plugin's record stream (`docs/capture-format.md`) as a [`TraceSource`].
///
/// Instruction fetches are rebuilt from block definitions: after a block's
/// executed record, its instructions are emitted in order, each just before the
/// first memory access it makes, the rest when the thread's next block starts
/// (or a system call or the end of the stream intervenes). Memory use grows
/// with the number of blocks QEMU translates (the program's code), never with
/// the number of references.
///
/// Contract: see [`TraceSource`]; a stream that ends inside a record, or a
/// record that does not decode, is [`TraceError::Corrupt`] with the byte
/// offset of the record in the stream.
pub struct PluginReader<R: Read> {
    input: R,
    name: String,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Stream offset of `buf[lo]`.
    offset: u64,
    eof: bool,
    /// Blocks by id (ids are dense: one counter for the whole capture); an
    /// unknown block has length 0.
    blocks: Vec<Block>,
    /// Blocks defined.
    defined: usize,
    /// Every block's instructions as instruction-fetch events, block after
    /// block, then `PAD` dummy events; only `Event::Ref`s (see [`push_refs`]).
    insns: Vec<Event>,
    cur: Thread,
    threads: FxHashMap<ThreadId, Thread>,
    /// The thread the last emitted Switch named.
    emitted: Option<ThreadId>,
    /// Forks already turned into events (both parent and child report one).
    forks: FxHashSet<u32>,
    exited: FxHashSet<u32>,
    root: Option<u32>,
    spaces: AddressSpaces,
    /// Events decoded past the limit of the last `fill`.
    staged: Vec<Event>,
    /// Room for the events of the general path under `fill_pages`.
    scratch: Vec<Event>,
    /// Under `fill_pages`: the page filter's most recent instruction page, if known.
    last_ipage: u64,
    done: Option<Result<(), TraceError>>,
    /// Whether `decode` tries the fast path (`fast.rs`) first.
    fast_path: bool,
    /// Where placement questions go, when the capture answers them.
    questions: Option<crate::placement::Questions>,
    /// Events `decode` pushed in earlier calls of `fill`, and `out`'s length
    /// when this call's decoding started: a question's place in the stream.
    pushed: u64,
    decode_start: usize,
    /// A question was decoded: return what precedes it, so that it is
    /// answered before the program, which waits for the answer, goes on.
    paused: bool,
    /// Events of the output from this index on are this reader's own, and
    /// a load among them may still become a modify (see [`Self::access`]).
    merge_from: usize,
    /// The words of a SYSCALL record after its arguments (room kept between records).
    extra: Vec<u64>,
}

impl<R: Read> PluginReader<R> {
    /// A reader of the stream `input`; `name` appears in errors.
    pub fn new(input: R, name: impl Into<String>) -> Self {
        PluginReader {
            input,
            name: name.into(),
            buf: vec![0; READ_CHUNK + MAX_RECORD],
            lo: 0,
            hi: 0,
            offset: 0,
            eof: false,
            defined: 0,
            blocks: Vec::new(),
            insns: Vec::new(),
            cur: Thread::new(ThreadId::default()),
            threads: FxHashMap::default(),
            emitted: None,
            forks: FxHashSet::default(),
            exited: FxHashSet::default(),
            root: None,
            spaces: AddressSpaces::default(),
            staged: Vec::new(),
            scratch: Vec::new(),
            last_ipage: u64::MAX,
            done: None,
            fast_path: true,
            questions: None,
            pushed: 0,
            decode_start: 0,
            paused: false,
            merge_from: 0,
            extra: Vec::new(),
        }
    }

    /// Sends the stream's placement questions to `questions`, each with the
    /// number of events before it.
    pub(crate) fn ask_to(&mut self, questions: crate::placement::Questions) {
        self.questions = Some(questions);
    }

    /// The same reader decoding every record on its general path, without
    /// the fast path for the common records; for tests that require the two
    /// to give identical results.
    #[doc(hidden)]
    pub fn without_fast_path(mut self) -> Self {
        self.fast_path = false;
        self
    }

    /// The process id of the first record's writer: the captured program.
    pub fn root_pid(&self) -> Option<u32> {
        self.root
    }

    /// Whether an exit event was emitted for process `pid`.
    pub fn exited(&self, pid: u32) -> bool {
        self.exited.contains(&pid)
    }

    /// Translation blocks defined so far.
    pub fn blocks(&self) -> usize {
        self.defined
    }

    fn corrupt(&self, at: usize, reason: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            source_name: self.name.clone(),
            offset: self.offset + (at - self.lo) as u64,
            reason: reason.into(),
        }
    }

    /// Reads more input after `buf[lo..hi]`, keeping it; false at the end of the input.
    fn refill(&mut self) -> Result<bool, TraceError> {
        if self.eof {
            return Ok(false);
        }
        if self.lo > 0 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        loop {
            let end = (self.hi + READ_CHUNK).min(self.buf.len());
            match self.input.read(&mut self.buf[self.hi..end]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.hi += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TraceError::io(&self.name, e)),
            }
        }
    }

    #[inline]
    fn switch_to_cur(&mut self, out: &mut Vec<Event>) {
        if self.emitted != Some(self.cur.id) {
            out.push(Event::Switch(self.cur.id));
            self.emitted = Some(self.cur.id);
        }
    }

    /// Emits the current block's instructions not yet emitted.
    fn finish_block(&mut self, out: &mut Vec<Event>) {
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
    fn access(
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
    fn decode(&mut self, out: &mut Vec<Event>, limit: usize) -> Result<(), TraceError> {
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

    fn word(&self, at: usize, i: usize) -> u64 {
        let p = at + 8 * i;
        u64::from_le_bytes(self.buf[p..p + 8].try_into().expect("8 bytes"))
    }
}

impl<R: Read> TraceSource for PluginReader<R> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let start = out.len();
        self.merge_from = start;
        // `max` may be anything, `usize::MAX` for "all"; a call may append
        // fewer, and the fast path reserves and writes up to the limit.
        let max = max.min(MAX_FILL);
        let limit = start.saturating_add(max);
        // Events decoded past the last call's limit come first.
        let n = self.staged.len().min(max);
        out.extend(self.staged.drain(..n));
        match &self.done {
            Some(Ok(())) => return Ok(out.len() > start),
            Some(Err(e)) if out.len() == start => return Err(e.duplicate()),
            Some(Err(_)) => return Ok(true),
            None => {}
        }
        self.decode_start = out.len();
        let r = self.decode(out, limit);
        self.pushed += (out.len() - self.decode_start) as u64;
        let paused = std::mem::take(&mut self.paused);
        if out.len() > limit {
            self.staged.extend(out.drain(limit..));
        }
        match r {
            Ok(()) if paused => Ok(true),
            Ok(()) => {
                if out.len() < limit {
                    self.done = Some(Ok(()));
                }
                Ok(out.len() > start)
            }
            Err(e) if out.len() > start => {
                self.done = Some(Err(e));
                Ok(true)
            }
            Err(e) => {
                self.done = Some(Err(e.duplicate()));
                Err(e)
            }
        }
    }

    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        self.fill_pages_impl(filter, out, max)
    }

    fn parses_to_pages(&self) -> bool {
        true
    }

    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: "qemu".into(),
            name: self.name.clone(),
            compression: None,
            params: Default::default(),
        }
    }
}
