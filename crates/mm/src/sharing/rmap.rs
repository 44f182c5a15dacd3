//! What each reverse-map method costs, all counted side by side from the same
//! stream of mapping additions and removals.
//!
//! The model tells [`RmapCosts`] that a PTE now maps a page that had `len`
//! mappings, or that the entry at `pos` of a chain of `len` went away; each
//! method turns that into its own bytes, objects and walks.

use serde::Serialize;
use std::collections::BTreeMap;

/// The reverse-map methods, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// One node per mapping: a pointer to the PTE and a next pointer.
    PteChains,
    /// As `PteChains`, but a page with one mapping points at its PTE from
    /// `struct page` (PG_direct) and needs no node.
    PteChainsDirect,
    /// 2.5.68's chains: page-direct, and nodes of one cache line holding
    /// several PTE pointers, kept compact.
    PteChainsGrouped,
    /// Object-based for every page: a file page's mappers are found through
    /// the file's list of VMAs (`i_mmap`), an anonymous page's through the
    /// list of VMAs of its anonymous object (as 2.6.7's anonmm); the whole
    /// list is walked.
    Objrmap,
    /// McCracken's partial objrmap: object-based for file pages, 2.5.68's
    /// chains for anonymous ones.
    PartialObjrmap,
    /// Today's kernel: file pages through the `i_mmap` interval tree,
    /// anonymous ones through `anon_vma`s linked to VMAs by `anon_vma_chain`s.
    Linux,
}

/// Every method.
pub const METHODS: [Method; 6] = [
    Method::PteChains,
    Method::PteChainsDirect,
    Method::PteChainsGrouped,
    Method::Objrmap,
    Method::PartialObjrmap,
    Method::Linux,
];

/// The sizes the methods' structures take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RmapSizes {
    /// Bytes of a pointer in the kernel whose chains are counted (4: the
    /// paper's 32-bit kernel).
    pub pointer_bytes: u64,
    /// Bytes of a cache line, the size of a grouped chain node (32: the
    /// Pentium III of the paper's NUMA-Q; Linux's `L1_CACHE_BYTES` for it).
    pub line_bytes: u64,
    /// Bytes of today's `struct anon_vma` (104 on x86-64 Linux 6.18, `/proc/slabinfo`).
    pub anon_vma_bytes: u64,
    /// Bytes of today's `struct anon_vma_chain` (64 on x86-64 Linux 6.18, `/proc/slabinfo`).
    pub anon_vma_chain_bytes: u64,
}

impl Default for RmapSizes {
    fn default() -> Self {
        RmapSizes {
            pointer_bytes: 4,
            line_bytes: 32,
            anon_vma_bytes: 104,
            anon_vma_chain_bytes: 64,
        }
    }
}

impl RmapSizes {
    /// PTE pointers per grouped node: 2.5.68's `NRPTE`, `(L1_CACHE_BYTES -
    /// sizeof(unsigned long)) / sizeof(pte_addr_t)` (mm/rmap.c): 7 for 32-byte
    /// lines and 4-byte pointers.
    pub fn per_line(&self) -> u64 {
        ((self.line_bytes - self.pointer_bytes) / self.pointer_bytes).max(1)
    }

    /// (objects, bytes) the chain of a page with `len` mappings takes.
    fn chain(&self, m: Method, len: u64) -> (u64, u64) {
        let node = 2 * self.pointer_bytes;
        match m {
            Method::PteChains => (len, len * node),
            Method::PteChainsDirect if len >= 2 => (len, len * node),
            Method::PteChainsGrouped | Method::PartialObjrmap if len >= 2 => {
                let n = len.div_ceil(self.per_line());
                (n, n * self.line_bytes)
            }
            _ => (0, 0),
        }
    }
}

/// What backs a page, which decides how the partial method treats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// A file or shared-memory page.
    File,
    /// An anonymous page.
    Anon,
}

/// One method's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MethodStats {
    /// Bytes of reverse-map structures now.
    pub bytes: u64,
    /// Most bytes at any moment.
    pub bytes_peak: u64,
    /// Structures (chain nodes, grouped lines, anon_vmas and chains) now.
    pub objects: u64,
    /// Most structures at any moment.
    pub objects_peak: u64,
    /// Entries added to the method's structures.
    pub adds: u64,
    /// Entries removed from them.
    pub removes: u64,
    /// Entries examined to find the one to remove, over every removal.
    pub remove_entries_walked: u64,
    /// Separate allocations (cache lines) touched doing so.
    pub remove_lines_walked: u64,
    /// A reclaim pass over every page still mapped at the end: pages unmapped.
    pub reclaim_pages: u64,
    /// ... chain entries followed.
    pub reclaim_entries_walked: u64,
    /// ... VMAs visited.
    pub reclaim_vmas_walked: u64,
    /// ... page tables walked to find a PTE.
    pub reclaim_page_tables_walked: u64,
}

/// Every method's counters, kept side by side.
#[derive(Clone, Debug)]
pub struct RmapCosts {
    sizes: RmapSizes,
    stats: [MethodStats; 6],
    dirty: bool,
}

fn uses_chain(m: Method, kind: PageKind) -> bool {
    match m {
        Method::PteChains | Method::PteChainsDirect | Method::PteChainsGrouped => true,
        Method::PartialObjrmap => kind == PageKind::Anon,
        Method::Objrmap | Method::Linux => false,
    }
}

impl RmapCosts {
    /// Zeroed counters for these sizes.
    pub fn new(sizes: RmapSizes) -> RmapCosts {
        RmapCosts {
            sizes,
            stats: Default::default(),
            dirty: false,
        }
    }

    /// The sizes in use.
    pub fn sizes(&self) -> RmapSizes {
        self.sizes
    }

    /// A PTE now maps `n` pages of `kind` that each had `len` mappings.
    #[inline]
    pub fn add(&mut self, kind: PageKind, len: u64, n: u64) {
        for (i, &m) in METHODS.iter().enumerate() {
            if !uses_chain(m, kind) {
                continue;
            }
            let (o0, b0) = self.sizes.chain(m, len);
            let (o1, b1) = self.sizes.chain(m, len + 1);
            let s = &mut self.stats[i];
            s.objects += (o1 - o0) * n;
            s.bytes += (b1 - b0) * n;
            s.adds += n;
        }
        self.dirty = true;
    }

    /// The entry at 1-based `pos` of `n` chains of `len` went away.
    pub fn remove(&mut self, kind: PageKind, len: u64, pos: u64, n: u64) {
        self.settle();
        let per = self.sizes.per_line();
        for (i, &m) in METHODS.iter().enumerate() {
            if !uses_chain(m, kind) {
                continue;
            }
            let (o0, b0) = self.sizes.chain(m, len);
            let (o1, b1) = self.sizes.chain(m, len - 1);
            let direct = len == 1 && m != Method::PteChains;
            let lines = match m {
                _ if direct => 0,
                Method::PteChains | Method::PteChainsDirect => pos,
                _ => pos.div_ceil(per),
            };
            let s = &mut self.stats[i];
            s.objects -= (o0 - o1) * n;
            s.bytes -= (b0 - b1) * n;
            s.removes += n;
            s.remove_entries_walked += if direct { 0 } else { pos * n };
            s.remove_lines_walked += lines * n;
        }
    }

    /// `anon_vmas` and `chains` were created (positive) or freed (negative)
    /// for today's kernel.
    pub fn linux_structs(&mut self, anon_vmas: i64, chains: i64) {
        self.settle();
        let s = &mut self.stats[5];
        let bytes = anon_vmas * self.sizes.anon_vma_bytes as i64
            + chains * self.sizes.anon_vma_chain_bytes as i64;
        s.objects = (s.objects as i64 + anon_vmas + chains) as u64;
        s.bytes = (s.bytes as i64 + bytes) as u64;
        if chains > 0 {
            s.adds += chains as u64;
        } else {
            s.removes += (-chains) as u64;
        }
        self.dirty = true;
    }

    /// Counts unmapping `n` pages of `kind` with `len` mappings each at
    /// reclaim, where `vmas_all` VMAs map the page's object and `vmas_cover`
    /// of them cover the page.
    pub fn reclaim(&mut self, kind: PageKind, len: u64, vmas_all: u64, vmas_cover: u64, n: u64) {
        for (i, &m) in METHODS.iter().enumerate() {
            let s = &mut self.stats[i];
            s.reclaim_pages += n;
            if uses_chain(m, kind) {
                s.reclaim_entries_walked += len * n;
            } else {
                let vmas = if m == Method::Linux {
                    vmas_cover
                } else {
                    vmas_all
                };
                s.reclaim_vmas_walked += vmas * n;
                s.reclaim_page_tables_walked += vmas_cover * n;
            }
        }
    }

    /// Folds the current values into the peaks (growth only moves them up,
    /// so this is done before anything shrinks and when reading).
    #[inline]
    pub fn settle(&mut self) {
        if self.dirty {
            for s in &mut self.stats {
                s.bytes_peak = s.bytes_peak.max(s.bytes);
                s.objects_peak = s.objects_peak.max(s.objects);
            }
            self.dirty = false;
        }
    }

    /// The counters, keyed by method name.
    pub fn report(&mut self) -> BTreeMap<Method, MethodStats> {
        self.settle();
        METHODS
            .iter()
            .copied()
            .zip(self.stats.iter().cloned())
            .collect()
    }

    /// One method's counters.
    pub fn get(&mut self, m: Method) -> MethodStats {
        self.settle();
        self.stats[METHODS.iter().position(|&x| x == m).unwrap_or(0)].clone()
    }
}
