//! Range operations of the radix table: protect with splitting, split, and
//! visiting the mappings of a range.

use super::{flags_of, leaf_entry, payload, run_shift_of, table_entry, RadixPageTable, LEAF};
use crate::pagetable::{Mapping, ProtectReport, PteFlags, Split};
use pagelab_core::{BasePfn, PageSize, VirtAddr};

const FLAGS_MASK: u64 = 0xff << super::FLAGS_SHIFT;

impl RadixPageTable {
    /// The index range `[first, last]` of the entries of a table at `level`
    /// starting at `node_va` that meet `[lo, hi)`, if any.
    fn span(&self, level: u8, node_va: u64, lo: u64, hi: u64) -> Option<(usize, usize)> {
        let es = self.shift[level as usize];
        let node_end = node_va + (1u64 << self.geo.table_shift(level));
        let (first, last) = (lo.max(node_va), hi.min(node_end));
        (first < last).then(|| {
            (
                ((first - node_va) >> es) as usize,
                ((last - 1 - node_va) >> es) as usize,
            )
        })
    }

    /// Sets `flags` on every page in `range` under the table at `off`,
    /// splitting pages partly inside.
    pub(super) fn protect_node(
        &mut self,
        off: usize,
        level: u8,
        node_va: u64,
        range: (u64, u64),
        flags: PteFlags,
        report: &mut ProtectReport,
    ) {
        let Some((mut i, last)) = self.span(level, node_va, range.0, range.1) else {
            return;
        };
        let es = self.shift[level as usize];
        while i <= last {
            let e = self.pool[off + i];
            if e == 0 {
                i += 1;
                continue;
            }
            if e & LEAF == 0 {
                let child_va = node_va + ((i as u64) << es);
                self.protect_node(
                    payload(e) as usize,
                    level - 1,
                    child_va,
                    range,
                    flags,
                    report,
                );
                i += 1;
                continue;
            }
            let run = 1usize << run_shift_of(e);
            let rs = i & !(run - 1);
            let start = node_va + ((rs as u64) << es);
            let end = start + ((run as u64) << es);
            if range.0 <= start && end <= range.1 {
                for slot in &mut self.pool[off + rs..off + rs + run] {
                    *slot = (*slot & !FLAGS_MASK) | (flags.0 as u64) << super::FLAGS_SHIFT;
                }
                report.updated += 1;
                i = rs + run;
            } else {
                // Entry `i` becomes smaller leaves or a table; look at it again.
                let split = self.split_entry(off, level, node_va, i);
                report.splits.push(split);
            }
        }
    }

    /// Splits the leaf whose entry `i` is in the table at `off` (level
    /// `level`, mapping from `node_va`): a run into its entries, a single
    /// leaf into a subtree of leaves of the next lower leaf level.
    pub(super) fn split_entry(&mut self, off: usize, level: u8, node_va: u64, i: usize) -> Split {
        let e = self.pool[off + i];
        let es = self.shift[level as usize];
        let run_shift = run_shift_of(e);
        let run = 1usize << run_shift;
        let rs = i & !(run - 1);
        let from = self.leaf_size_of(e, level);
        let (pfn, flags) = (payload(e), flags_of(e));
        let to_level = if run_shift > 0 {
            let frames = self.frames_at(level);
            for (j, slot) in self.pool[off + rs..off + rs + run].iter_mut().enumerate() {
                *slot = leaf_entry(pfn + j as u64 * frames, flags, 0);
            }
            level
        } else {
            let target = self.geo.lower_leaf_level(level);
            let child = self.build_full(level - 1, target, pfn, flags);
            self.pool[off + i] = table_entry(child);
            target
        };
        let to = PageSize::from_shift(self.shift[to_level as usize] as u8).unwrap_or(from);
        let pieces = 1u64 << (from.shift() - to.shift());
        self.count_leaf(from, false);
        self.count_leaves(to, pieces);
        self.splits += 1;
        Split {
            start: VirtAddr(node_va + ((rs as u64) << es)),
            from,
            to,
            pieces,
        }
    }

    /// Base frames one entry at `level` maps.
    fn frames_at(&self, level: u8) -> u64 {
        1 << (self.shift[level as usize] - self.geo.base().shift())
    }

    /// A full table at `level` mapping frames from `pfn` with leaves at `target`.
    fn build_full(&mut self, level: u8, target: u8, pfn: u64, flags: PteFlags) -> usize {
        let off = self.alloc_table(level);
        let n = self.geo.entries(level) as usize;
        let frames = self.frames_at(level);
        for j in 0..n {
            let first = pfn + j as u64 * frames;
            self.pool[off + j] = if level == target {
                leaf_entry(first, flags, 0)
            } else {
                table_entry(self.build_full(level - 1, target, first, flags))
            };
        }
        self.pool[off - 1] = n as u64;
        off
    }

    /// Calls `f` on every mapping meeting `[va, va + len)` in address order
    /// until it returns false.
    pub(super) fn visit(&self, va: u64, len: u64, f: &mut dyn FnMut(Mapping) -> bool) {
        let limit = 1u64 << self.va_bits;
        let hi = va.saturating_add(len).min(limit);
        if va < hi {
            self.visit_node(self.root, self.levels, 0, (va, hi), f);
        }
    }

    fn visit_node(
        &self,
        off: usize,
        level: u8,
        node_va: u64,
        range: (u64, u64),
        f: &mut dyn FnMut(Mapping) -> bool,
    ) -> bool {
        let Some((mut i, last)) = self.span(level, node_va, range.0, range.1) else {
            return true;
        };
        let es = self.shift[level as usize];
        while i <= last {
            let e = self.pool[off + i];
            if e == 0 {
                i += 1;
                continue;
            }
            if e & LEAF == 0 {
                let child_va = node_va + ((i as u64) << es);
                if !self.visit_node(payload(e) as usize, level - 1, child_va, range, f) {
                    return false;
                }
                i += 1;
                continue;
            }
            let run = 1usize << run_shift_of(e);
            let rs = i & !(run - 1);
            let m = Mapping {
                start: VirtAddr(node_va + ((rs as u64) << es)),
                size: self.leaf_size_of(e, level),
                pfn: BasePfn(payload(e)),
                flags: flags_of(e),
            };
            if !f(m) {
                return false;
            }
            i = rs + run;
        }
        true
    }
}
