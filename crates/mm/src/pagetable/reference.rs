//! The reference page table: a sorted map from page start to page, with the
//! same contract as the radix table and none of its structure. Tests compare
//! the two; its table count is computed from address prefixes, independently
//! of any tree.

use super::{
    Geometry, Mapping, PageTable, PageTableStats, ProtectReport, PtError, PteFlags, Split,
    Translation,
};
use pagelab_core::{BasePfn, PageSize, VirtAddr};
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;

/// A page table as a `BTreeMap` from page start to (size, first frame, flags).
///
/// Slow and obviously right; its [`PageTable::memory_bytes`] counts, per
/// level, the distinct address prefixes that need a table there.
#[derive(Clone, Debug)]
pub struct ReferencePageTable {
    geo: Geometry,
    pages: BTreeMap<u64, (PageSize, BasePfn, PteFlags)>,
    splits: u64,
}

impl ReferencePageTable {
    /// An empty table of the given geometry.
    pub fn new(geo: Geometry) -> ReferencePageTable {
        ReferencePageTable {
            geo,
            pages: BTreeMap::new(),
            splits: 0,
        }
    }

    fn mapping(start: u64, v: &(PageSize, BasePfn, PteFlags)) -> Mapping {
        Mapping {
            start: VirtAddr(start),
            size: v.0,
            pfn: v.1,
            flags: v.2,
        }
    }

    fn containing(&self, va: u64) -> Option<Mapping> {
        let (&start, v) = self.pages.range(..=va).next_back()?;
        (va - start < v.0.bytes()).then(|| Self::mapping(start, v))
    }

    /// Tables in use per level (index 0 is level 1): a mapping whose leaf is at
    /// level `L` needs, at every level `l >= L`, the table that maps the
    /// prefix `start >> table_shift(l)`; the root always exists.
    pub fn tables_per_level(&self) -> Vec<u64> {
        let levels = self.geo.levels();
        let mut prefixes = vec![FxHashSet::default(); levels as usize];
        prefixes[levels as usize - 1].insert(0u64);
        for (&start, v) in &self.pages {
            let Some(p) = self.geo.placement(v.0) else {
                continue;
            };
            for l in p.level..=levels {
                prefixes[l as usize - 1].insert(start >> self.geo.table_shift(l));
            }
        }
        prefixes.iter().map(|s| s.len() as u64).collect()
    }

    /// Splits `m` into the pieces the geometry gives; `None` for a base page.
    fn split_mapping(&mut self, m: Mapping) -> Option<(Split, Vec<Mapping>)> {
        let (to, pieces) = self.geo.split_of(m.size)?;
        self.pages.remove(&m.start.0);
        let frames = self.geo.frames(to);
        let parts: Vec<Mapping> = (0..pieces)
            .map(|j| Mapping {
                start: VirtAddr(m.start.0 + j * to.bytes()),
                size: to,
                pfn: BasePfn(m.pfn.0 + j * frames),
                flags: m.flags,
            })
            .collect();
        for p in &parts {
            self.pages.insert(p.start.0, (p.size, p.pfn, p.flags));
        }
        self.splits += 1;
        let split = Split {
            start: m.start,
            from: m.size,
            to,
            pieces,
        };
        Some((split, parts))
    }

    fn protect_one(
        &mut self,
        m: Mapping,
        range: (u64, u64),
        flags: PteFlags,
        report: &mut ProtectReport,
    ) {
        let end = m.start.0 + m.size.bytes();
        if end <= range.0 || m.start.0 >= range.1 {
            return;
        }
        if range.0 <= m.start.0 && end <= range.1 {
            self.pages.insert(m.start.0, (m.size, m.pfn, flags));
            report.updated += 1;
        } else if let Some((split, parts)) = self.split_mapping(m) {
            report.splits.push(split);
            for p in parts {
                self.protect_one(p, range, flags, report);
            }
        }
    }
}

impl PageTable for ReferencePageTable {
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
        self.geo.check_page(va, pfn, size)?;
        let end = va.0 + size.bytes();
        if let Some((&start, v)) = self.pages.range(..end).next_back() {
            if start + v.0.bytes() > va.0 {
                return Err(PtError::Overlap { va, size });
            }
        }
        self.pages.insert(va.0, (size, pfn, flags));
        Ok(())
    }

    fn unmap(&mut self, va: VirtAddr, size: PageSize) -> Result<Mapping, PtError> {
        self.geo.check_page(va, BasePfn(0), size)?;
        let found = self.containing(va.0).ok_or(PtError::NotMapped { va })?;
        if found.start != va || found.size != size {
            return Err(PtError::SizeMismatch { va, size, found });
        }
        self.pages.remove(&va.0);
        Ok(found)
    }

    fn walk(&self, va: VirtAddr) -> Option<Translation> {
        let m = self.containing(va.0)?;
        let level = self.geo.placement(m.size)?.level;
        Some(Translation {
            start: m.start,
            size: m.size,
            pfn: m.pfn,
            flags: m.flags,
            levels: self.geo.levels() - level + 1,
        })
    }

    /// The root, then every level whose table on the path to `va` exists: a
    /// table at level `l` exists when a mapping in its span has its leaf at
    /// level `l` or below.
    fn walk_levels(&self, va: VirtAddr) -> u8 {
        if va.0 >> self.geo.va_bits() != 0 {
            return 0;
        }
        if let Some(t) = self.walk(va) {
            return t.levels;
        }
        let mut touched = 1;
        for l in (1..self.geo.levels()).rev() {
            let shift = self.geo.table_shift(l);
            let start = VirtAddr(va.0 >> shift << shift);
            let needs = |m: &Mapping| self.geo.placement(m.size).is_some_and(|p| p.level <= l);
            if !self.mappings_in(start, 1 << shift).iter().any(needs) {
                break;
            }
            touched += 1;
        }
        touched
    }

    fn protect(
        &mut self,
        va: VirtAddr,
        len: u64,
        flags: PteFlags,
    ) -> Result<ProtectReport, PtError> {
        let end = self.geo.check_range(va, len)?;
        let mut report = ProtectReport::default();
        for m in self.mappings_in(va, len) {
            self.protect_one(m, (va.0, end), flags, &mut report);
        }
        Ok(report)
    }

    fn split(&mut self, va: VirtAddr) -> Result<Split, PtError> {
        let m = self.containing(va.0).ok_or(PtError::NotMapped { va })?;
        let (split, _) = self.split_mapping(m).ok_or(PtError::CannotSplit { va })?;
        Ok(split)
    }

    fn mappings_in(&self, va: VirtAddr, len: u64) -> Vec<Mapping> {
        let hi = va.0.saturating_add(len).min(1u64 << self.geo.va_bits());
        if va.0 >= hi {
            return Vec::new();
        }
        let first = self.containing(va.0).filter(|m| m.start.0 < va.0);
        first
            .into_iter()
            .chain(
                self.pages
                    .range(va.0..hi)
                    .map(|(&s, v)| Self::mapping(s, v)),
            )
            .collect()
    }

    fn memory_bytes(&self) -> u64 {
        let per = self.tables_per_level();
        (1..=self.geo.levels())
            .map(|l| per[l as usize - 1] * self.geo.table_bytes(l))
            .sum()
    }

    /// Peak memory and table allocation counters are not tracked (0).
    fn stats(&self) -> PageTableStats {
        let mut leaves_per_size = BTreeMap::new();
        for v in self.pages.values() {
            *leaves_per_size.entry(v.0).or_insert(0) += 1;
        }
        PageTableStats {
            tables_per_level: self.tables_per_level(),
            leaves_per_size,
            memory_bytes: self.memory_bytes(),
            splits: self.splits,
            ..PageTableStats::default()
        }
    }
}
