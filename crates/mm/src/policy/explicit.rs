//! `explicit`: each region gets the page size it asked for with the
//! `setregionorder` advice of Winwood et al. (OLS 2002) (sections 3.2.3 and 4.8), here
//! `Advice::PageOrder { shift, wait }`, stored in [`Vma::order`].
//!
//! - A region without a request gets base pages.
//! - A request is rounded down to the largest size the page table maps
//!   (`rounded_requests` counts those that were not such a size), as the
//!   paper's `pgorder_supported` check would.
//! - **Best effort** (`wait: false`): the largest size not above the request
//!   whose naturally aligned block holds the fault address, lies inside the
//!   VMA and has no page mapped, and that can be allocated now; an allocation
//!   that fails counts `fallback` for that size and the next smaller size is
//!   tried (4.8: "the largest supported order that contains the fault address,
//!   no mapped pages, and is less than or equal to the desired order").
//! - **Wait** (`wait: true`): the requested size, or the largest below it
//!   whose block lies inside the VMA (a page never maps beyond its region).
//!   Pages already mapped in that block are copied into the new page and
//!   freed (3.2.3: "copying any existing pages to the newly allocated
//!   superpage"; a promotion, `copied_bytes`). When no free block of the size
//!   exists the fault stalls (`stalls`) while the block is assembled by
//!   compaction, modelled below; when it cannot be assembled (`wait_failed`)
//!   the fault falls back as best effort would.
//!
//! Compaction (the model of the stall): candidate blocks are the naturally
//! aligned physical blocks of the wanted order in the dma32 and normal zones
//! (the large zone holds large pages only) whose allocated frames are all
//! movable: mapped exactly once, by an anonymous VMA, as pages smaller than
//! the block (frames of the page cache, of shared mappings or of pages the
//! size of the block stay where they are). The candidate with the fewest
//! allocated frames wins (lowest address on ties); its pages are migrated to
//! free frames elsewhere, largest first, each copied whole (`copied_bytes`,
//! `migrated_pages`), a page that finds no free block of its own size being
//! split and moved as base pages (a demotion, `migration_splits`, as Linux's
//! `migrate_pages` splits a THP). The block is then free and is allocated.
//! Compaction needs at least the block's worth of free frames outside the
//! large zone; with fewer the wait fails (reclaim runs after the fault, as
//! kswapd, not to make room for compaction). The
//! stall's duration is not modelled; its work is (the bytes copied). The TLB
//! model keeps entries by virtual page only, so moving a page needs no flush;
//! a page split while migrating may leave a stale larger entry.

use super::eager::map_largest;
use super::Policy;
use crate::machine::{frames_order, Machine, MmError, PerSize};
use crate::pagetable::{Geometry, PageTable, PhysMapping, PteFlags};
use crate::phys::{BuddyAllocator, FrameAllocator, ZoneKind};
use crate::vma::Vma;
use pagelab_core::{Backing, Order, PageSize, Pfn, VirtAddr};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// What the policy counted.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExplicitCounters {
    /// Faults in regions without a page-order request (mapped with base pages).
    pub unrequested_faults: u64,
    /// Faults in regions with a request.
    pub requested_faults: u64,
    /// Of those, faults whose request was not a size the page table maps.
    pub rounded_requests: u64,
    /// Of those, faults mapped at the (rounded) requested size.
    pub granted: u64,
    /// Of those, faults mapped below it (VMA edge, mapped pages, no memory).
    pub below_request: u64,
    /// Pages allocated at faults, per size.
    pub alloc: PerSize,
    /// Allocations that failed, per size.
    pub fallback: PerSize,
    /// Wait faults that found no free block of the size and compacted.
    pub stalls: u64,
    /// Stalls that assembled the block.
    pub compactions: u64,
    /// Pages migrated by compaction.
    pub migrated_pages: u64,
    /// Bytes migrated by compaction.
    pub compaction_copied_bytes: u64,
    /// Migrated pages split to base pages for want of a free block of their size.
    pub migration_splits: u64,
    /// Bytes of smaller pages copied into a waited-for page (its promotions).
    pub collapse_copied_bytes: u64,
    /// Wait faults whose page could not be assembled (fell back as best effort).
    pub wait_failed: u64,
}

/// The policy and its counters.
#[derive(Clone, Debug, Default)]
pub struct ExplicitPolicy {
    c: ExplicitCounters,
}

impl ExplicitPolicy {
    /// A fresh policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters.
    pub fn counts(&self) -> &ExplicitCounters {
        &self.c
    }

    /// The wait path: the largest of `sizes` (largest first) that lies in the
    /// VMA, assembled by compaction if need be, pages already in its block
    /// copied into it.
    fn wait_fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        sizes: &[PageSize],
    ) -> Result<PageSize, MmError> {
        let i = sizes
            .iter()
            .position(|&s| vma.holds_aligned(addr, s))
            .unwrap_or(sizes.len() - 1);
        let size = sizes[i];
        let mut pfn = m.alloc_frames(size);
        if pfn.is_none() && size > m.base() {
            self.c.stalls += 1;
            pfn = self.compact(m, size)?;
        }
        let Some(pfn) = pfn else {
            self.c.fallback.add(size, 1);
            if size > m.base() {
                self.c.wait_failed += 1;
            }
            let (alloc, fallback) = (&mut self.c.alloc, &mut self.c.fallback);
            return map_largest(m, pid, vma, addr, &sizes[i + 1..], alloc, fallback);
        };
        let va = addr.align_down(size);
        let copied: u64 = m
            .proc_mut(pid)
            .pt
            .mappings_in(va, size.bytes())
            .iter()
            .map(|p| p.size.bytes())
            .sum();
        if copied > 0 {
            for r in m.unmap_range(pid, va, va + size.bytes())? {
                m.free_frames(r.pfn, r.size)?;
            }
            m.stats.promotions += 1;
            m.stats.copied_bytes += copied;
            self.c.collapse_copied_bytes += copied;
        }
        m.map(pid, va, pfn, size, PteFlags::from_prot(vma.prot), false)?;
        m.stats.zeroed_bytes += size.bytes() - copied;
        m.count_fault(size);
        self.c.alloc.add(size, 1);
        Ok(size)
    }

    /// Assembles a free block for a `size` page by migrating the pages of the
    /// least-populated movable candidate block; see the module docs.
    fn compact(&mut self, m: &mut Machine, size: PageSize) -> Result<Option<Pfn>, MmError> {
        let k = frames_order(size).0;
        let small_free: u64 = m
            .phys
            .zones()
            .iter()
            .filter(|z| z.kind != ZoneKind::Large)
            .map(|z| z.buddy.free_frames())
            .sum();
        if k > m.phys.max_order().0 || small_free < 1 << k {
            return Ok(None);
        }
        let owners = movable_pages(m, k);
        let mut blocks: BTreeMap<u64, u64> = BTreeMap::new();
        for (&pfn, &(frames, _)) in &owners {
            *blocks.entry(pfn >> k).or_default() += frames;
        }
        // A pinned page anywhere in a block rules it out.
        let pinned: Vec<u64> = owners
            .iter()
            .filter(|(_, o)| o.1.is_none())
            .map(|(&pfn, _)| pfn >> k)
            .collect();
        for b in pinned {
            blocks.remove(&b);
        }
        let mut candidates: Vec<(u64, u64)> = blocks.into_iter().map(|(b, n)| (n, b)).collect();
        candidates.sort_unstable();
        for (mapped, b) in candidates {
            let head = b << k;
            let Some(buddy) = small_zone_holding(m, head, k) else {
                continue;
            };
            if allocated_frames(buddy, head, k) != mapped {
                continue; // frames nobody maps (page cache, reservations) are pinned
            }
            let victims: Vec<(u32, PhysMapping)> = owners
                .range(head..head + (1 << k))
                .filter_map(|(_, o)| o.1)
                .collect();
            return self.migrate(m, size, victims);
        }
        Ok(None)
    }

    /// Moves `victims` out of their block, allocates the block as a `size`
    /// page and puts the victims back elsewhere, largest first.
    fn migrate(
        &mut self,
        m: &mut Machine,
        size: PageSize,
        mut victims: Vec<(u32, PhysMapping)>,
    ) -> Result<Option<Pfn>, MmError> {
        for (pid, v) in &victims {
            for r in m.unmap_range(*pid, v.start, v.start + v.size.bytes())? {
                m.free_frames(r.pfn, r.size)?;
            }
        }
        let block = m.alloc_frames(size);
        victims.sort_by_key(|(_, v)| (Reverse(v.size), v.start));
        for (pid, v) in &victims {
            self.place(m, *pid, v)?;
            self.c.migrated_pages += 1;
            self.c.compaction_copied_bytes += v.size.bytes();
            m.stats.copied_bytes += v.size.bytes();
        }
        // The block cannot be missed (no free block of its order existed, so
        // the freed one is the only one), unless a zone is kept out of the
        // fallback order: then the copies were wasted and the wait fails.
        if block.is_some() {
            self.c.compactions += 1;
        }
        Ok(block)
    }

    /// Maps a migrated page at new frames, split into base pages when no
    /// free block of its size is left.
    fn place(&mut self, m: &mut Machine, pid: u32, v: &PhysMapping) -> Result<(), MmError> {
        if let Some(pfn) = m.alloc_frames(v.size) {
            return m.map(pid, v.start, pfn, v.size, v.flags, false);
        }
        let base = m.base();
        self.c.migration_splits += 1;
        m.stats.demotions += 1;
        for i in 0..base.pages_in(v.size.bytes()) {
            let va = v.start + i * base.bytes();
            let pfn = m.alloc_frames(base).ok_or(MmError::OutOfMemory {
                addr: va,
                size: base,
            })?;
            m.map(pid, va, pfn, base, v.flags, false)?;
        }
        Ok(())
    }
}

/// A mapped page by its first 4K frame: its frames, and `Some((pid, mapping))`
/// when compaction may move it, `None` when it pins its block.
type Owners = BTreeMap<u64, (u64, Option<(u32, PhysMapping)>)>;

/// Every mapped page; movable into another block of order `k` when mapped
/// once, by an anonymous VMA, and smaller than the block.
fn movable_pages(m: &Machine, k: u8) -> Owners {
    let base = m.base();
    let mut owners = Owners::new();
    for pid in m.pids() {
        let Some(p) = m.proc(pid) else { continue };
        // The whole address space, as wide as the machine's page table reaches (48 bits on
        // x86-64, 57 with five levels).
        let all = 1u64 << p.pt.geometry().va_bits();
        for page in p.pt.mappings_in(VirtAddr(0), all) {
            let page = page.to_phys(base);
            let frames = page.size.frames();
            let anon = p
                .aspace
                .find(page.start)
                .is_some_and(|v| v.backing == Backing::Anon);
            let entry = (anon && frames < 1 << k).then_some((pid, page));
            if let Some(old) = owners.insert(page.pfn.0, (frames, entry)) {
                // Mapped twice (after fork).
                owners.insert(page.pfn.0, (frames.max(old.0), None));
            }
        }
    }
    // A frame inside two mappings with different heads (a shared page split in one process).
    let mut end = 0;
    let mut overlapping = Vec::new();
    for (&pfn, &(frames, _)) in &owners {
        if pfn < end {
            overlapping.push(pfn);
        }
        end = end.max(pfn + frames);
    }
    for pfn in overlapping {
        if let Some(o) = owners.get_mut(&pfn) {
            o.1 = None;
        }
    }
    owners
}

/// The allocator of the dma32 or normal zone wholly holding the block of
/// `2^k` frames at `head`.
fn small_zone_holding(m: &Machine, head: u64, k: u8) -> Option<&BuddyAllocator> {
    let z = &m.phys.zones()[m.phys.zone_of(Pfn(head))?.0];
    let inside = z.buddy.start().0 <= head && head + (1 << k) <= z.buddy.end().0;
    (z.kind != ZoneKind::Large && inside).then_some(&z.buddy)
}

/// Allocated frames in the block of `2^k` frames at `head`.
fn allocated_frames(b: &BuddyAllocator, head: u64, k: u8) -> u64 {
    for j in k + 1..=b.max_order().0 {
        let h = head & !((1u64 << j) - 1);
        if b.allocated_order(Pfn(h)) == Some(Order(j)) {
            return 1 << k;
        }
    }
    let (mut n, mut p) = (0, head);
    while p < head + (1 << k) {
        match b.allocated_order(Pfn(p)) {
            Some(j) => {
                let len = 1u64 << j.0.min(k);
                n += len;
                p += len;
            }
            None => p += 1,
        }
    }
    n
}

/// The largest size `geometry` maps not above `2^shift` (the base size at least).
pub fn requested_size(geometry: &Geometry, shift: u8) -> PageSize {
    geometry
        .sizes()
        .into_iter()
        .rev()
        .find(|s| s.shift() <= u32::from(shift))
        .unwrap_or(geometry.base())
}

impl Policy for ExplicitPolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        _write: bool,
    ) -> Result<(), MmError> {
        let base = m.base();
        let Some(req) = vma.order else {
            self.c.unrequested_faults += 1;
            let (alloc, fallback) = (&mut self.c.alloc, &mut self.c.fallback);
            return map_largest(m, pid, vma, addr, &[base], alloc, fallback).map(|_| ());
        };
        self.c.requested_faults += 1;
        let target = requested_size(m.geometry(), req.shift);
        if target.shift() != u32::from(req.shift) {
            self.c.rounded_requests += 1;
        }
        let sizes: Vec<PageSize> = m
            .geometry()
            .sizes()
            .into_iter()
            .rev()
            .filter(|&s| s <= target)
            .collect();
        let got = if req.wait {
            self.wait_fault(m, pid, vma, addr, &sizes)?
        } else {
            let (alloc, fallback) = (&mut self.c.alloc, &mut self.c.fallback);
            map_largest(m, pid, vma, addr, &sizes, alloc, fallback)?
        };
        if got == target {
            self.c.granted += 1;
        } else {
            self.c.below_request += 1;
        }
        Ok(())
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::to_value(&self.c).unwrap_or_default()
    }
}
