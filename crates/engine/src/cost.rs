//! Time: every page size's run through its TLB, its walk caches and its data
//! caches, each reference at the physical address its page got, in one pass.
//!
//! The model is in order and additive: an instruction costs `base_cpi`, a
//! translation the cycles of the TLB level that hit (a miss: the last
//! level's, then the walk, each entry read through the caches one after the
//! other), a data reference the latency of the cache level that held its
//! line. No prefetching and no bandwidth limit; misses overlap only where the
//! machine gives `[overlap]` and the study's references are independent
//! ([`CostStudy::set_independent`]; [`pagelab_cache::overlap`] says how).

use crate::machine_cost::{host_layout, CostMachine};
use crate::study::PageCounts;
use pagelab_cache::overlap::TICKS;
use pagelab_cache::{Caches, Host, Line, Overlap, OverlapSpec, PageTable, SharedFirst, SharedLine};
use pagelab_core::{PageSize, VirtAddr};
use pagelab_report::{CacheLevelCost, CostStats, RunStats};
use pagelab_tlb::{Outcome, Side, TlbError, TlbHierarchy};

/// What a study of time simulates beyond the TLB.
#[derive(Clone, Debug)]
pub struct CostConfig {
    /// The machine: page table, caches, latencies.
    pub machine: CostMachine,
    /// Nested paging with this host page size (4K, 2M or 1G), if any.
    pub nested_host: Option<PageSize>,
}

const SIDES: [Side; 2] = [Side::Instr, Side::Data];
/// The smallest page's shift: a fetch that stays within one such page stays within one page of
/// every run, so it translates once per run (and repeats one the last fetch translated).
const MIN_PAGE_SHIFT: u32 = PageSize::MIN.shift();
/// The host's frames start far above the guest's, so the two never meet.
const HOST_BASE: u64 = 1 << 44;

mod feed;
mod parts;
mod run;
pub use parts::CostParts;
use run::Run;

/// The time of every page size's run, fed the same references as a [`crate::Study`].
pub struct CostStudy {
    runs: Vec<Run>,
    /// The runs' first cache level, shared when its sets lie within the
    /// smallest page (see [`SharedFirst`]).
    shared: Option<SharedFirst>,
    /// The TLB-hit cycles of level 1, level 2, and of a miss (the last level's).
    hit: [u32; 3],
    base_cpi: f64,
    line_shift: u32,
    l1_latency: u32,
    instrs: u64,
    data_refs: u64,
    /// References that repeat the last instruction page, or the last data line or
    /// its L1 entry while its line is a hit in every run's first cache level: hits in
    /// every run's L1 TLB (and L1 cache), counted once here.
    instr_repeats: u64,
    data_repeats: u64,
    /// Loads, and those among the repeats.
    loads: u64,
    load_repeats: u64,
    last_instr_page: u64,
    last_line: u64,
    /// The bits of a data address that name every run's L1 entry for it (the smallest
    /// run's [`Run::memo_shift`]), when a data line in the page of the last data line
    /// looked up can be counted once for all runs (a shared first level, no nested
    /// paging); and that page.
    page_memo: Option<u32>,
    last_data_page: u64,
    /// The machine's misses in flight, if it overlaps them.
    overlap: Option<OverlapSpec>,
    /// Whether the data references are independent (and the runs overlap their misses).
    independent: bool,
    /// `base_cpi` in ticks of the overlap clock.
    cpi_ticks: u64,
    /// Whether the runs keep the study's counts ([`CostStudy::count_pages`]).
    counting: bool,
}

// SAFETY: a study is `!Send` only for the `Rc` of its shared first level ([`SharedFirst`]),
// and every clone of that `Rc` lives inside this one study: in its private `shared` and in
// its private runs' caches ([`pagelab_cache::Caches::share_first`] is called on them in
// `build` alone). The study is not `Clone` and hands out neither, so moving it to another
// thread moves every clone together: no two threads ever hold clones of one `Rc`, and
// its `RefCell` is only borrowed by the thread that owns the whole study.
unsafe impl Send for CostStudy {}

impl CostStudy {
    /// Runs of `sizes` on `cfg`'s machine.
    pub fn new(sizes: &[PageSize], cfg: &CostConfig) -> Result<CostStudy, String> {
        Self::build(sizes, cfg, true)
    }

    /// Runs of `sizes`, their first cache level shared where it can be
    /// when `share` (the answers are the same either way).
    fn build(sizes: &[PageSize], cfg: &CostConfig, share: bool) -> Result<CostStudy, String> {
        let m = &cfg.machine;
        let host = cfg.nested_host.map(host_layout).transpose()?;
        let nested = m.cost.nested.clone().unwrap_or_default();
        if host.is_some() && m.cost.nested.is_none() {
            return Err(format!(
                "--virt nested: machine {} has no [nested] section (nested TLB and host walk caches)",
                m.name
            ));
        }
        let mut runs = sizes
            .iter()
            .map(|&size| {
                let tlb = TlbHierarchy::new(&m.tlb).map_err(|e: TlbError| e.to_string())?;
                let tlb_size = cfg.nested_host.map_or(size, |h| size.min(h));
                Ok(Run {
                    size,
                    tlb_size,
                    memo_shift: SIDES.map(|side| tlb.l1_entry_shift(side, tlb_size)),
                    tlb,
                    caches: Caches::new(&m.cost),
                    pt: PageTable::placed(
                        m.layout(size),
                        &m.cost.walk_caches.entries,
                        0,
                        m.placement(),
                    ),
                    host: host.map(|l| {
                        let h = Host::new(
                            PageTable::placed(
                                l,
                                &nested.walk_cache_entries,
                                HOST_BASE,
                                m.host_placement(),
                            ),
                            nested.ntlb_entries,
                        );
                        match (nested.block_miss, nested.block_entries) {
                            (None, _) => h,
                            (Some(miss), 0) => h.with_blocks_in_tlb(miss),
                            (Some(miss), entries) => h.with_blocks(entries, miss),
                        }
                    }),
                    last: [u64::MAX; 2],
                    last_base: [0; 2],
                    tlb_cycles: 0,
                    data_cycles: 0,
                    walk_cycles: 0,
                    walk_miss_cycles: 0,
                    walk_refs: 0,
                    walks: [0; 2],
                    walk_cache_hits: 0,
                    load_cycles: 0,
                    frame_known: [false; 2],
                    va: 0,
                    paddr: 0,
                    overlap: None,
                    pending: (0, 0, 0, 0),
                    hidden: 0,
                    load_hidden: 0,
                    l1_latency: m.cost.caches.l1d.latency as u64,
                    walk_extra: m.cost.costs.walk.into(),
                    block_interval: nested.block_interval.into(),
                    block_busy: 0,
                    block_misses: 0,
                    counts: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let t = &m.cost.costs.tlb_hit;
        let caches = Caches::new(&m.cost);
        let shared = shareable(&runs)
            .filter(|_| share)
            .and_then(|(page, va_mask)| SharedFirst::new(&caches, page, va_mask));
        if let Some(s) = &shared {
            for run in &mut runs {
                run.caches.share_first(s);
            }
        }
        let page_memo = runs
            .iter()
            .map(|r| r.memo_shift[1])
            .min()
            .filter(|_| shared.is_some() && host.is_none());
        Ok(CostStudy {
            runs,
            shared,
            hit: [t[0], *t.get(1).unwrap_or(&t[0]), *t.last().unwrap_or(&0)],
            base_cpi: m.cost.costs.base_cpi,
            line_shift: caches.l1_line_shift(),
            l1_latency: caches.l1_latency(),
            instrs: 0,
            data_refs: 0,
            instr_repeats: 0,
            data_repeats: 0,
            loads: 0,
            load_repeats: 0,
            last_instr_page: u64::MAX,
            last_line: u64::MAX,
            page_memo,
            last_data_page: u64::MAX,
            overlap: m.cost.overlap.clone(),
            independent: false,
            cpi_ticks: (m.cost.costs.base_cpi * TICKS as f64).round() as u64,
            counting: false,
        })
    }

    /// Makes every run also count what the page-size study's figures need beside its TLB's
    /// counters ([`CostStudy::study_runs`]), so that a [`crate::Study`] of the same sizes
    /// and TLB need not make the same lookups again. Where each L1 entry is a whole page,
    /// each run looks up every page access the study's run would (a repeat of its last
    /// L1 entry aside, an L1 hit that changes nothing), in the same order, in a TLB of the
    /// same configuration, so they agree. Not so where an L1 caches fragments of a run's
    /// pages (a run looks each fragment up, the study each page: they part on references
    /// that span fragments of one page), nor under nested paging (a run's TLB caches
    /// entries of the host's size where it is the smaller). Returns whether the runs
    /// count; call it before the first [`CostStudy::feed`].
    pub fn count_pages(&mut self) -> bool {
        if !self.can_count_pages() {
            return false;
        }
        for run in &mut self.runs {
            run.counts = Some(Box::default());
        }
        self.counting = true;
        true
    }

    /// Whether [`CostStudy::count_pages`] would make the runs count.
    pub fn can_count_pages(&self) -> bool {
        let shift = |r: &Run| r.size.shift();
        self.runs
            .iter()
            .all(|r| r.tlb_size == r.size && r.memo_shift == [shift(r); 2])
    }

    /// Whether runs of `sizes` on `cfg` could count the study's figures
    /// ([`CostStudy::count_pages`]), told without building them: no nested paging, and
    /// every L1 entry of the machine's TLB a whole page of each size.
    pub fn could_count_pages(sizes: &[PageSize], cfg: &CostConfig) -> bool {
        let Ok(tlb) = TlbHierarchy::new(&cfg.machine.tlb) else {
            return false;
        };
        cfg.nested_host.is_none()
            && sizes.iter().all(|&s| {
                SIDES
                    .iter()
                    .all(|&side| tlb.l1_entry_shift(side, s) == s.shift())
            })
    }

    /// References fed so far (instruction plus data); none in a study of no size.
    pub fn refs(&self) -> u64 {
        self.instrs + self.data_refs
    }

    /// The page-size study's figures of every run, as a [`crate::Study`] of the same sizes
    /// on the same TLB gives them (`cost` left empty), and the references per side (instruction,
    /// data) they come from; `None` unless [`CostStudy::count_pages`] made the runs count.
    pub fn study_runs(&self) -> Option<([u64; 2], Vec<RunStats>)> {
        let refs = [self.instrs, self.data_refs];
        let runs = self.runs.iter().map(|run| {
            let counts = run.counts.as_deref()?;
            Some(counts.stats(run.size, &run.tlb, refs))
        });
        Some((refs, runs.collect::<Option<Vec<_>>>()?))
    }

    /// Says that the data references to come do not depend on one another (a stride's,
    /// a stream's, gups's updates; not a pointer chase's), so that a machine with
    /// `[overlap]` overlaps their misses. Call it before the first [`CostStudy::feed`].
    /// Without it, or on a machine without `[overlap]`, every latency is paid in full.
    pub fn set_independent(&mut self, independent: bool) {
        self.independent = independent && self.overlap.is_some();
        for run in &mut self.runs {
            run.overlap = match (&self.overlap, independent) {
                (Some(spec), true) => Some(Overlap::new(spec)),
                _ => None,
            };
        }
    }

    /// Data TLB misses of each run, in the order of `sizes` (for checks
    /// against the study's own count).
    pub fn dtlb_misses(&self) -> Vec<u64> {
        self.runs.iter().map(|r| r.walks[1]).collect()
    }

    /// Each run's time, in the order of `sizes`, with its speed-up over the
    /// 4K run when there is one.
    pub fn finish(&self) -> Vec<CostStats> {
        let refs = self.instrs + self.data_refs;
        let mut out: Vec<CostStats> = self
            .runs
            .iter()
            .map(|run| {
                // The repeats were L1 hits (counted here, not by cloning the caches).
                let mut counts = run.caches.counts().to_vec();
                counts[0].data_accesses += self.data_repeats;
                let instr_cycles = (self.instrs as f64 * self.base_cpi).round() as u64;
                let tlb_cycles =
                    run.tlb_cycles + (self.instr_repeats + self.data_repeats) * self.hit[0] as u64;
                let data_cycles = run.data_cycles + self.data_repeats * self.l1_latency as u64;
                let (hidden, load_hidden) = (run.hidden / TICKS, run.load_hidden / TICKS);
                let walk_cycles = run.walk_cycles;
                let cycles =
                    (instr_cycles + tlb_cycles + data_cycles + walk_cycles).saturating_sub(hidden);
                let load_cycles = (run.load_cycles
                    + self.load_repeats * (self.hit[0] + self.l1_latency) as u64)
                    .saturating_sub(load_hidden);
                CostStats {
                    cycles,
                    cycles_per_ref: ratio(cycles, refs),
                    cycles_per_data_ref: ratio(cycles, self.data_refs),
                    instr_cycles,
                    tlb_cycles,
                    data_cycles,
                    loads: self.loads,
                    load_cycles,
                    cycles_per_load: ratio(load_cycles, self.loads),
                    walks: run.walks[0] + run.walks[1],
                    walk_refs: run.walk_refs,
                    walk_cycles,
                    walk_cache_hits: run.walk_cache_hits,
                    host_block_misses: run.block_misses,
                    overlapped_cycles: hidden,
                    caches: counts
                        .iter()
                        .map(|c| CacheLevelCost {
                            level: c.level.to_string(),
                            data_accesses: c.data_accesses,
                            data_misses: c.data_misses,
                            table_accesses: c.table_accesses,
                            table_misses: c.table_misses,
                        })
                        .collect(),
                    speedup_over_4k: None,
                }
            })
            .collect();
        let sizes: Vec<PageSize> = self.runs.iter().map(|r| r.size).collect();
        with_speedups(&sizes, &mut out);
        out
    }
}

/// Sets each run's speed-up over the 4K run, where there is one (`out` in the order of
/// `sizes`); else leaves them `None`.
fn with_speedups(sizes: &[PageSize], out: &mut [CostStats]) {
    if let Some(at) = sizes.iter().position(|&s| s == PageSize::K4) {
        let base = out[at].cycles;
        for c in out.iter_mut() {
            c.speedup_over_4k = Some(ratio(base, c.cycles));
        }
    }
}

/// Whether the data references of the input `info` names do not depend on one
/// another: those of the built-in workloads whose addresses come from a counter or a
/// generator of their own (`stride`, `stream`, `gups`, `lines:order=independent`), not
/// from the data they load (a `chase`, or `lines` by default, loads each address from
/// the line before). A trace says nothing of its dependences, so its references are
/// taken as dependent (every latency paid in full).
pub fn independent_refs(info: &pagelab_core::SourceInfo) -> bool {
    info.kind == "workload"
        && match info.name.as_str() {
            "stride" | "stream" | "gups" => true,
            "lines" => info.params.get("order").is_some_and(|o| o == "independent"),
            _ => false,
        }
}

/// The smallest page of `runs` and the address bits their tables
/// translate, when every table translates the same bits (a data line's
/// physical line then follows from its virtual line alone in every run).
fn shareable(runs: &[Run]) -> Option<(u64, u64)> {
    let va_mask = runs.first()?.pt.va_mask();
    // The smallest page a run's TLB entries map (under nested paging no larger than the
    // host's page: see `Run::tlb_size`).
    let page = runs.iter().map(|r| r.tlb_size.bytes()).min()?;
    runs.iter()
        .all(|r| r.pt.va_mask() == va_mask)
        .then_some((page, va_mask))
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
#[path = "cost_shared_tests.rs"]
mod shared_tests;
