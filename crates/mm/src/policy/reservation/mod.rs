//! `reservation`: reservation-based superpages with a population map, after
//! Navarro et al. (OSDI 2002) as GISP (Qu et al., GISP, ASAP 2007, section 3) builds it
//! into Linux.
//!
//! - At the first fault in a region the policy reserves the largest naturally
//!   aligned extent, up to `max`, that lies inside the VMA, holds no mapped
//!   page and overlaps no other reservation of the process: it allocates the
//!   whole block but maps only the faulting base page, base page `i` of the
//!   extent always on frame `block + i`. Later faults in the extent take
//!   their frame from the reservation; the [`popmap`] records which frames
//!   are in use.
//! - Promotion is incremental from the smallest size up and happens exactly
//!   at the fault that populates the last base page of an aligned extent of
//!   the next size the page table can map (8K, 16K, ... 1M, 2M on x86-64):
//!   the small pages are unmapped and the same frames mapped as one page; no
//!   copy. An extent is promoted only when it lies inside the faulting VMA,
//!   every page in it maps its own frame of the reservation with the VMA's
//!   protection, and no frame is shared (after fork). A reservation whose
//!   whole extent is promoted becomes an ordinary superpage.
//! - Reservations wait on [`lists`] by the largest free block they would give
//!   back, each ordered by their latest frame allocation; when a block cannot
//!   be allocated (memory short or contiguity missing) the least recently
//!   allocated reservation able to yield a block of that size is preempted:
//!   its free frames go back to the allocator, its populated pages stay
//!   mapped. With no such victim the next smaller extent is tried, down to a
//!   base page outside any reservation.
//! - Demotion is passive: the machine splits a superpage whose protection
//!   changes in part (and one partly unmapped). The population map counts
//!   frames, not pages, so it needs no change; a later promotion checks the
//!   page table afresh.
//! - A released page's frames return to their reservation (GISP 3.3, as
//!   FreeBSD's vm_reserv does), held for a later fault there or freed by a
//!   preemption; a reservation left with no frame in use is freed whole.
//!   Frames are found by number, so a page released by another process
//!   after fork finds its reservation too.
//!
//! - File mappings (GISP 3.2): the page cache reserves an aligned block for
//!   a file extent and reads it page by page on demand; the mapping is
//!   promoted at once, to one page of the extent's size, at the fault that
//!   finds the whole extent in the page cache (the first fault in the extent
//!   when it was cached already). See [`crate::filemap`].
//! - Reclaim asks the policy first ([`Policy::shrink`]): the least recently
//!   allocated reservation with free frames in the zone is preempted; only
//!   when none is left are mapped pages reclaimed. A swapped-out page's
//!   frames return to its reservation like any released page.
//!
//! Not modelled: GISP's COW link list (see `fault::CowMode::Base`).
//! VMAs given MADV_NOHUGEPAGE get base pages.

mod check;
mod lists;
mod popmap;
mod promote;
mod settings;

use settings::superpage_sizes;
pub use settings::ReservationSettings;

use super::{FilePages, Policy};
use crate::machine::{Machine, MmError, PerSize};
use crate::pagetable::{PageTable, PhysMapping, PteFlags};
use crate::phys::{FrameAllocator, ZoneId};
use crate::vma::{ThpAdvice, Vma};
use lists::Lists;
use pagelab_core::{Backing, Order, PageSize, Pfn, VirtAddr};
use popmap::PopMap;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

const BASE: PageSize = PageSize::K4;

/// Base frames in a `size` page.
fn frames(size: PageSize) -> u64 {
    size.frames()
}

/// One reservation: an aligned extent of one process and the block behind it.
#[derive(Clone, Debug)]
struct Reservation {
    owner: u32,
    va: VirtAddr,
    size: PageSize,
    block: Pfn,
    pop: PopMap,
    /// Time of the latest frame allocation from it.
    time: u64,
}

/// What the policy counted, beside the machine's counters.
#[derive(Clone, Debug, Default)]
struct Counters {
    reserved: PerSize,
    promoted: PerSize,
    fallbacks: PerSize,
    preempted_for_contiguity: u64,
    preempted_for_memory: u64,
    base_pages_outside: u64,
}

/// The policy: reservations, their population maps and lists.
#[derive(Clone, Debug)]
pub struct ReservationPolicy {
    settings: ReservationSettings,
    /// Sizes reserved and promoted to, smallest first.
    sizes: Vec<PageSize>,
    res: FxHashMap<u64, Reservation>,
    /// Per owner, extent start to reservation.
    by_va: FxHashMap<u32, BTreeMap<VirtAddr, u64>>,
    /// Block head frame to reservation.
    by_pfn: BTreeMap<u64, u64>,
    lists: Lists,
    next_id: u64,
    clock: u64,
    held: u64,
    /// Extents promoted since the last `take_remapped`, as `(pid, start, end)`.
    remapped: Vec<(u32, VirtAddr, VirtAddr)>,
    counters: Counters,
}

impl ReservationPolicy {
    /// The policy with these settings.
    pub fn new(settings: ReservationSettings) -> Self {
        ReservationPolicy {
            sizes: superpage_sizes(settings.max),
            settings,
            res: FxHashMap::default(),
            by_va: FxHashMap::default(),
            by_pfn: BTreeMap::new(),
            lists: Lists::default(),
            next_id: 0,
            clock: 0,
            held: 0,
            remapped: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// The reservation of `pid` whose extent holds `va`.
    fn find_va(&self, pid: u32, va: VirtAddr) -> Option<u64> {
        let (&start, &id) = self.by_va.get(&pid)?.range(..=va).next_back()?;
        (va < start + self.res[&id].size.bytes()).then_some(id)
    }

    /// Whether a reservation of `pid` overlaps `[start, start + size)`.
    fn overlaps(&self, pid: u32, start: VirtAddr, size: PageSize) -> bool {
        let Some(map) = self.by_va.get(&pid) else {
            return false;
        };
        map.range(..start + size.bytes())
            .next_back()
            .is_some_and(|(&s, id)| s + self.res[id].size.bytes() > start)
    }

    /// The reservation whose block holds frame `pfn`.
    fn find_pfn(&self, pfn: u64) -> Option<u64> {
        let (&head, &id) = self.by_pfn.range(..=pfn).next_back()?;
        (pfn < head + frames(self.res[&id].size)).then_some(id)
    }

    fn list_out(&mut self, id: u64) {
        let r = &self.res[&id];
        if let Some(level) = r.pop.largest_free() {
            self.lists.remove(level, r.time, id);
        }
    }

    fn list_in(&mut self, id: u64) {
        let r = &self.res[&id];
        if let Some(level) = r.pop.largest_free() {
            self.lists.insert(level, r.time, id);
        }
    }

    /// Forgets reservation `id` (its frames are the caller's business).
    fn forget(&mut self, id: u64) -> Reservation {
        self.list_out(id);
        let r = self.res.remove(&id).expect("live reservation");
        self.by_pfn.remove(&r.block.0);
        if let Some(map) = self.by_va.get_mut(&r.owner) {
            map.remove(&r.va);
            if map.is_empty() {
                self.by_va.remove(&r.owner);
            }
        }
        self.held -= r.pop.frames() - r.pop.populated();
        r
    }

    /// Breaks reservation `id`: its free frames go back to the allocator.
    fn preempt(&mut self, m: &mut Machine, id: u64, want: PageSize) -> Result<(), MmError> {
        if m.phys.free_frames() >= frames(want) {
            self.counters.preempted_for_contiguity += 1;
        } else {
            self.counters.preempted_for_memory += 1;
        }
        let r = self.forget(id);
        m.split_frames(r.block, r.size)?;
        for i in r.pop.free_frames() {
            m.phys.free(Pfn(r.block.0 + i), Order(0))?;
        }
        m.stats.preemptions += 1;
        Ok(())
    }

    /// A block for a `size` page, preempting reservations that can yield one.
    fn alloc(&mut self, m: &mut Machine, size: PageSize) -> Result<Option<Pfn>, MmError> {
        let level = size.frame_order().0;
        loop {
            if let Some(pfn) = m.alloc_frames(size) {
                return Ok(Some(pfn));
            }
            let Some(victim) = self.lists.victim(level) else {
                return Ok(None);
            };
            self.preempt(m, victim, size)?;
        }
    }

    /// Reserves `size` at `start` for `pid` on the frames at `block`.
    fn create(&mut self, pid: u32, start: VirtAddr, size: PageSize, block: Pfn) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let r = Reservation {
            owner: pid,
            va: start,
            size,
            block,
            pop: PopMap::new(size.frame_order().0),
            time: self.clock,
        };
        self.held += r.pop.frames();
        self.res.insert(id, r);
        self.by_va.entry(pid).or_default().insert(start, id);
        self.by_pfn.insert(block.0, id);
        self.counters.reserved.add(size, 1);
        id
    }

    /// Maps the base page at `va` from reservation `id`, then promotes.
    fn populate(
        &mut self,
        m: &mut Machine,
        pid: u32,
        id: u64,
        vma: &Vma,
        va: VirtAddr,
    ) -> Result<(), MmError> {
        let flags = PteFlags::from_prot(vma.prot);
        let (rva, block) = (self.res[&id].va, self.res[&id].block);
        let i = BASE.pages_in(va - rva);
        m.map(pid, va, block + i, BASE, flags, true)?;
        m.count_fault(BASE);
        self.list_out(id);
        self.clock += 1;
        let r = self.res.get_mut(&id).expect("live reservation");
        r.pop.set(i);
        r.time = self.clock;
        self.held -= 1;
        self.list_in(id);
        self.promote(m, pid, id, vma, va)
    }

    /// A base page outside every reservation.
    fn base_page(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
    ) -> Result<(), MmError> {
        let pfn = self
            .alloc(m, BASE)?
            .ok_or(MmError::OutOfMemory { addr, size: BASE })?;
        m.map(
            pid,
            addr.align_down(BASE),
            pfn,
            BASE,
            PteFlags::from_prot(vma.prot),
            true,
        )?;
        m.count_fault(BASE);
        self.counters.base_pages_outside += 1;
        Ok(())
    }

    /// Returns the frames of a released page to its reservation.
    fn depopulate(&mut self, m: &mut Machine, id: u64, mp: &PhysMapping) -> Result<(), MmError> {
        let (block, size) = (self.res[&id].block, self.res[&id].size);
        if mp.pfn.0 + frames(mp.size) > block.0 + frames(size) {
            return Err(MmError::Policy(format!(
                "reservation: a {} page at frame {:#x} reaches past its {size} reservation",
                mp.size, mp.pfn.0
            )));
        }
        self.list_out(id);
        let r = self.res.get_mut(&id).expect("live reservation");
        for f in mp.pfn.0..mp.pfn.0 + frames(mp.size) {
            if !r.pop.clear(f - block.0) {
                return Err(MmError::Policy(format!(
                    "reservation: frame {f:#x} released twice"
                )));
            }
        }
        self.held += frames(mp.size);
        if self.res[&id].pop.populated() == 0 {
            self.forget(id);
            m.free_frames(block, size)?;
        } else {
            self.list_in(id);
        }
        Ok(())
    }
}

impl Policy for ReservationPolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        _write: bool,
    ) -> Result<(), MmError> {
        let va = addr.align_down(BASE);
        if let Some(id) = self.find_va(pid, va) {
            let r = &self.res[&id];
            if !r.pop.is_set(BASE.pages_in(va - r.va)) {
                return self.populate(m, pid, id, vma, va);
            }
            // Its frame is still mapped elsewhere (shared at fork, then unmapped here).
            return self.base_page(m, pid, vma, addr);
        }
        if vma.thp != ThpAdvice::NoHuge && vma.backing == Backing::Anon {
            for size in self.sizes.clone().into_iter().rev() {
                let start = addr.align_down(size);
                if !vma.holds_aligned(addr, size)
                    || self.overlaps(pid, start, size)
                    || !m.proc_mut(pid).pt.is_unmapped(start, size.bytes())
                {
                    continue;
                }
                if let Some(block) = self.alloc(m, size)? {
                    let id = self.create(pid, start, size, block);
                    return self.populate(m, pid, id, vma, va);
                }
                self.counters.fallbacks.add(size, 1);
            }
        }
        self.base_page(m, pid, vma, addr)
    }

    fn release(
        &mut self,
        m: &mut Machine,
        _pid: u32,
        removed: &[PhysMapping],
    ) -> Result<(), MmError> {
        for mp in removed {
            match self.find_pfn(mp.pfn.0) {
                Some(id) => self.depopulate(m, id, mp)?,
                None => m.free_frames(mp.pfn, mp.size)?,
            }
        }
        Ok(())
    }

    fn held_frames(&self) -> u64 {
        self.held
    }

    fn shrink(&mut self, m: &mut Machine, zone: ZoneId) -> Result<bool, MmError> {
        // The least recently allocated reservation with a free frame in the zone.
        let victim = self
            .res
            .iter()
            .filter(|(_, r)| {
                r.pop.populated() < r.pop.frames() && m.phys.zone_of(r.block) == Some(zone)
            })
            .min_by_key(|(&id, r)| (r.time, id))
            .map(|(&id, _)| id);
        match victim {
            Some(id) => {
                self.preempt(m, id, BASE)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn file_pages(&self, vma: &Vma) -> FilePages {
        FilePages {
            sizes: if vma.thp == ThpAdvice::NoHuge {
                Vec::new()
            } else {
                self.sizes.iter().rev().copied().collect()
            },
            read_whole: false,
        }
    }

    fn take_remapped(&mut self) -> Vec<(u32, VirtAddr, VirtAddr)> {
        std::mem::take(&mut self.remapped)
    }

    fn check(&self, m: &Machine) -> Result<(), String> {
        self.check_state(m)
    }

    fn counters(&self) -> serde_json::Value {
        let c = &self.counters;
        let json = |p: &PerSize| serde_json::to_value(p).unwrap_or_default();
        let lists: serde_json::Map<String, serde_json::Value> = self
            .lists
            .lengths()
            .map(|(k, n)| {
                (
                    PageSize::of_order(Order(k)).map_or(k.to_string(), |s| s.to_string()),
                    n.into(),
                )
            })
            .collect();
        serde_json::json!({
            "max": self.settings.max.to_string(),
            "reservations": self.res.len(),
            "held_bytes": self.held * Pfn::BYTES,
            "reserved": json(&c.reserved),
            "promoted": json(&c.promoted),
            "fallbacks": json(&c.fallbacks),
            "preempted_for_contiguity": c.preempted_for_contiguity,
            "preempted_for_memory": c.preempted_for_memory,
            "base_pages_outside": c.base_pages_outside,
            "lists": lists,
        })
    }
}
