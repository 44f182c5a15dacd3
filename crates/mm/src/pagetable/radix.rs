//! The radix page table: an arena of table nodes in one `Vec<u64>`, entries
//! encoded like hardware PTEs, tables allocated lazily and freed when empty.
//!
//! Entry layout (one `u64`): bit 0 present, bit 1 leaf, bits 2..10 flags,
//! bits 10..16 log2 of the contiguous run length, bits 16..64 the payload: for
//! a leaf the first frame of its page (every entry of a run holds the run's
//! first frame), for a table the offset of the child's first entry in the
//! arena. The word before a table's first entry counts its present entries.

mod ops;

use super::tally::TallyStake;
use super::{
    mapping_of, Geometry, Mapping, PageTable, PageTableStats, ProtectReport, PtError, Split,
    Translation,
};
use super::{PteFlags, TableTally, MAX_LEVELS};
use pagelab_core::{BasePfn, PageSize, VirtAddr};
use std::sync::Arc;

/// The largest frame number an entry can hold.
pub const MAX_PFN: u64 = (1 << 48) - 1;

const PRESENT: u64 = 1;
const LEAF: u64 = 2;
const FLAGS_SHIFT: u32 = 2;
const RUN_SHIFT: u32 = 10;
const PAYLOAD_SHIFT: u32 = 16;

#[inline]
fn leaf_entry(pfn: u64, flags: PteFlags, run_shift: u8) -> u64 {
    PRESENT
        | LEAF
        | (flags.0 as u64) << FLAGS_SHIFT
        | (run_shift as u64) << RUN_SHIFT
        | pfn << PAYLOAD_SHIFT
}

#[inline]
fn table_entry(off: usize) -> u64 {
    PRESENT | (off as u64) << PAYLOAD_SHIFT
}

#[inline]
fn payload(e: u64) -> u64 {
    e >> PAYLOAD_SHIFT
}

#[inline]
fn run_shift_of(e: u64) -> u32 {
    ((e >> RUN_SHIFT) & 63) as u32
}

#[inline]
fn flags_of(e: u64) -> PteFlags {
    PteFlags((e >> FLAGS_SHIFT) as u8)
}

/// A radix page table with leaves at any leaf level of its [`Geometry`] and
/// contiguous runs of entries for the sizes between. Its memory counts in
/// the [`TableTally`] it is attached to (its own unless given one); a clone
/// starts a tally of its own.
#[derive(Debug, Clone)]
pub struct RadixPageTable {
    geo: Geometry,
    levels: u8,
    /// `shift[l]`: log2 of the bytes an entry at level `l` maps (index 0 unused).
    shift: [u32; MAX_LEVELS + 1],
    /// `mask[l]`: entries at level `l` minus one.
    mask: [u64; MAX_LEVELS + 1],
    va_bits: u32,
    pool: Vec<u64>,
    free: [Vec<usize>; MAX_LEVELS + 1],
    root: usize,
    tables: [u64; MAX_LEVELS + 1],
    /// Mapped pages per size, indexed by log2 of the size.
    leaves: [u64; 31],
    peak_memory: u64,
    allocated: u64,
    freed: u64,
    splits: u64,
    /// Its bytes, counted in the tally it is attached to.
    stake: TallyStake,
}

impl RadixPageTable {
    /// An empty table (only the root) of the given geometry, counted in a
    /// tally of its own.
    pub fn new(geo: Geometry) -> RadixPageTable {
        RadixPageTable::new_in(geo, &Arc::new(TableTally::default()))
    }

    /// An empty table (only the root) of the given geometry, counted in `tally`.
    pub fn new_in(geo: Geometry, tally: &Arc<TableTally>) -> RadixPageTable {
        let levels = geo.levels();
        let mut shift = [0; MAX_LEVELS + 1];
        let mut mask = [0; MAX_LEVELS + 1];
        for l in 1..=levels {
            shift[l as usize] = geo.entry_shift(l);
            mask[l as usize] = geo.entries(l) - 1;
        }
        let mut pt = RadixPageTable {
            geo,
            levels,
            shift,
            mask,
            va_bits: geo.va_bits(),
            pool: Vec::new(),
            free: Default::default(),
            root: 0,
            tables: [0; MAX_LEVELS + 1],
            leaves: [0; 31],
            peak_memory: 0,
            allocated: 0,
            freed: 0,
            splits: 0,
            stake: TallyStake::new(tally),
        };
        pt.root = pt.alloc_table(levels);
        pt
    }

    /// Moves this table's memory from the tally it counts in to `tally`.
    pub fn attach(&mut self, tally: &Arc<TableTally>) {
        self.stake.move_to(tally);
    }

    /// Bytes of this table's level-1 tables (PTE pages).
    pub fn level1_bytes(&self) -> u64 {
        self.tables[1] * self.geo.table_bytes(1)
    }

    #[inline]
    fn index(&self, va: u64, level: u8) -> usize {
        ((va >> self.shift[level as usize]) & self.mask[level as usize]) as usize
    }

    /// A zeroed table at `level`; returns the offset of its first entry.
    fn alloc_table(&mut self, level: u8) -> usize {
        let off = match self.free[level as usize].pop() {
            // A table is freed only when empty, so its entries are all zero.
            Some(off) => off,
            None => {
                let n = self.geo.entries(level) as usize;
                self.pool.resize(self.pool.len() + 1 + n, 0);
                self.pool.len() - n
            }
        };
        self.tables[level as usize] += 1;
        self.allocated += 1;
        let bytes = self.geo.table_bytes(level);
        self.stake.add(bytes, if level == 1 { bytes } else { 0 });
        self.peak_memory = self.peak_memory.max(self.stake.bytes());
        off
    }

    fn free_table(&mut self, level: u8, off: usize) {
        self.free[level as usize].push(off);
        self.tables[level as usize] -= 1;
        self.freed += 1;
        let bytes = self.geo.table_bytes(level);
        self.stake.sub(bytes, if level == 1 { bytes } else { 0 });
    }

    /// The page size of a leaf entry found at `level`.
    #[inline]
    fn leaf_size_of(&self, e: u64, level: u8) -> PageSize {
        let s = self.shift[level as usize] + run_shift_of(e);
        PageSize::from_shift(s as u8).unwrap_or(PageSize::K4)
    }

    fn count_leaf(&mut self, size: PageSize, add: bool) {
        let slot = &mut self.leaves[size.shift() as usize];
        *slot = if add {
            *slot + 1
        } else {
            slot.saturating_sub(1)
        };
    }

    fn count_leaves(&mut self, size: PageSize, n: u64) {
        self.leaves[size.shift() as usize] += n;
    }

    /// Descends towards `va`; returns the leaf entry, its level and the
    /// offset of its table, or `None` if an empty entry is reached.
    #[inline]
    fn find_leaf(&self, va: u64) -> Option<(u64, u8, usize)> {
        if va >> self.va_bits != 0 {
            return None;
        }
        let mut off = self.root;
        let mut level = self.levels;
        loop {
            let e = self.pool[off + self.index(va, level)];
            if e & PRESENT == 0 {
                return None;
            }
            if e & LEAF != 0 {
                return Some((e, level, off));
            }
            off = payload(e) as usize;
            level -= 1;
        }
    }

    /// Whether mapping `p` at `va` would overlap something (no allocation).
    fn overlaps(&self, va: u64, level: u8, run: usize) -> bool {
        let mut off = self.root;
        for l in (level + 1..=self.levels).rev() {
            let e = self.pool[off + self.index(va, l)];
            if e & PRESENT == 0 {
                return false;
            }
            if e & LEAF != 0 {
                return true;
            }
            off = payload(e) as usize;
        }
        let i = self.index(va, level);
        self.pool[off + i..off + i + run].iter().any(|&e| e != 0)
    }

    /// The table at `level` on the path to `va`, allocating missing tables.
    fn table_for(&mut self, va: u64, level: u8) -> usize {
        let mut off = self.root;
        for l in (level + 1..=self.levels).rev() {
            let slot = off + self.index(va, l);
            let e = self.pool[slot];
            off = if e & PRESENT == 0 {
                let child = self.alloc_table(l - 1);
                self.pool[slot] = table_entry(child);
                self.pool[off - 1] += 1;
                child
            } else {
                payload(e) as usize
            };
        }
        off
    }

    /// Frees empty tables on the path to `va`, from `level` up (never the root).
    fn prune(&mut self, va: u64, level: u8) {
        let mut path = [0usize; MAX_LEVELS + 1];
        let mut off = self.root;
        for l in (level..=self.levels).rev() {
            path[l as usize] = off;
            if l > level {
                off = payload(self.pool[off + self.index(va, l)]) as usize;
            }
        }
        for l in level..self.levels {
            let off = path[l as usize];
            if self.pool[off - 1] != 0 {
                break;
            }
            self.free_table(l, off);
            let parent = path[l as usize + 1];
            let slot = parent + self.index(va, l + 1);
            self.pool[slot] = 0;
            self.pool[parent - 1] -= 1;
        }
    }
}

impl PageTable for RadixPageTable {
    fn geometry(&self) -> &Geometry {
        &self.geo
    }

    fn map(
        &mut self,
        va: VirtAddr,
        pfn: BasePfn,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<(), PtError> {
        let p = self.geo.check_page(va, pfn, size)?;
        let run = 1usize << p.run_shift;
        if self.overlaps(va.0, p.level, run) {
            return Err(PtError::Overlap { va, size });
        }
        let off = self.table_for(va.0, p.level);
        let i = off + self.index(va.0, p.level);
        self.pool[i..i + run].fill(leaf_entry(pfn.0, flags, p.run_shift));
        self.pool[off - 1] += run as u64;
        self.count_leaf(size, true);
        Ok(())
    }

    fn unmap(&mut self, va: VirtAddr, size: PageSize) -> Result<Mapping, PtError> {
        self.geo.check_page(va, BasePfn(0), size)?;
        let (e, level, off) = self.find_leaf(va.0).ok_or(PtError::NotMapped { va })?;
        let found = mapping_of(
            va,
            self.leaf_size_of(e, level),
            BasePfn(payload(e)),
            flags_of(e),
        );
        if found.start != va || found.size != size {
            return Err(PtError::SizeMismatch { va, size, found });
        }
        let run = 1usize << run_shift_of(e);
        let i = off + self.index(va.0, level);
        self.pool[i..i + run].fill(0);
        self.pool[off - 1] -= run as u64;
        self.count_leaf(size, false);
        self.prune(va.0, level);
        Ok(found)
    }

    #[inline]
    fn walk(&self, va: VirtAddr) -> Option<Translation> {
        let (e, level, _) = self.find_leaf(va.0)?;
        let size = self.leaf_size_of(e, level);
        Some(Translation {
            start: va.align_down(size),
            size,
            pfn: BasePfn(payload(e)),
            flags: flags_of(e),
            levels: self.levels - level + 1,
        })
    }

    fn walk_levels(&self, va: VirtAddr) -> u8 {
        if va.0 >> self.va_bits != 0 {
            return 0;
        }
        let (mut off, mut level) = (self.root, self.levels);
        loop {
            let e = self.pool[off + self.index(va.0, level)];
            if e & PRESENT == 0 || e & LEAF != 0 {
                return self.levels - level + 1;
            }
            off = payload(e) as usize;
            level -= 1;
        }
    }

    fn protect(
        &mut self,
        va: VirtAddr,
        len: u64,
        flags: PteFlags,
    ) -> Result<ProtectReport, PtError> {
        let end = self.geo.check_range(va, len)?;
        let mut report = ProtectReport::default();
        if len > 0 {
            self.protect_node(self.root, self.levels, 0, (va.0, end), flags, &mut report);
        }
        Ok(report)
    }

    fn split(&mut self, va: VirtAddr) -> Result<Split, PtError> {
        let (e, level, off) = self.find_leaf(va.0).ok_or(PtError::NotMapped { va })?;
        if level == 1 && run_shift_of(e) == 0 {
            return Err(PtError::CannotSplit { va });
        }
        let node_va = va.0 & !((1u64 << self.geo.table_shift(level)) - 1);
        Ok(self.split_entry(off, level, node_va, self.index(va.0, level)))
    }

    fn mappings_in(&self, va: VirtAddr, len: u64) -> Vec<Mapping> {
        let mut out = Vec::new();
        self.visit(va.0, len, &mut |m| {
            out.push(m);
            true
        });
        out
    }

    fn is_unmapped(&self, va: VirtAddr, len: u64) -> bool {
        let mut empty = true;
        self.visit(va.0, len, &mut |_| {
            empty = false;
            false
        });
        empty
    }

    fn memory_bytes(&self) -> u64 {
        self.stake.bytes()
    }

    fn stats(&self) -> PageTableStats {
        PageTableStats {
            tables_per_level: self.tables[1..=self.levels as usize].to_vec(),
            leaves_per_size: (0..31u8)
                .filter(|&s| self.leaves[s as usize] > 0)
                .filter_map(|s| Some((PageSize::from_shift(s)?, self.leaves[s as usize])))
                .collect(),
            memory_bytes: self.stake.bytes(),
            peak_memory_bytes: self.peak_memory,
            tables_allocated: self.allocated,
            tables_freed: self.freed,
            splits: self.splits,
        }
    }
}
