//! The machine the policies act on: physical memory, and per process an
//! address space and a page table, with the counters every run reports.
//!
//! The machine does the mechanical work (allocate and zero frames, map them,
//! unmap and split, count); a [`Policy`](crate::policy::Policy) decides what to
//! map at a fault and who frees what.

use crate::cache::PageCache;
pub use crate::counters::{MmStats, PerSize};
use crate::pagetable::{
    Geometry, PageTable, PhysMapping, PtError, PteFlags, RadixPageTable, TableTally,
};
use crate::phys::{FrameAllocator, PageTemp, PhysConfig, PhysError, PhysMem, ZonePref};
use crate::reclaim::Residency;
use crate::vma::AddressSpace;
use pagelab_core::{Order, PageSize, Pfn, VirtAddr};
use rustc_hash::FxHashMap;
use std::sync::Arc;

mod folios;
mod frames;

pub use folios::KeptFolio;

/// Why the model could not go on. Contradictory trace events are not errors:
/// they are counted in [`MmStats`] (and refused by the engine under `--strict`).
#[derive(Debug, thiserror::Error)]
pub enum MmError {
    /// The physical-memory configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::phys::ConfigError),
    /// A page-table operation failed: a bug in a policy or the machine.
    #[error("page table: {0}")]
    PageTable(#[from] PtError),
    /// A frame operation failed: a bug in a policy or the machine.
    #[error("physical memory: {0}")]
    Phys(#[from] PhysError),
    /// No page could be allocated even after reclaim.
    #[error("out of memory: no {size} page could be allocated for a fault at {addr:#x}")]
    OutOfMemory {
        /// The faulting address.
        addr: VirtAddr,
        /// The smallest size tried.
        size: PageSize,
    },
    /// The kernel's structures no longer fit in a 32-bit kernel's low memory.
    #[error(transparent)]
    LowMemory(#[from] crate::kmem::LowMemoryExhausted),
    /// A policy name or parameter is not valid.
    #[error("{0}")]
    Policy(String),
    /// A reference to an address no page of the geometry can map: a trace
    /// record the modelled machine could never see, not a shortage of memory.
    #[error("address {addr:#x} is outside the {va_bits}-bit virtual address space")]
    OutsideAddressSpace {
        /// The referenced address.
        addr: VirtAddr,
        /// The width of the virtual address space.
        va_bits: u32,
    },
}

/// One process: its VMAs and its page table.
#[derive(Clone, Debug)]
pub struct Proc {
    /// The VMAs.
    pub aspace: AddressSpace,
    /// The page table.
    pub pt: RadixPageTable,
}

/// What a [`Machine`] is built from.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// Physical memory and zones.
    pub phys: PhysConfig,
    /// The base page size; the page-table geometry follows it.
    pub base: PageSize,
    /// The page-table geometry of the modelled machine; `None`: the one
    /// Linux uses for `base` ([`Geometry::for_base`]). Its base must be `base`.
    pub geometry: Option<Geometry>,
}

/// Physical memory plus every process's address space and page table.
pub struct Machine {
    /// Physical memory (frames of 4K).
    pub phys: PhysMem,
    geometry: Geometry,
    procs: FxHashMap<u32, Proc>,
    /// The page-table bytes of every process in `procs`, kept by their tables
    /// as they allocate and free table nodes (see [`Machine::check_page_tables`]).
    tally: Arc<TableTally>,
    /// References to 4K frames beyond the first, for frames mapped more than
    /// once (after fork) or held by the page cache; a frame absent here has
    /// exactly one reference: the one mapping that holds it.
    shared: FxHashMap<u64, u32>,
    /// The page cache: folios of files, each holding one reference to its frames.
    cache: PageCache,
    /// LRU owners and referenced/dirty bits, for reclaim.
    pub(crate) res: Residency,
    /// Zones (bit per zone index) whose free memory fell below the low watermark.
    wake: u64,
    /// The shared zero pages (4K units), allocated at first use and never freed:
    /// the 4K one and the huge (PMD-sized) one.
    zero: [Option<Pfn>; 2],
    /// Counters.
    pub stats: MmStats,
    /// Fault-around, read-around and a warm page cache for file faults (all off by default).
    pub file_faults: crate::fault_around::FileFaults,
    /// Which per-CPU list frees go to: cold while reclaim runs, else hot.
    pub(crate) free_temp: PageTemp,
    /// Whether splitting a page's mapping keeps its folio whole (see `folios.rs`).
    keep_folios: bool,
    /// Folios mapped by smaller pages than themselves, by head frame (4K units).
    kept: std::collections::BTreeMap<u64, KeptFolio>,
}

impl Machine {
    /// A machine with no process yet.
    pub fn new(cfg: &MachineConfig) -> Result<Machine, MmError> {
        let phys = PhysMem::new(&cfg.phys)?;
        let geometry = match cfg.geometry {
            Some(g) if g.base() != cfg.base => {
                return Err(MmError::Policy(format!(
                "the machine's page table maps {} base pages, but the policy runs on {} base pages",
                g.base(),
                cfg.base
            )))
            }
            Some(g) => g,
            None => Geometry::for_base(cfg.base),
        };
        Ok(Machine {
            res: Residency::new(phys.total_frames(), phys.reclaim_enabled()),
            phys,
            geometry,
            procs: FxHashMap::default(),
            tally: Arc::default(),
            shared: FxHashMap::default(),
            cache: PageCache::new(cfg.base),
            wake: 0,
            zero: [None; 2],
            stats: MmStats::default(),
            file_faults: Default::default(),
            free_temp: PageTemp::Hot,
            keep_folios: false,
            kept: Default::default(),
        })
    }

    /// The page-table geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The end of the virtual address space (one past its last byte): every
    /// walk over all of a process's mappings covers `[0, va_end)`.
    pub fn va_end(&self) -> VirtAddr {
        VirtAddr(1u64 << self.geometry().va_bits())
    }

    /// The base page size.
    pub fn base(&self) -> PageSize {
        self.geometry.base()
    }

    /// Process `pid`, created empty on first use.
    pub fn proc_mut(&mut self, pid: u32) -> &mut Proc {
        let (geometry, tally) = (&self.geometry, &self.tally);
        self.procs.entry(pid).or_insert_with(|| Proc {
            aspace: AddressSpace::new(),
            pt: RadixPageTable::new_in(*geometry, tally),
        })
    }

    /// An empty page table of the machine's geometry, for a process about to
    /// be inserted (fork): its tables count in the machine's total at once.
    pub fn new_page_table(&self) -> RadixPageTable {
        RadixPageTable::new_in(self.geometry, &self.tally)
    }

    /// Process `pid`, if it exists.
    pub fn proc(&self, pid: u32) -> Option<&Proc> {
        self.procs.get(&pid)
    }

    /// Every process id.
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.procs.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Removes a process, returning it (its pages are still allocated); its
    /// page table no longer counts in the machine's.
    pub fn remove_proc(&mut self, pid: u32) -> Option<Proc> {
        let mut p = self.procs.remove(&pid)?;
        p.pt.attach(&Arc::default());
        Some(p)
    }

    /// Inserts a process (fork); its page table counts in the machine's
    /// (a process it replaces no longer does).
    pub fn insert_proc(&mut self, pid: u32, mut p: Proc) {
        p.pt.attach(&self.tally);
        self.procs.insert(pid, p);
    }

    /// Sum of every process's page-table memory: a running total, not a sum
    /// taken now.
    pub fn page_table_bytes(&self) -> u64 {
        self.tally.bytes()
    }

    /// Sum of every process's level-1 page tables (PTE pages), in bytes: a
    /// running total.
    pub fn level1_table_bytes(&self) -> u64 {
        self.tally.level1_bytes()
    }

    /// Checks the running totals of page-table memory against a sum over
    /// every process taken now.
    pub fn check_page_tables(&self) -> Result<(), String> {
        let all: u64 = self.procs.values().map(|p| p.pt.memory_bytes()).sum();
        let level1: u64 = self.procs.values().map(|p| p.pt.level1_bytes()).sum();
        if (all, level1) != (self.page_table_bytes(), self.level1_table_bytes()) {
            return Err(format!(
                "page-table running total {} bytes ({} in level-1 tables), but the processes' tables sum to {all} ({level1})",
                self.page_table_bytes(),
                self.level1_table_bytes()
            ));
        }
        Ok(())
    }

    /// Allocates a naturally aligned block for a `size` page, or `None` when
    /// memory is short. An allocation that leaves its zone below the low
    /// watermark wakes reclaim (see [`Machine::take_wake`]).
    pub fn alloc_frames(&mut self, size: PageSize) -> Option<Pfn> {
        self.alloc_frames_temp(size, PageTemp::Hot)
    }

    /// As [`Machine::alloc_frames`], for the page cache: a base page comes
    /// from the per-CPU cold list (the device fills it, not the CPU).
    pub fn alloc_cache_frames(&mut self, size: PageSize) -> Option<Pfn> {
        self.alloc_frames_temp(size, PageTemp::Cold)
    }

    fn alloc_frames_temp(&mut self, size: PageSize, temp: PageTemp) -> Option<Pfn> {
        let pfn = self
            .phys
            .alloc_temp(frames_order(size), ZonePref::Any, temp)?;
        if self.res.enabled() {
            if let Some(z) = self.phys.zone_of(pfn) {
                if self.phys.zone_free(z) < self.phys.watermarks(z).low {
                    self.wake |= 1 << z.0.min(63);
                }
            }
        }
        Some(pfn)
    }

    /// The zones whose free memory an allocation took below the low
    /// watermark since the last call, as a bit mask of zone indexes.
    pub fn take_wake(&mut self) -> u64 {
        std::mem::take(&mut self.wake)
    }

    /// Frees the frames of a `size` page at `pfn` (4K units): the whole block
    /// when it is still allocated as one, else frame by frame (its block was
    /// split when the page was demoted). Base pages go to the per-CPU hot
    /// list, or the cold one while reclaim runs.
    pub fn free_frames(&mut self, pfn: Pfn, size: PageSize) -> Result<(), MmError> {
        if let Some((head, whole)) = self.kept_folio_of(pfn) {
            if whole > size {
                // A piece of a folio kept whole: it stays allocated with the folio.
                return self.free_in_kept(head, pfn, size);
            }
            self.kept.remove(&head.0);
        }
        let order = frames_order(size);
        let temp = self.free_temp;
        if self.allocated_order(pfn) == Some(order) {
            return Ok(self.phys.free_temp(pfn, order, temp)?);
        }
        for f in pfn.0..pfn.0 + size.frames() {
            self.phys.free_temp(Pfn(f), Order(0), temp)?;
        }
        Ok(())
    }

    /// The order of the allocated block whose head is `pfn` (4K units).
    fn allocated_order(&self, pfn: Pfn) -> Option<Order> {
        let zone = self.phys.zone_of(pfn)?;
        self.phys.zones()[zone.0].buddy.allocated_order(pfn)
    }

    /// Splits the frames of a demoted `size` page at `pfn` (4K units) into
    /// single frames, as the kernel's split_page does, unless already split.
    /// A folio kept whole while partly unmapped is split now: the frames no
    /// mapping holds are freed.
    pub fn split_frames(&mut self, pfn: Pfn, size: PageSize) -> Result<(), MmError> {
        self.split_block(pfn, size)?;
        self.free_kept_holes(pfn)
    }

    /// Splits the page of `pid` starting at `va` one step down (a demotion),
    /// frames included.
    pub fn split_page(&mut self, pid: u32, va: VirtAddr) -> Result<(), MmError> {
        let base = self.base();
        let p = self.proc_mut(pid);
        let t = p.pt.walk(va).ok_or(PtError::NotMapped { va })?;
        p.pt.split(va)?;
        let piece = p.pt.walk(va).map_or(t.size, |p| p.size);
        self.stats.demotions += 1;
        self.note_split(t.pfn.to_pfn(base), t.size, piece)
    }

    /// After the page table split a `from` page on frames `pfn` (4K units)
    /// into `piece` pages: splits its frames and its LRU page (anonymous pages
    /// only; a page-cache folio stays whole), or with folios kept whole
    /// ([`Machine::set_keep_folios`]) notes the folio and splits nothing.
    pub fn note_split(&mut self, pfn: Pfn, from: PageSize, piece: PageSize) -> Result<(), MmError> {
        if self.keep_folios {
            self.keep_split(pfn, from);
            return Ok(());
        }
        self.res.split_anon(&mut self.phys, pfn, piece);
        self.split_frames(pfn, from)
    }

    /// Maps anonymous frames `pfn` (4K units) as a `size` page at `va` in
    /// `pid`, counting the bytes zeroed when `zeroed`; the page goes on its
    /// zone's inactive list unless already listed.
    pub fn map(
        &mut self,
        pid: u32,
        va: VirtAddr,
        pfn: Pfn,
        size: PageSize,
        flags: PteFlags,
        zeroed: bool,
    ) -> Result<(), MmError> {
        self.map_pte(pid, va, pfn, size, flags, zeroed)?;
        self.res.add(
            &mut self.phys,
            pfn,
            size,
            crate::reclaim::Owner::Anon { va },
        );
        Ok(())
    }

    /// Maps frames of the page cache (`pfn`, 4K units) as a `size` page at
    /// `va` in `pid`, adding the mapping's reference to them.
    pub fn map_file(
        &mut self,
        pid: u32,
        va: VirtAddr,
        pfn: Pfn,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<(), MmError> {
        self.map_pte(pid, va, pfn, size, flags, false)?;
        self.share(pfn, size);
        Ok(())
    }

    fn map_pte(
        &mut self,
        pid: u32,
        va: VirtAddr,
        pfn: Pfn,
        size: PageSize,
        flags: PteFlags,
        zeroed: bool,
    ) -> Result<(), MmError> {
        let pt_pfn = pfn.to_base(self.base());
        self.proc_mut(pid).pt.map(va, pt_pfn, size, flags)?;
        self.stats.rss_bytes += size.bytes();
        self.stats.peak_rss_bytes = self.stats.peak_rss_bytes.max(self.stats.rss_bytes);
        if zeroed {
            self.stats.zeroed_bytes += size.bytes();
        }
        Ok(())
    }

    /// The plain fault: allocates, zeroes and maps the `size` page holding
    /// `addr` in `pid` with `flags`, and counts it; out of memory is an error.
    pub fn fault_in(
        &mut self,
        pid: u32,
        addr: VirtAddr,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<(), MmError> {
        let pfn = self
            .alloc_frames(size)
            .ok_or(MmError::OutOfMemory { addr, size })?;
        self.map(pid, addr.align_down(size), pfn, size, flags, true)?;
        self.count_fault(size);
        Ok(())
    }

    /// Counts one fault that mapped a `size` page.
    pub fn count_fault(&mut self, size: PageSize) {
        self.stats.faults += 1;
        self.stats.faults_by_size.add(size, 1);
    }

    /// Unmaps every page of `pid` inside `[start, end)`, splitting pages that
    /// straddle an edge first (each split is a demotion; with folios kept whole,
    /// a split of the mapping only, the folio's pages outside the range still
    /// mapped and the rest kept allocated with it); a base page that
    /// straddles an edge is unmapped whole. Returns the removed
    /// mappings, with frame numbers in 4K units; the caller frees their frames.
    pub fn unmap_range(
        &mut self,
        pid: u32,
        start: VirtAddr,
        end: VirtAddr,
    ) -> Result<Vec<PhysMapping>, MmError> {
        let mut removed = Vec::new();
        loop {
            let Some(p) = self.procs.get_mut(&pid) else {
                return Ok(removed);
            };
            let maps = p.pt.mappings_in(start, end - start);
            // A base page only partly in the range (a 4K-granular range with
            // larger base pages) cannot be split: it goes whole.
            let base = self.geometry.base();
            let straddling = maps
                .iter()
                .find(|m| m.size > base && (m.start < start || m.start + m.size.bytes() > end));
            if let Some(m) = straddling {
                let va = m.start;
                self.split_page(pid, va)?;
                continue;
            }
            let mut gone = Vec::new();
            for m in maps {
                gone.push(p.pt.unmap(m.start, m.size)?.to_phys(base));
            }
            for m in gone {
                self.stats.rss_bytes -= m.size.bytes();
                // Frames still referenced elsewhere (another process, the page cache) stay.
                removed.extend(self.unshare(m)?);
            }
            return Ok(removed);
        }
    }
}

impl Machine {
    /// The page cache.
    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// The page cache, to read folios in or drop them.
    pub fn cache_mut(&mut self) -> &mut PageCache {
        &mut self.cache
    }

    /// Frames held by the page cache, in 4K frames.
    pub fn cache_frames(&self) -> u64 {
        self.cache.frames()
    }

    /// The LRU owners and referenced bits.
    pub fn residency(&self) -> &Residency {
        &self.res
    }
}

/// The buddy order of a block of frames holding one `size` page.
pub fn frames_order(size: PageSize) -> Order {
    size.frame_order()
}
