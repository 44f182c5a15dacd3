//! Decoding the plugin's record stream into trace events, streaming.

use crate::format::{self, MAX_INSNS, TB_ADDRS, TB_PER_INSN};
use crate::syscalls::{nr, AddressSpaces};
use pagelab_core::{
    AccessKind, CloneFlags, Event, ExecImage, MemRef, PageSize, SourceInfo, ThreadId, VirtAddr,
};
use pagelab_trace::{PageBatch, PageFilter, TraceError, TraceSource};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Read;

mod fast;
mod general;
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
