//! Page walks through the data caches: where the page table's entries lie in
//! physical memory, the walk caches that let a walk skip levels, and the
//! walk itself (one dimension, or two under nested paging).

use crate::blocks::HostBlocks;
use crate::frames::{Frames, Placement};
use crate::hierarchy::{Caches, Line};

/// The most levels a page table may have.
pub const MAX_LEVELS: usize = 5;

/// The shape of the page table a run walks, as far as a walk cares: levels
/// are numbered from 1 (the base pages' entries) to the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// The root's level (the number of levels).
    pub levels: u8,
    /// The level whose entries are this run's leaves.
    pub leaf: u8,
    /// `entry_shift[l - 1]`: log2 of the bytes an entry at level `l` maps.
    pub entry_shift: [u32; MAX_LEVELS],
    /// `bits[l - 1]`: log2 of the entries of a table at level `l`.
    pub bits: [u32; MAX_LEVELS],
    /// Bytes per entry (4 on ia32, 8 on x86-64).
    pub entry_bytes: u32,
    /// log2 of the page size: the leaf level's entry, or more for a page
    /// that is a contiguous run of leaf entries (a 64K page of 4K entries).
    pub page_shift: u32,
}

impl TableLayout {
    /// A table of `levels` levels of `bits` bits each over pages of
    /// `2^base_shift` bytes, leaves at level `leaf`.
    pub fn uniform(base_shift: u32, bits: &[u32], leaf: u8, entry_bytes: u32) -> TableLayout {
        let mut l = TableLayout {
            levels: bits.len() as u8,
            leaf,
            entry_shift: [0; MAX_LEVELS],
            bits: [0; MAX_LEVELS],
            entry_bytes,
            page_shift: 0,
        };
        let mut shift = base_shift;
        for (i, &b) in bits.iter().enumerate() {
            l.entry_shift[i] = shift;
            l.bits[i] = b;
            shift += b;
        }
        l.page_shift = l.entry_shift[leaf as usize - 1];
        l
    }

    /// Bits of virtual address the table translates.
    pub fn va_bits(&self) -> u32 {
        let top = self.levels as usize - 1;
        self.entry_shift[top] + self.bits[top]
    }

    /// The memory references of a walk that no walk cache helps.
    pub fn walk_refs(&self) -> u32 {
        (self.levels - self.leaf + 1) as u32
    }
}

/// A small fully associative LRU array of keys.
#[derive(Clone, Debug, Default)]
pub struct Lru {
    keys: Vec<u64>,
    cap: usize,
}

impl Lru {
    /// An empty array of `entries` keys.
    pub fn new(entries: u32) -> Lru {
        Lru {
            keys: Vec::with_capacity(entries as usize),
            cap: entries as usize,
        }
    }

    /// Looks `key` up, making it the most recent; inserts it on a miss.
    /// Returns whether it was there.
    #[inline]
    pub fn access(&mut self, key: u64) -> bool {
        if self.cap == 0 {
            return false;
        }
        match self.keys.iter().position(|&k| k == key) {
            Some(p) => {
                self.keys[..=p].rotate_right(1);
                true
            }
            None => {
                if self.keys.len() == self.cap {
                    self.keys.pop();
                }
                self.keys.insert(0, key);
                false
            }
        }
    }

    /// Looks `key` up without inserting it (a hit still makes it the most recent).
    #[inline]
    pub fn lookup(&mut self, key: u64) -> bool {
        match self.keys.iter().position(|&k| k == key) {
            Some(p) => {
                self.keys[..=p].rotate_right(1);
                true
            }
            None => false,
        }
    }
}

/// The walk caches of one page table: per level above the leaves, a fully
/// associative LRU array of the entries read there, keyed by the virtual
/// address bits above that level's entry.
#[derive(Clone, Debug)]
pub struct WalkCaches {
    /// `levels[l - 2]` caches entries of level `l`.
    levels: Vec<Lru>,
}

impl WalkCaches {
    /// Caches of `entries[0]` level-2 entries, `entries[1]` level-3, ...
    pub fn new(entries: &[u32]) -> WalkCaches {
        WalkCaches {
            levels: entries.iter().map(|&n| Lru::new(n)).collect(),
        }
    }

    fn at(&mut self, level: u8) -> Option<&mut Lru> {
        self.levels.get_mut((level as usize).checked_sub(2)?)
    }
}

/// What one walk cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkCost {
    /// Entries read (memory references through the caches).
    pub refs: u32,
    /// Cycles of those reads, one after the other.
    pub cycles: u32,
    /// The part of `cycles` spent by reads that missed the L1D: the walker's reads go
    /// through the L1D, so these hold one of its miss buffers as a data miss does
    /// ([`crate::overlap`]).
    pub miss_cycles: u32,
    /// Walk-cache hits (at most one per dimension walked).
    pub cache_hits: u32,
    /// Guest-physical addresses translated by the host whose 2M block the host's block
    /// translations did not hold ([`crate::blocks`]); each added `block_miss` to `cycles`.
    /// Where the guest's TLB holds them, [`Host`] leaves them to the caller, which counts
    /// them here ([`Host::asked_blocks`]).
    pub block_misses: u32,
}

impl WalkCost {
    /// One entry read at `paddr` through `caches`.
    #[inline]
    fn read(&mut self, caches: &mut Caches, paddr: u64) {
        let c = caches.access(paddr, Line::Table);
        self.refs += 1;
        self.cycles += c;
        if c > caches.l1_latency() {
            self.miss_cycles += c;
        }
    }

    fn add(&mut self, o: WalkCost) {
        self.refs += o.refs;
        self.cycles += o.cycles;
        self.miss_cycles += o.miss_cycles;
        self.cache_hits += o.cache_hits;
        self.block_misses += o.block_misses;
    }
}

/// One page table: its layout, its walk caches and where its tables lie.
#[derive(Clone, Debug)]
pub struct PageTable {
    /// The table's shape.
    pub layout: TableLayout,
    /// Its walk caches.
    pub walk_caches: WalkCaches,
    /// Its frames (tables and, for the run's own data, pages).
    pub frames: Frames,
    va_mask: u64,
    /// The last pages [`PageTable::page_of`] looked up, direct-mapped by page
    /// number: `(vpn, frame)`. A page's frame never changes once given, so
    /// an entry is never stale; it spares the hash map most lookups.
    recent: Box<[(u64, u64); RECENT]>,
}

/// Entries of [`PageTable`]'s memo of recent pages (a power of two).
const RECENT: usize = 256;

impl PageTable {
    /// An empty table; frames are handed out from `base` on, one after the
    /// other in the order of first touches.
    pub fn new(layout: TableLayout, walk_cache_entries: &[u32], base: u64) -> PageTable {
        Self::placed(layout, walk_cache_entries, base, Placement::FirstTouch)
    }

    /// An empty table whose frames, from `base` on, are placed by `placement`.
    pub fn placed(
        layout: TableLayout,
        walk_cache_entries: &[u32],
        base: u64,
        placement: Placement,
    ) -> PageTable {
        let bits = layout.va_bits();
        PageTable {
            layout,
            walk_caches: WalkCaches::new(walk_cache_entries),
            frames: Frames::placed(base, placement),
            recent: Box::new([(u64::MAX, 0); RECENT]),
            va_mask: if bits >= 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            },
        }
    }

    /// The address bits the table translates (the others are ignored).
    pub fn va_mask(&self) -> u64 {
        self.va_mask
    }

    /// Where the page holding `va` lies (address bits the table does not
    /// translate are ignored, as a 32-bit machine would never see them).
    #[inline]
    pub fn page_of(&mut self, va: u64) -> u64 {
        let shift = self.layout.page_shift;
        let vpn = (va & self.va_mask) >> shift;
        let slot = &mut self.recent[vpn as usize & (RECENT - 1)];
        if slot.0 == vpn {
            return slot.1;
        }
        let frame = self.frames.page(vpn, shift);
        *slot = (vpn, frame);
        frame
    }

    /// The start level of a walk for `va` after asking the walk caches (the
    /// lowest level that hits wins), and whether one hit.
    fn start(&mut self, va: u64) -> (u8, bool) {
        let l = self.layout;
        for level in l.leaf + 1..=l.levels {
            let key = va >> l.entry_shift[level as usize - 1];
            if let Some(c) = self.walk_caches.at(level) {
                if c.lookup(key) {
                    return (level - 1, true);
                }
            }
        }
        (l.levels, false)
    }

    /// The entry addresses a walk for `va` reads, root side first, after the
    /// walk caches (which learn the entries read above the leaves).
    fn entries(&mut self, va: u64) -> ([u64; MAX_LEVELS], usize, bool) {
        let va = va & self.va_mask;
        let (start, hit) = self.start(va);
        let l = self.layout;
        let mut out = [0; MAX_LEVELS];
        let mut n = 0;
        for level in (l.leaf..=start).rev() {
            out[n] = self.frames.entry(&l, level, va);
            n += 1;
            if level > l.leaf {
                if let Some(c) = self.walk_caches.at(level) {
                    c.access(va >> l.entry_shift[level as usize - 1]);
                }
            }
        }
        (out, n, hit)
    }

    /// A one-dimensional walk for `va`: each entry read through `caches`.
    pub fn walk(&mut self, va: u64, caches: &mut Caches) -> WalkCost {
        let (entries, n, hit) = self.entries(va);
        let mut cost = WalkCost {
            cache_hits: u32::from(hit),
            ..WalkCost::default()
        };
        for &e in &entries[..n] {
            cost.read(caches, e);
        }
        cost
    }
}

/// The host side of nested paging: the host's page table over guest-physical
/// addresses, and the nested TLB of guest-physical to host-physical pages.
#[derive(Clone, Debug)]
pub struct Host {
    /// The host's page table (its leaves are the host page size).
    pub table: PageTable,
    ntlb: Lru,
    blocks: Option<HostBlocks>,
}

impl Host {
    /// A host with this page table and a nested TLB of `ntlb_entries`.
    pub fn new(table: PageTable, ntlb_entries: u32) -> Host {
        Host {
            table,
            ntlb: Lru::new(ntlb_entries),
            blocks: None,
        }
    }

    /// The host with translations of `entries` 2M blocks of guest memory, a walk waiting
    /// `miss` cycles more for each address in a block they do not hold ([`crate::blocks`];
    /// 0 entries: none, as without).
    pub fn with_blocks(mut self, entries: u32, miss: u32) -> Host {
        self.blocks = (entries > 0).then(|| HostBlocks::new(entries, miss));
        self
    }

    /// The host with translations of 2M blocks of guest memory held in the guest's TLB,
    /// `miss` cycles for one not held ([`HostBlocks::in_tlb`]).
    pub fn with_blocks_in_tlb(mut self, miss: u32) -> Host {
        self.blocks = Some(HostBlocks::in_tlb(miss));
        self
    }

    /// The blocks walks asked for since the last call, where the guest's TLB holds them,
    /// and a miss's cycles; `None` where it does not.
    pub fn asked_blocks(&mut self) -> Option<(u32, std::vec::Drain<'_, u64>)> {
        let b = self.blocks.as_mut()?;
        Some((b.miss, b.asked()))
    }

    /// The host-physical address of guest-physical `gpa`, without cost
    /// (what a TLB entry holds).
    #[inline]
    pub fn translate(&mut self, gpa: u64) -> u64 {
        let shift = self.table.layout.page_shift;
        self.table.page_of(gpa) | (gpa & ((1 << shift) - 1))
    }

    /// `gpa` translated by the hardware: the nested TLB, else a host walk.
    fn walk_gpa(&mut self, gpa: u64, caches: &mut Caches, cost: &mut WalkCost) -> u64 {
        let shift = self.table.layout.page_shift;
        if !self.ntlb.access(gpa >> shift) {
            cost.add(self.table.walk(gpa, caches));
            if let Some(b) = &mut self.blocks {
                if !b.access(gpa) {
                    cost.cycles += b.miss;
                    cost.block_misses += 1;
                }
            }
        }
        self.translate(gpa)
    }

    /// A two-dimensional walk of `guest` for `va`: each guest entry's
    /// guest-physical address translated by the host first, then read; the
    /// data's guest-physical address translated last. Up to
    /// `g × (h + 1) + h` references (24 for four levels on each side).
    pub fn nested_walk(&mut self, guest: &mut PageTable, va: u64, caches: &mut Caches) -> WalkCost {
        let (entries, n, hit) = guest.entries(va);
        let mut cost = WalkCost {
            cache_hits: u32::from(hit),
            ..WalkCost::default()
        };
        for &gpa in &entries[..n] {
            let hpa = self.walk_gpa(gpa, caches, &mut cost);
            cost.read(caches, hpa);
        }
        // The data's own guest-physical address, not its page's start: a guest page larger
        // than the host's spans several host pages.
        let offset = va & ((1u64 << guest.layout.page_shift) - 1);
        let data = guest.page_of(va) | offset;
        self.walk_gpa(data, caches, &mut cost);
        cost
    }
}
