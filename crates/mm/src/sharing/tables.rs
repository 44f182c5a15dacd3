//! Page-table pages: which tables each process has at every level, and the
//! totals (own and shared tables) now and at the peak.

use super::process::Process;
use crate::pagetable::{Geometry, MAX_LEVELS};

/// Totals over every process and shared table.
#[derive(Clone, Debug, Default)]
pub(crate) struct Totals {
    /// Tables by level (index level - 1), own and shared.
    pub tables: [u64; MAX_LEVELS],
    /// Shared tables by level.
    pub shared: [u64; MAX_LEVELS],
    pub bytes: u64,
    pub bytes_peak: u64,
    pub tables_at_peak: [u64; MAX_LEVELS],
    /// The most bytes any one process's own tables took.
    pub process_max: u64,
}

/// Page-table bookkeeping for one geometry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tables {
    pub g: Geometry,
}

impl Tables {
    fn bump(&self, t: &mut Totals, level: u8, up: bool) {
        let i = level as usize - 1;
        let b = self.g.table_bytes(level);
        if up {
            t.tables[i] += 1;
            t.bytes += b;
            if t.bytes > t.bytes_peak {
                t.bytes_peak = t.bytes;
                t.tables_at_peak = t.tables;
            }
        } else {
            t.tables[i] -= 1;
            t.bytes -= b;
        }
    }

    /// A table of `level` owned by `p` was allocated or freed.
    pub fn own(&self, p: &mut Process, t: &mut Totals, level: u8, up: bool) {
        let b = self.g.table_bytes(level);
        if up {
            p.tables[level as usize - 1] += 1;
            p.bytes += b;
            t.process_max = t.process_max.max(p.bytes);
        } else {
            p.tables[level as usize - 1] -= 1;
            p.bytes -= b;
        }
        self.bump(t, level, up);
    }

    /// A shared table of `level` was allocated or freed.
    pub fn shared(&self, t: &mut Totals, level: u8, up: bool) {
        if up {
            t.shared[level as usize - 1] += 1;
        } else {
            t.shared[level as usize - 1] -= 1;
        }
        self.bump(t, level, up);
    }

    /// Entry `index` of `level` (level 2 and up) became present in `p`'s
    /// tables: the table holding it, and the ones above, may be new.
    pub fn entry_added(&self, p: &mut Process, t: &mut Totals, level: u8, index: u64) {
        let (mut level, mut index) = (level, index);
        while level < self.g.levels() {
            let table = index >> self.g.bits(level);
            let n = p.entries[level as usize - 1].entry(table).or_insert(0);
            *n += 1;
            if *n > 1 {
                return;
            }
            self.own(p, t, level, true);
            (level, index) = (level + 1, table);
        }
    }

    /// Entry `index` of `level` went away; empty tables are freed upwards.
    pub fn entry_removed(&self, p: &mut Process, t: &mut Totals, level: u8, index: u64) {
        let (mut level, mut index) = (level, index);
        while level < self.g.levels() {
            let table = index >> self.g.bits(level);
            let map = &mut p.entries[level as usize - 1];
            let Some(n) = map.get_mut(&table) else { return };
            *n -= 1;
            if *n > 0 {
                return;
            }
            map.remove(&table);
            self.own(p, t, level, false);
            (level, index) = (level + 1, table);
        }
    }

    /// Base pages per level-1 table.
    #[inline]
    pub fn block_shift(&self) -> u32 {
        self.g.bits(1) as u32
    }

    /// Base page `vpn` is about to become present in `p`'s own tables: a new
    /// level-1 table if no other page of its block is.
    #[inline]
    pub fn base_leaf_added(&self, p: &mut Process, t: &mut Totals, vpn: u64) {
        let sh = self.block_shift();
        let mask = (1u64 << sh) - 1;
        if vpn & mask != 0 && p.pop[0].extend_cursor(vpn) {
            return;
        }
        let has_table = (vpn & mask != 0 && p.pop[0].contains(vpn - 1))
            || p.pop[0].any_in(vpn & !mask, (vpn | mask) + 1);
        p.pop[0].insert(vpn);
        if !has_table {
            self.own(p, t, 1, true);
            self.entry_added(p, t, 2, vpn >> sh);
        }
    }

    /// Base pages `ranges` were removed from `p`'s own tables: free the
    /// level-1 tables left empty.
    pub fn base_leaves_removed(&self, p: &mut Process, t: &mut Totals, ranges: &[(u64, u64)]) {
        let sh = self.block_shift();
        let mut blocks: Vec<u64> = Vec::new();
        for &(a, b) in ranges {
            for blk in (a >> sh)..=((b - 1) >> sh) {
                if blocks.last() != Some(&blk) {
                    blocks.push(blk);
                }
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        for blk in blocks {
            if !p.pop[0].any_in(blk << sh, (blk + 1) << sh) {
                self.own(p, t, 1, false);
                self.entry_removed(p, t, 2, blk);
            }
        }
    }

    /// A new process: its root, and with `prealloc` the tables below the
    /// root that cover user space up to `user_top`.
    pub fn process_born(&self, p: &mut Process, t: &mut Totals, prealloc: bool, user_top: u64) {
        let top = self.g.levels();
        self.own(p, t, top, true);
        if prealloc && top >= 2 {
            let below = top - 1;
            let span = self.g.table_shift(below);
            for i in 0..user_top.div_ceil(1u64 << span) {
                // A pin: one entry that is never removed while the process lives.
                self.entry_added(p, t, below, i << self.g.bits(below));
            }
        }
    }

    /// The process is gone: whatever tables it still owns are freed.
    pub fn process_died(&self, p: &mut Process, t: &mut Totals) {
        for level in 1..=self.g.levels() {
            while p.tables[level as usize - 1] > 0 {
                self.own(p, t, level, false);
            }
        }
    }
}
