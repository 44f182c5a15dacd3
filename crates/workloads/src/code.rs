//! What every workload shares: code layout, address placement, the memset
//! initialisation loop and the batching driver that makes a generator a
//! [`TraceSource`].

use pagelab_core::{AccessKind, Event, MemRef, SourceInfo, VirtAddr};
use pagelab_trace::{PageBatch, PageFilter, PageSink, RecordSink, TraceError, TraceSource};

/// Where the workloads' own loops live: the text of a non-PIE x86-64 binary.
pub(crate) const TEXT_BASE: u64 = 0x40_1000;
/// Where the memset loop lives: inside libc's text, far from the program's.
pub(crate) const LIBC_MEMSET: u64 = 0x7f3a_1be9_d6c0;
/// A large malloc: an mmap chunk, page aligned plus glibc's 16-byte header.
pub(crate) const MMAP_BASE: u64 = 0x7f3a_1c5e_3010;
/// The program's .bss, just after its text and data (where STREAM keeps its arrays).
pub(crate) const BSS_BASE: u64 = 0x40_5060;
/// The largest data footprint a workload accepts; keeps every address below 2^47.
pub(crate) const MAX_FOOTPRINT: u64 = 1 << 38;

/// The help text shared by every `align` parameter.
pub(crate) const ALIGN_HELP: &str =
    "alignment of the data's first byte, a power of two from 8 to 1G (2M gives a huge-page-aligned start)";
/// The help text shared by every `init` parameter.
pub(crate) const INIT_HELP: &str =
    "first write the whole data with a memset loop (32-byte stores), as the real program initialises it";

/// One instruction: its address and its length in bytes.
pub(crate) type Insn = (u64, u32);

/// Lays out consecutive instructions of the given lengths from `start`.
pub(crate) const fn layout<const N: usize>(start: u64, lens: [u32; N]) -> [Insn; N] {
    let mut out = [(0u64, 0u32); N];
    let mut pc = start;
    let mut i = 0;
    while i < N {
        out[i] = (pc, lens[i]);
        pc += lens[i] as u64;
        i += 1;
    }
    out
}

/// Appends an instruction fetch.
#[inline(always)]
pub(crate) fn fetch(out: &mut impl RecordSink, insn: Insn) {
    out.reference(MemRef {
        addr: VirtAddr(insn.0),
        size: insn.1,
        kind: AccessKind::Instr,
    });
}

/// Appends a data reference.
#[inline(always)]
pub(crate) fn data(out: &mut impl RecordSink, addr: u64, size: u32, kind: AccessKind) {
    out.reference(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    });
}

/// Rounds `addr` up to a multiple of the power of two `align`.
pub(crate) fn align_up(addr: u64, align: u64) -> u64 {
    (addr + align - 1) & !(align - 1)
}

/// glibc's AVX2 memset inner loop: `vmovdqu [rdi],ymm0; add rdi,32; cmp rdi,rsi; jb`.
const MEMSET: [Insn; 4] = layout(LIBC_MEMSET, [4, 4, 3, 2]);

/// References the memset loop emits per 32-byte store.
pub(crate) const MEMSET_REFS_PER_STORE: u64 = 5;
/// Events one memset step appends; every generator's `MAX_STEP` covers it.
const MEMSET_STEP: usize = MEMSET_REFS_PER_STORE as usize;

/// The memset initialisation loop over `[cur, end)`, one 32-byte store per step
/// (the last store is shorter when the length is not a multiple of 32).
#[derive(Clone, Debug)]
pub(crate) struct Memset {
    cur: u64,
    end: u64,
}

impl Memset {
    /// A memset of `[start, start + len)`, or an empty one when `enabled` is false.
    pub(crate) fn new(start: u64, len: u64, enabled: bool) -> Memset {
        let end = if enabled { start + len } else { start };
        Memset { cur: start, end }
    }

    /// References a memset of `len` bytes emits.
    pub(crate) fn refs(len: u64) -> u64 {
        len.div_ceil(32) * MEMSET_REFS_PER_STORE
    }

    /// Emits one store step (5 events); false, emitting nothing, when done.
    #[inline(always)]
    pub(crate) fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.cur >= self.end {
            return false;
        }
        let size = (self.end - self.cur).min(32) as u32;
        fetch(out, MEMSET[0]);
        data(out, self.cur, size, AccessKind::Store);
        fetch(out, MEMSET[1]);
        fetch(out, MEMSET[2]);
        fetch(out, MEMSET[3]);
        self.cur += 32;
        true
    }
}

/// A workload's state machine, stepped one loop iteration at a time.
pub(crate) trait Generator {
    /// The most events one [`Generator::step`] appends.
    const MAX_STEP: usize;
    /// Appends the next loop iteration's events; returns false, appending nothing, at the end.
    fn step(&mut self, out: &mut impl RecordSink) -> bool;
    /// Kind `workload`, the name, every effective parameter.
    fn info(&self) -> SourceInfo;
}

/// The most events one `fill` appends, whatever `max` asks: keeps a caller's
/// `usize::MAX` from growing its buffer without bound.
pub(crate) const MAX_FILL: usize = 1 << 20;

/// Makes a [`Generator`] a [`TraceSource`]. Its only buffer holds at most one
/// step's events: the part of a step that did not fit in the last `fill`.
pub(crate) struct Driver<G> {
    gen: G,
    pending: Vec<Event>,
    done: bool,
}

impl<G: Generator> Driver<G> {
    /// Refuses, at compile time, a generator whose `MAX_STEP` is shorter than its memset step.
    const COVERS_MEMSET: () = assert!(G::MAX_STEP >= MEMSET_STEP);

    /// Wraps a generator.
    pub(crate) fn new(gen: G) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::COVERS_MEMSET;
        Driver {
            gen,
            pending: Vec::with_capacity(G::MAX_STEP),
            done: false,
        }
    }

    /// The capacity of the carry-over buffer (for memory tests).
    #[cfg(test)]
    pub(crate) fn pending_capacity(&self) -> usize {
        self.pending.capacity()
    }
}

impl<G: Generator> Driver<G> {
    /// Takes up to `max` (at most [`MAX_FILL`]) events into `out`: the carry-over of
    /// the last call first, then whole steps, then the start of one more step when
    /// only part of it fits (the rest is carried over). True when it took any.
    #[inline(always)]
    fn fill_into<S: RecordSink>(&mut self, out: &mut S, max: usize) -> bool {
        let start = out.taken();
        let target = start + max.min(MAX_FILL);
        let carried = self.pending.len().min(target - start);
        for e in self.pending.drain(..carried) {
            out.event(e);
        }
        if !self.done && out.taken() < target {
            while out.taken() + G::MAX_STEP <= target {
                if !self.gen.step(out) {
                    self.done = true;
                    break;
                }
            }
            if !self.done && out.taken() < target && self.pending.is_empty() {
                if self.gen.step(&mut self.pending) {
                    let n = self.pending.len().min(target - out.taken());
                    for e in self.pending.drain(..n) {
                        out.event(e);
                    }
                } else {
                    self.done = true;
                }
            }
        }
        out.taken() > start
    }
}

impl<G: Generator> TraceSource for Driver<G> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        if max == 0 {
            // Nothing may be appended, and the trace may not be over: say so.
            return Ok(!self.done || !self.pending.is_empty());
        }
        out.reserve(max.min(1 << 16));
        Ok(self.fill_into(out, max))
    }

    /// The generator's references go straight through `filter`: no event is
    /// stored for them, which costs less than `fill` and filtering its events.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        if max == 0 {
            return Ok(!self.done || !self.pending.is_empty());
        }
        Ok(self.fill_into(&mut PageSink { filter, out }, max))
    }

    fn parses_to_pages(&self) -> bool {
        true
    }

    fn info(&self) -> SourceInfo {
        self.gen.info()
    }
}

/// The common `SourceInfo` of a workload.
pub(crate) fn workload_info(
    name: &str,
    params: std::collections::BTreeMap<String, String>,
) -> SourceInfo {
    SourceInfo {
        kind: "workload".into(),
        name: name.into(),
        compression: None,
        params,
    }
}

/// The splitmix64 finaliser: a bijective 64-bit mix, used to turn seeds into keys.
#[inline]
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
