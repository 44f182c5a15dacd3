//! Large folios that stay whole after their mapping was split, as Linux keeps them
//! (`Machine::set_keep_folios`, on under `linux-thp`).
//!
//! In Linux a large folio and the page-table entries that map it are apart. Unmapping part
//! of an anonymous large folio (munmap, MADV_DONTNEED, a brk shrink) zaps only its PTEs
//! (`zap_present_ptes` → `folio_remove_rmap_ptes`); a PMD-mapped one has its PMD split
//! first (`split_huge_pmd`). `__folio_remove_rmap` then finds the folio partly mapped and
//! queues it for a deferred split (`deferred_split_folio`): the folio stays whole, its
//! unmapped pages allocated, until the deferred-split shrinker (`deferred_split_scan`,
//! run by reclaim) splits it and frees them, or until its last mapped page goes and it is
//! freed whole. mprotect of part of a folio changes PTEs only (after `split_huge_pmd` for a
//! PMD one); a copy-on-write fault on a PMD-mapped folio splits the PMD, not the folio.
//! `/proc/kpageflags` shows such a folio as one (its head `KPF_COMPOUND_HEAD`, the rest
//! `KPF_COMPOUND_TAIL`), so the lab counts it at its whole size.
//!
//! The model keeps, per such folio, its size and the frames no mapping holds ("holes").
//! The frames stay one block of the allocator and one LRU page until the folio is freed
//! whole or split ([`Machine::split_frames`], [`Machine::split_deferred`]).

use super::{frames_order, Machine, MmError};
use crate::phys::{FrameAllocator, ZoneId};
use pagelab_core::{Order, PageSize, Pfn};

/// A large folio mapped by smaller pages than itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptFolio {
    /// Its size.
    pub size: PageSize,
    /// Its frames (4K units) that no mapping holds, unsorted.
    pub holes: Vec<u64>,
}

impl Machine {
    /// Whether a page whose mapping is split keeps its folio whole (Linux, see the module);
    /// off by default: the split splits the frames too (the other policies' systems).
    pub fn set_keep_folios(&mut self, on: bool) {
        self.keep_folios = on;
    }

    /// Whether a page whose mapping is split keeps its folio whole (`linux-thp`).
    pub fn keeps_folios(&self) -> bool {
        self.keep_folios
    }

    /// The folio that holds frame `pfn` (4K units) and is mapped by smaller pages than
    /// itself: its head frame and size.
    pub fn kept_folio_of(&self, pfn: Pfn) -> Option<(Pfn, PageSize)> {
        let (&head, f) = self.kept.range(..=pfn.0).next_back()?;
        (pfn.0 < head + f.size.frames()).then_some((Pfn(head), f.size))
    }

    /// Every folio mapped by smaller pages than itself, by head frame (4K units).
    pub fn kept_folios(&self) -> impl Iterator<Item = (Pfn, &KeptFolio)> + '_ {
        self.kept.iter().map(|(&h, f)| (Pfn(h), f))
    }

    /// Frames of partly unmapped folios that no mapping holds, still allocated.
    pub fn kept_hole_frames(&self) -> u64 {
        self.kept.values().map(|f| f.holes.len() as u64).sum()
    }

    /// A page-table split of the `from` page on frames `pfn` with the folio kept whole:
    /// the folio is noted (a zero page is nobody's folio; a piece of a folio noted already
    /// belongs to that one).
    pub(super) fn keep_split(&mut self, pfn: Pfn, from: PageSize) {
        if !self.is_zero(pfn) && self.kept_folio_of(pfn).is_none() {
            self.kept.insert(
                pfn.0,
                KeptFolio {
                    size: from,
                    holes: Vec::new(),
                },
            );
        }
    }

    /// Frees the `size` piece at `pfn` of the kept folio headed by `head`: its frames
    /// become holes, and the folio is freed whole (one block, off the LRU) once it has no
    /// frame mapped.
    pub(super) fn free_in_kept(
        &mut self,
        head: Pfn,
        pfn: Pfn,
        size: PageSize,
    ) -> Result<(), MmError> {
        let f = self.kept.get_mut(&head.0).expect("a kept folio");
        f.holes.extend(pfn.0..pfn.0 + size.frames());
        if (f.holes.len() as u64) < f.size.frames() {
            return Ok(());
        }
        let whole = f.size;
        self.kept.remove(&head.0);
        self.res.forget(&mut self.phys, head, whole.frames());
        self.free_frames(head, whole)
    }

    /// Frees the holes of the kept folio at `pfn` when its frames are split (the folio is
    /// no longer one): its mapped pages stay, each one frame.
    pub(super) fn free_kept_holes(&mut self, pfn: Pfn) -> Result<(), MmError> {
        let Some(f) = self.kept.remove(&pfn.0) else {
            return Ok(());
        };
        let temp = self.free_temp;
        for h in f.holes {
            self.res.forget(&mut self.phys, Pfn(h), 1);
            self.phys.free_temp(Pfn(h), Order(0), temp)?;
        }
        Ok(())
    }

    /// The deferred-split shrinker (`deferred_split_scan`, run by reclaim): splits every
    /// partly unmapped folio (in `zone`, or anywhere) into base pages, its LRU page too,
    /// and frees the pages no mapping holds. Returns how many folios it split.
    pub fn split_deferred(&mut self, zone: Option<ZoneId>) -> Result<u64, MmError> {
        let heads: Vec<(Pfn, PageSize)> = self
            .kept
            .iter()
            .filter(|(&h, f)| {
                !f.holes.is_empty() && zone.is_none_or(|z| self.phys.zone_of(Pfn(h)) == Some(z))
            })
            .map(|(&h, f)| (Pfn(h), f.size))
            .collect();
        for &(head, size) in &heads {
            self.split_kept(head, size)?;
        }
        Ok(heads.len() as u64)
    }

    /// Whether frame `pfn` heads a folio kept whole with pages no mapping holds.
    pub fn partly_mapped(&self, pfn: Pfn) -> bool {
        self.kept.get(&pfn.0).is_some_and(|f| !f.holes.is_empty())
    }

    /// Splits the kept `size` folio headed by `head` into base pages, its LRU page too,
    /// freeing the pages no mapping holds; counted as a split by reclaim.
    pub fn split_kept(&mut self, head: Pfn, size: PageSize) -> Result<(), MmError> {
        let base = self.base();
        self.res.split_anon(&mut self.phys, head, base);
        self.split_frames(head, size)?;
        self.stats.reclaim_splits += 1;
        Ok(())
    }

    /// Splits the allocator's block of a `size` page at `pfn` into frames, unless split.
    pub(super) fn split_block(&mut self, pfn: Pfn, size: PageSize) -> Result<(), MmError> {
        let order = frames_order(size);
        if order.0 > 0 && self.allocated_order(pfn) == Some(order) {
            self.phys.split(pfn, order)?;
        }
        Ok(())
    }
}
