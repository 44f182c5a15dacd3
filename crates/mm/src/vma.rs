//! Address spaces: the VMAs of one process, with the protection, backing and
//! page-size wishes each region carries.
//!
//! Semantics follow Linux where the papers are silent: lengths round up to
//! 4K; a new mapping replaces whatever it overlaps (`MAP_FIXED`); changing
//! protection or advice on part of a VMA splits it; adjacent VMAs whose
//! attributes agree are merged (`vma_merge`), which matters to superpage
//! policies because a large page must fit inside one VMA.

use pagelab_core::{Advice, Backing, MapEvent, PageSize, Prot, Sharing, VirtAddr};
use serde::Serialize;
use std::collections::BTreeMap;

/// The smallest unit of a mapping.
pub const BASE: u64 = pagelab_core::Pfn::BYTES;

/// Linux's transparent-huge-page advice on a VMA (MADV_HUGEPAGE / MADV_NOHUGEPAGE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum ThpAdvice {
    /// No advice given.
    #[default]
    None,
    /// MADV_HUGEPAGE.
    Huge,
    /// MADV_NOHUGEPAGE.
    NoHuge,
}

/// The page order a region asked for (the `setregionorder` of Winwood et al. (OLS 2002)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct OrderRequest {
    /// log2 of the page size asked for, in bytes.
    pub shift: u8,
    /// Wait for that size rather than fall back to a smaller one.
    pub wait: bool,
}

/// One virtual memory area: `[start, end)`, page aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Vma {
    /// First byte.
    pub start: VirtAddr,
    /// One past the last byte.
    pub end: VirtAddr,
    /// Protection.
    pub prot: Prot,
    /// Anonymous, or a file from an offset (the offset of `start`).
    pub backing: Backing,
    /// Private (copy-on-write) or shared.
    pub sharing: Sharing,
    /// The page order the program asked for, if any.
    pub order: Option<OrderRequest>,
    /// MADV_HUGEPAGE / MADV_NOHUGEPAGE.
    pub thp: ThpAdvice,
    /// Created by the inference rule for traces without map events.
    pub inferred: bool,
}

impl Vma {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Never true: a VMA always covers at least one page.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whether `addr` lies inside.
    pub fn contains(&self, addr: VirtAddr) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// Whether the naturally aligned block of `bytes` holding `addr` lies inside.
    pub fn holds_aligned(&self, addr: VirtAddr, size: PageSize) -> bool {
        let lo = addr.align_down(size);
        lo >= self.start
            && lo
                .checked_add(size.bytes())
                .is_some_and(|hi| hi <= self.end)
    }

    /// The file offset of byte `addr`, for a file mapping.
    pub fn file_offset(&self, addr: VirtAddr) -> Option<u64> {
        match self.backing {
            Backing::File { offset, .. } => Some(offset + (addr - self.start)),
            Backing::Anon => None,
        }
    }

    /// The part of this VMA within `[lo, hi)`, with the file offset moved along.
    fn slice(&self, lo: VirtAddr, hi: VirtAddr) -> Vma {
        let mut v = *self;
        v.start = lo.max(self.start);
        v.end = hi.min(self.end);
        if let Backing::File { file_id, offset } = self.backing {
            v.backing = Backing::File {
                file_id,
                offset: offset + (v.start - self.start),
            };
        }
        v
    }

    /// Whether `next`, starting where this one ends, could be one VMA with it.
    fn merges_with(&self, next: &Vma) -> bool {
        let backing_continues = match (self.backing, next.backing) {
            (Backing::Anon, Backing::Anon) => true,
            (
                Backing::File {
                    file_id: a,
                    offset: oa,
                },
                Backing::File {
                    file_id: b,
                    offset: ob,
                },
            ) => a == b && oa + self.len() == ob,
            _ => false,
        };
        self.end == next.start
            && backing_continues
            && self.prot == next.prot
            && self.sharing == next.sharing
            && self.order == next.order
            && self.thp == next.thp
            && self.inferred == next.inferred
    }
}

/// What an address-space operation did not find.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmaError {
    /// The range holds no mapping at all.
    #[error("nothing is mapped in [{start:#x}, {end:#x})")]
    NothingMapped {
        /// First byte asked for.
        start: VirtAddr,
        /// One past the last byte asked for.
        end: VirtAddr,
    },
    /// The range is empty, wraps around, or starts unaligned.
    #[error("bad range [{start:#x}, +{len:#x}): {why}")]
    BadRange {
        /// First byte asked for.
        start: VirtAddr,
        /// Length asked for.
        len: u64,
        /// What is wrong.
        why: &'static str,
    },
}

/// The VMAs of one process, sorted and non-overlapping.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    vmas: BTreeMap<VirtAddr, Vma>,
    /// Start of the heap, set by the first brk, and its current end.
    heap: Option<(VirtAddr, VirtAddr)>,
}

/// `[start, start + len)` rounded out to whole pages; an error for an empty,
/// unaligned or wrapping range.
fn page_range(start: VirtAddr, len: u64) -> Result<(VirtAddr, VirtAddr), VmaError> {
    let bad = |why| VmaError::BadRange { start, len, why };
    if !start.is_aligned(PageSize::MIN) {
        return Err(bad("the start is not 4K aligned"));
    }
    if len == 0 {
        return Err(bad("the length is zero"));
    }
    let end = start
        .checked_add(len)
        .and_then(|e| e.checked_align_up(PageSize::MIN))
        .ok_or_else(|| bad("the range runs past the top of the address space"))?;
    Ok((start, end))
}

impl AddressSpace {
    /// An empty address space.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every VMA in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Vma> {
        self.vmas.values()
    }

    /// Number of VMAs.
    pub fn len(&self) -> usize {
        self.vmas.len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.vmas.is_empty()
    }

    /// The VMA holding `addr`.
    pub fn find(&self, addr: VirtAddr) -> Option<&Vma> {
        self.vmas
            .range(..=addr)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| v.contains(addr))
    }

    /// Maps a new region, replacing whatever it overlaps (as `MAP_FIXED` does).
    /// Returns the ranges that were unmapped to make room, whose pages the caller must free.
    pub fn map(&mut self, m: &MapEvent) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        let (start, end) = page_range(m.start, m.len)?;
        let removed = self.cut(start, end);
        self.insert(Vma {
            start,
            end,
            prot: m.prot,
            backing: m.backing,
            sharing: m.sharing,
            order: None,
            thp: ThpAdvice::None,
            inferred: false,
        });
        Ok(removed)
    }

    /// Unmaps `[start, start + len)`. Returns the ranges that were mapped
    /// (the caller frees their pages); an error if nothing was.
    pub fn unmap(
        &mut self,
        start: VirtAddr,
        len: u64,
    ) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        let (start, end) = page_range(start, len)?;
        let removed = self.cut(start, end);
        if removed.is_empty() {
            return Err(VmaError::NothingMapped { start, end });
        }
        Ok(removed)
    }

    /// Sets the protection of every mapped page in the range, splitting VMAs at
    /// its edges. Returns the ranges whose protection changed.
    pub fn protect(
        &mut self,
        start: VirtAddr,
        len: u64,
        prot: Prot,
    ) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        self.modify(start, len, |v| {
            let changed = v.prot != prot;
            v.prot = prot;
            changed
        })
    }

    /// Applies advice to every mapped page in the range, splitting VMAs at its
    /// edges. Returns the ranges affected: for `DontNeed` those whose pages the
    /// caller must drop; for the others those whose VMA attributes changed.
    pub fn advise(
        &mut self,
        start: VirtAddr,
        len: u64,
        advice: Advice,
    ) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        self.modify(start, len, |v| match advice {
            Advice::HugePage => std::mem::replace(&mut v.thp, ThpAdvice::Huge) != ThpAdvice::Huge,
            Advice::NoHugePage => {
                std::mem::replace(&mut v.thp, ThpAdvice::NoHuge) != ThpAdvice::NoHuge
            }
            Advice::PageOrder { shift, wait } => {
                let req = Some(OrderRequest { shift, wait });
                std::mem::replace(&mut v.order, req) != req
            }
            Advice::DontNeed => true,
            Advice::Other(_) => false,
        })
    }

    /// Moves the program break. The first call sets where the heap starts (an
    /// empty heap); later calls grow or shrink it. Returns the range unmapped by
    /// a shrink, whose pages the caller frees.
    pub fn brk(&mut self, end: VirtAddr) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        let Some((heap_start, old_end)) = self.heap else {
            self.heap = Some((end, end));
            return Ok(Vec::new());
        };
        let new_end = end.max(heap_start);
        let (old_top, new_top) = (
            old_end.align_up(PageSize::MIN),
            new_end.align_up(PageSize::MIN),
        );
        self.heap = Some((heap_start, new_end));
        if new_top > old_top {
            let removed = self.cut(old_top, new_top);
            let mut v = Vma {
                start: old_top,
                end: new_top,
                prot: Prot(Prot::READ | Prot::WRITE),
                backing: Backing::Anon,
                sharing: Sharing::Private,
                order: None,
                thp: ThpAdvice::None,
                inferred: false,
            };
            // Linux's brk (mm/mmap.c) grows only a VMA that starts at or above `start_brk`
            // (`vma_prev_limit(&vmi, mm->start_brk)`): `do_brk_flags` expands that one when it
            // ends at the old break and its flags agree, else makes a VMA of its own. So the
            // heap is never merged with the bss below `start_brk` (the two show apart in
            // /proc/PID/maps), and a THP size is suitable only where its aligned range lies
            // inside the heap itself (`thp_vma_suitable_order`).
            let floor = heap_start.align_up(PageSize::MIN);
            if let Some(prev) = self.vmas.range(..old_top).next_back().map(|(_, p)| *p) {
                if prev.start >= floor && prev.merges_with(&v) {
                    self.vmas.remove(&prev.start);
                    v.start = prev.start;
                }
            }
            self.vmas.insert(v.start, v);
            Ok(removed)
        } else if new_top < old_top {
            Ok(self.cut(new_top, old_top))
        } else {
            Ok(Vec::new())
        }
    }

    /// The rule for traces without map events: a reference outside every VMA
    /// creates an anonymous private VMA over the naturally aligned block of
    /// `granule` bytes holding it (read-write, plus execute for instruction
    /// fetches), merged with inferred neighbours, so contiguous touched blocks
    /// form one region. Returns the new VMA's range.
    pub fn infer(&mut self, addr: VirtAddr, granule: PageSize, exec: bool) -> (VirtAddr, VirtAddr) {
        let lo = addr.align_down(granule);
        let hi = lo.saturating_add(granule.bytes());
        // Only the parts of the block no real VMA covers.
        let mut prot = Prot::READ | Prot::WRITE;
        if exec {
            prot |= Prot::EXEC;
        }
        let (mut s, mut e) = (lo, hi);
        if let Some(prev) = self.vmas.range(..=addr).next_back().map(|(_, v)| *v) {
            if prev.end > s {
                s = prev.end;
            }
        }
        if let Some((&next, _)) = self.vmas.range(addr + 1..).next() {
            e = e.min(next);
        }
        let v = Vma {
            start: s,
            end: e,
            prot: Prot(prot),
            backing: Backing::Anon,
            sharing: Sharing::Private,
            order: None,
            thp: ThpAdvice::None,
            inferred: true,
        };
        self.insert(v);
        (s, e)
    }

    /// Checks the invariants: sorted, page aligned, non-empty, non-overlapping,
    /// keyed by start, and no two neighbours left unmerged (but the heap and a VMA
    /// ending where it starts, as `brk` leaves them).
    pub fn check(&self) -> Result<(), String> {
        let mut prev: Option<&Vma> = None;
        for (&k, v) in &self.vmas {
            if k != v.start
                || v.start >= v.end
                || !v.start.is_aligned(PageSize::MIN)
                || !v.end.is_aligned(PageSize::MIN)
            {
                return Err(format!("malformed VMA {v:?} under key {k:#x}"));
            }
            if let Some(p) = prev {
                if p.end > v.start {
                    return Err(format!("VMAs overlap: {p:?} and {v:?}"));
                }
                // The heap stands apart from a VMA below the break's start (`brk`).
                let heap = self.heap.map(|(s, _)| s.align_up(PageSize::MIN));
                if p.merges_with(v) && heap != Some(v.start) {
                    return Err(format!("VMAs left unmerged: {p:?} and {v:?}"));
                }
            }
            prev = Some(v);
        }
        Ok(())
    }

    /// Removes `[start, end)` from every VMA, splitting at the edges; returns the
    /// ranges that were mapped.
    fn cut(&mut self, start: VirtAddr, end: VirtAddr) -> Vec<(VirtAddr, VirtAddr)> {
        let hit: Vec<Vma> = self.overlapping(start, end).copied().collect();
        let mut removed = Vec::new();
        for v in hit {
            self.vmas.remove(&v.start);
            if v.start < start {
                let left = v.slice(v.start, start);
                self.vmas.insert(left.start, left);
            }
            if v.end > end {
                let right = v.slice(end, v.end);
                self.vmas.insert(right.start, right);
            }
            removed.push((v.start.max(start), v.end.min(end)));
        }
        removed
    }

    /// Applies `f` to the parts of VMAs inside the range (split off first), then
    /// re-merges; returns the ranges where `f` reported a change.
    fn modify(
        &mut self,
        start: VirtAddr,
        len: u64,
        mut f: impl FnMut(&mut Vma) -> bool,
    ) -> Result<Vec<(VirtAddr, VirtAddr)>, VmaError> {
        let (start, end) = page_range(start, len)?;
        let hit: Vec<Vma> = self.overlapping(start, end).copied().collect();
        if hit.is_empty() {
            return Err(VmaError::NothingMapped { start, end });
        }
        let mut changed = Vec::new();
        for v in hit {
            self.vmas.remove(&v.start);
            for part in [
                v.slice(v.start, start),
                v.slice(start, end),
                v.slice(end, v.end),
            ] {
                if part.start >= part.end {
                    continue;
                }
                let mut part = part;
                if part.start >= start && part.end <= end && f(&mut part) {
                    changed.push((part.start, part.end));
                }
                self.vmas.insert(part.start, part);
            }
        }
        // Re-merge around every piece touched.
        let keys: Vec<VirtAddr> = self
            .overlapping(start.saturating_sub(1), end.saturating_add(1))
            .map(|v| v.start)
            .collect();
        for k in keys {
            if let Some(v) = self.vmas.get(&k).copied() {
                self.vmas.remove(&k);
                self.insert(v);
            }
        }
        Ok(changed)
    }

    /// VMAs overlapping `[start, end)`, in address order.
    fn overlapping(&self, start: VirtAddr, end: VirtAddr) -> impl Iterator<Item = &Vma> {
        let first = self
            .vmas
            .range(..=start)
            .next_back()
            .map_or(start, |(&k, _)| k);
        self.vmas
            .range(first..end)
            .map(|(_, v)| v)
            .filter(move |v| v.end > start)
    }

    /// Inserts a VMA into free space, merging it with compatible neighbours.
    fn insert(&mut self, mut v: Vma) {
        if let Some(prev) = self.vmas.range(..v.start).next_back().map(|(_, p)| *p) {
            if prev.merges_with(&v) {
                self.vmas.remove(&prev.start);
                v.start = prev.start;
                v.backing = prev.backing;
            }
        }
        if let Some(next) = self.vmas.get(&v.end).copied() {
            if v.merges_with(&next) {
                self.vmas.remove(&next.start);
                v.end = next.end;
            }
        }
        self.vmas.insert(v.start, v);
    }
}

#[cfg(test)]
#[path = "vma_tests.rs"]
mod tests;
