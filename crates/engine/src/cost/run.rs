//! One page size's run of a [`super::CostStudy`]: its TLB, walk caches, page table and data
//! caches, the cycles each reference costs it, and its overlap clock.

use super::*;

/// One page size's run.
pub(super) struct Run {
    pub(super) size: PageSize,
    /// The size of the run's TLB entries: the page size, or under nested paging the
    /// smaller of it and the host's, as the hardware caches a combined translation
    /// (a guest 2M page on 4K host pages is splintered into 4K entries).
    pub(super) tlb_size: PageSize,
    /// Per side, the bits of an address that name its L1 TLB entry (the
    /// page's, or its fragment's where the L1 caches fragments).
    pub(super) memo_shift: [u32; 2],
    pub(super) tlb: TlbHierarchy,
    pub(super) caches: Caches,
    pub(super) pt: PageTable,
    pub(super) host: Option<Host>,
    /// Per side, the entry of the last lookup (it is the most recent in its
    /// L1 array, so a repeat hits without changing anything) and its page's
    /// (guest-)physical start.
    pub(super) last: [u64; 2],
    pub(super) last_base: [u64; 2],
    pub(super) tlb_cycles: u64,
    pub(super) data_cycles: u64,
    pub(super) walk_cycles: u64,
    /// The part of `walk_cycles` of reads that missed the L1D (for the overlap: they
    /// hold a miss buffer).
    pub(super) walk_miss_cycles: u64,
    pub(super) walk_refs: u64,
    pub(super) walks: [u64; 2],
    pub(super) walk_cache_hits: u64,
    /// Cycles of loads alone (translation, walk and caches).
    pub(super) load_cycles: u64,
    /// Per side, whether `last_base` holds the frame of the last entry.
    pub(super) frame_known: [bool; 2],
    /// The data line being read, between the translation and the cache
    /// passes of a shared first level: its address, and under nested
    /// paging its host-physical address.
    pub(super) va: u64,
    pub(super) paddr: u64,
    /// The clock of overlapped misses, when the references are independent
    /// and the machine overlaps them.
    pub(super) overlap: Option<Overlap>,
    /// The TLB, walk, walk-miss and block cycles of the line [`Run::translate_line`]
    /// translated, for the overlap.
    pub(super) pending: (u64, u64, u64, u64),
    /// Ticks ([`TICKS`]) the overlap hid, of all references and of loads.
    pub(super) hidden: u64,
    pub(super) load_hidden: u64,
    /// The L1D's latency: a data access that costs more missed it.
    pub(super) l1_latency: u64,
    /// Cycles each walk costs beyond its reads (`costs.walk`).
    pub(super) walk_extra: u64,
    /// Cycles each of the host's block translations a walk missed holds their one-at-a-time
    /// resource in a loop of independent loads (`[nested] block_interval`), and all those
    /// cycles so far (read as deltas per data line, for the overlap).
    pub(super) block_interval: u64,
    pub(super) block_busy: u64,
    /// The host's block translations walks missed ([`pagelab_cache::blocks`]).
    pub(super) block_misses: u64,
    /// What the study's figures need beside the TLB's counters, where this run's lookups
    /// stand in for the study's ([`super::CostStudy::count_pages`]).
    pub(super) counts: Option<Box<PageCounts>>,
}

impl Run {
    /// Translates `addr` for data; returns its page's (guest-)physical
    /// start and whether a walk read page-table lines.
    #[inline]
    pub(super) fn translate(&mut self, side: usize, addr: u64, hit: &[u32; 3]) -> (u64, bool) {
        let walked = self.lookup(side, addr, hit, true);
        (self.last_base[side], walked)
    }

    /// The TLB's part of translating `addr` (the memo of the last entry, the
    /// lookup, a walk); returns whether it walked. The page's frame is
    /// looked up after a walk, where the page may be new (so frames are
    /// handed out in the order of the first touches), and after any lookup
    /// when `frame`; else `frame_known` says whether `last_base` holds it.
    // Inlined into each of its callers (session 53): as a call, made once per run for
    // every reference that reaches the runs, it spent about a tenth of its time in its
    // prologue and epilogue.
    #[inline(always)]
    pub(super) fn lookup(&mut self, side: usize, addr: u64, hit: &[u32; 3], frame: bool) -> bool {
        let key = addr >> self.memo_shift[side];
        if key == self.last[side] {
            self.tlb_cycles += hit[0] as u64;
            return false;
        }
        let walked = match self
            .tlb
            .access_addr(SIDES[side], VirtAddr(addr), self.tlb_size)
        {
            Outcome::L1Hit => {
                self.tlb_cycles += hit[0] as u64;
                false
            }
            Outcome::L2Hit => {
                self.tlb_cycles += hit[1] as u64;
                self.count_page(side, addr, Outcome::L2Hit);
                false
            }
            Outcome::Miss => {
                self.tlb_cycles += hit[2] as u64;
                self.count_page(side, addr, Outcome::Miss);
                self.walk(side, addr);
                true
            }
        };
        self.last[side] = key;
        self.frame_known[side] = walked || frame;
        if self.frame_known[side] {
            self.last_base[side] = self.pt.page_of(addr);
        }
        walked
    }

    /// A lookup of `addr` that missed the L1 with `outcome`, in the study's counts if kept.
    #[inline]
    fn count_page(&mut self, side: usize, addr: u64, outcome: Outcome) {
        if let Some(c) = self.counts.as_deref_mut() {
            c.missed_l1(side, addr >> self.size.shift(), outcome);
        }
    }

    /// A reference on `side` from `addr` to `last` that spans pages of 4K: the pages of
    /// this run's size after the first, in the study's counts if kept.
    #[cold]
    pub(super) fn count_extra(&mut self, side: usize, addr: u64, last: u64) {
        let shift = self.size.shift();
        if let Some(c) = self.counts.as_deref_mut() {
            c.extra[side] += (last >> shift) - (addr >> shift);
        }
    }

    #[cold]
    pub(super) fn walk(&mut self, side: usize, addr: u64) {
        let mut w = match &mut self.host {
            Some(h) => h.nested_walk(&mut self.pt, addr, &mut self.caches),
            None => self.pt.walk(addr, &mut self.caches),
        };
        // The host's block translations the walk asked for, where the TLB holds them.
        if let Some((miss, asked)) = self.host.as_mut().and_then(Host::asked_blocks) {
            for b in asked {
                if !self.tlb.host_block(b) {
                    w.cycles += miss;
                    w.block_misses += 1;
                }
            }
        }
        self.walks[side] += 1;
        self.walk_refs += w.refs as u64;
        self.walk_cycles += w.cycles as u64 + self.walk_extra;
        self.walk_miss_cycles += w.miss_cycles as u64;
        self.walk_cache_hits += w.cache_hits as u64;
        self.block_misses += w.block_misses as u64;
        self.block_busy += w.block_misses as u64 * self.block_interval;
    }

    /// A data reference from `addr` to `last`, line by line; a load's
    /// cycles are also counted apart.
    #[inline]
    pub(super) fn data(
        &mut self,
        addr: u64,
        last: u64,
        line_shift: u32,
        hit: &[u32; 3],
        load: bool,
    ) {
        let before = self.tlb_cycles + self.walk_cycles + self.data_cycles;
        self.lines(addr, last, line_shift, hit, load);
        if load {
            self.load_cycles += self.tlb_cycles + self.walk_cycles + self.data_cycles - before;
        }
    }

    /// The lines of a data reference from `addr` to `last`.
    #[inline]
    pub(super) fn lines(
        &mut self,
        addr: u64,
        last: u64,
        line_shift: u32,
        hit: &[u32; 3],
        load: bool,
    ) {
        let offset = self.size.bytes() - 1;
        let mut a = addr;
        loop {
            let (tlb, walk, miss, busy) = (
                self.tlb_cycles,
                self.walk_cycles,
                self.walk_miss_cycles,
                self.block_busy,
            );
            let (base, _) = self.translate(1, a, hit);
            let mut paddr = base | (a & offset);
            if let Some(h) = &mut self.host {
                paddr = h.translate(paddr);
            }
            let data = self.caches.access(paddr, Line::Data) as u64;
            self.data_cycles += data;
            if self.overlap.is_some() {
                let tw = (
                    self.tlb_cycles - tlb,
                    self.walk_cycles - walk,
                    self.walk_miss_cycles - miss,
                    self.block_busy - busy,
                );
                self.overlap_line(tw, data, load);
            }
            let next = ((a >> line_shift) + 1) << line_shift;
            if next == 0 || next > last {
                break;
            }
            a = next;
        }
    }

    /// One data line's `(tlb, walk, walk miss, block)` cycles and `data` cycles through
    /// the overlap clock: what it hid is counted (of loads apart).
    pub(super) fn overlap_line(
        &mut self,
        (tlb, walk, walk_miss, blocks): (u64, u64, u64, u64),
        data: u64,
        load: bool,
    ) {
        let Some(o) = &mut self.overlap else { return };
        let moved = o.independent(
            tlb * TICKS,
            (walk * TICKS, walk_miss * TICKS, blocks * TICKS),
            data * TICKS,
            data > self.l1_latency,
        );
        let hidden = (tlb + walk + data) * TICKS - moved;
        self.hidden += hidden;
        if load {
            self.load_hidden += hidden;
        }
    }

    /// An instruction of `ticks` on the overlap clock: what it hid is counted.
    pub(super) fn issue(&mut self, ticks: u64) {
        if let Some(o) = &mut self.overlap {
            self.hidden += ticks - o.issue(ticks);
        }
    }

    /// A data line's translation, with a shared first level: the TLB's part
    /// (a walk reads the caches first); the physical address is worked out
    /// by [`Run::shared_line`] only if the line misses the first level.
    /// Under nested paging it is worked out here, since the host hands out
    /// its frames at the first touch of each of its pages.
    #[inline]
    pub(super) fn translate_line(&mut self, a: u64, hit: &[u32; 3], load: bool) {
        let before = self.tlb_cycles + self.walk_cycles;
        let (walk, miss, busy) = (self.walk_cycles, self.walk_miss_cycles, self.block_busy);
        self.va = a;
        let nested = self.host.is_some();
        self.lookup(1, a, hit, nested);
        self.pending = (
            self.tlb_cycles + walk - before,
            self.walk_cycles - walk,
            self.walk_miss_cycles - miss,
            self.block_busy - busy,
        );
        if let Some(h) = &mut self.host {
            self.paddr = h.translate(self.last_base[1] | (a & (self.size.bytes() - 1)));
        }
        if load {
            self.load_cycles += self.tlb_cycles + self.walk_cycles - before;
        }
    }

    /// The caches' read of the line [`Run::translate_line`] translated.
    #[inline]
    pub(super) fn shared_line(&mut self, line: SharedLine, load: bool) {
        let (va, nested, offset) = (self.va, self.host.is_some(), self.size.bytes() - 1);
        let (pt, known, base, paddr) = (
            &mut self.pt,
            &mut self.frame_known[1],
            &mut self.last_base[1],
            self.paddr,
        );
        let cycles = self.caches.access_shared(line, || {
            if nested {
                return paddr;
            }
            if !*known {
                *base = pt.page_of(va);
                *known = true;
            }
            *base | (va & offset)
        }) as u64;
        self.data_cycles += cycles;
        if load {
            self.load_cycles += cycles;
        }
        if self.overlap.is_some() {
            self.overlap_line(self.pending, cycles, load);
        }
    }

    /// An instruction fetch from `addr` to `last`: its translations only
    /// (instruction caches are not modelled). Returns whether it walked.
    #[inline]
    pub(super) fn instr(&mut self, addr: u64, last: u64, hit: &[u32; 3]) -> bool {
        // A fetch needs no physical address (instruction caches are not modelled).
        let mut walked = self.lookup(0, addr, hit, false);
        if last >> MIN_PAGE_SHIFT != addr >> MIN_PAGE_SHIFT {
            walked |= self.lookup(0, last, hit, false);
        }
        walked
    }
}
