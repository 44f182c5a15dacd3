//! What a study's runs count beside their TLBs, and the `pagelab.sim/1` result built
//! from it: shared by the page-size study, the cost model's runs and the policies.

use pagelab_core::{PageSize, SourceInfo};
use pagelab_report::{LevelStats, RefCounts, RunStats, SimResult, SIM_SCHEMA};
use pagelab_tlb::{Outcome, TlbConfig, TlbHierarchy};
use rustc_hash::FxHashSet;

/// Each level's counters of `tlb`, with `add[side]` L1 hits answered before the
/// model saw them (repeat filters) and `sub[side]` lookups that were no
/// accesses of their own (replays), for the instruction and data L1s.
pub(crate) fn level_stats(tlb: &TlbHierarchy, add: [u64; 2], sub: [u64; 2]) -> Vec<LevelStats> {
    let t = tlb.stats();
    let named = [
        ("l1i", Some(t.l1i)),
        ("l1d", Some(t.l1d)),
        ("l2", t.l2),
        ("l2i", t.l2i),
        ("l2d", t.l2d),
    ];
    named
        .into_iter()
        .filter_map(|(name, l)| {
            let side = ["l1i", "l1d"].iter().position(|n| *n == name);
            let (plus, minus) = side.map_or((0, 0), |s| (add[s], sub[s]));
            l.map(|l| LevelStats {
                level: name.to_string(),
                accesses: l.accesses + plus - minus,
                hits: l.hits + plus - minus,
                misses: l.misses,
            })
        })
        .collect()
}

/// A study's result: `runs` in the configuration's order, after `refs` references per side
/// through the TLB `tlb` (as JSON).
pub(crate) fn sim_result(
    source: SourceInfo,
    tlb: serde_json::Value,
    refs: [u64; 2],
    runs: Vec<RunStats>,
) -> SimResult {
    SimResult {
        schema: SIM_SCHEMA.to_string(),
        source,
        tlb,
        refs: RefCounts {
            instr: refs[0],
            data: refs[1],
        },
        runs,
        elapsed_seconds: None,
        provenance: None,
        machine: None,
    }
}

/// The JSON of a study's TLB, as its result carries it.
pub(crate) fn tlb_json(tlb: &TlbConfig) -> serde_json::Value {
    serde_json::to_value(tlb).unwrap_or(serde_json::Value::Null)
}

/// What a run of one page size counts beside its TLB's own counters, to give the study's
/// figures ([`PageCounts::stats`]): kept by the study's runs, and by the cost model's where
/// they stand in for them (see [`crate::CostStudy::count_pages`]).
#[derive(Default)]
pub(crate) struct PageCounts {
    /// Extra page accesses per side: pages after the first of references spanning pages.
    pub(crate) extra: [u64; 2],
    /// Page accesses per side that missed every TLB level.
    pub(crate) misses: [u64; 2],
    /// Replayed lookups, to take out of the TLB's own L1 counters.
    pub(crate) replays: [u64; 2],
    /// Distinct pages touched per side, and by either side.
    pub(crate) pages: [FxHashSet<u64>; 2],
    pub(crate) all_pages: FxHashSet<u64>,
}

impl PageCounts {
    /// A lookup of page `vpn` on `side` that missed the side's L1 with `outcome`. Only such
    /// a miss can be this side's first touch of a page (an L2 shared by both sides may
    /// already hold it).
    #[inline]
    pub(crate) fn missed_l1(&mut self, side: usize, vpn: u64, outcome: Outcome) {
        if outcome == Outcome::Miss {
            self.misses[side] += 1;
        }
        if self.pages[side].insert(vpn) {
            self.all_pages.insert(vpn);
        }
    }

    /// The run's figures, in the `pagelab.sim/1` schema, for pages of `size` looked up in
    /// `tlb`, after `refs` references per side. Every page access the TLB did not see (the
    /// repeats filtered before it) was an L1 hit.
    pub(crate) fn stats(&self, size: PageSize, tlb: &TlbHierarchy, refs: [u64; 2]) -> RunStats {
        let bytes = size.bytes();
        let accesses = [refs[0] + self.extra[0], refs[1] + self.extra[1]];
        // L1 lookups the model made (replays included) are fewer than the page
        // accesses by the ones filtered as hits before reaching it.
        let t = tlb.stats();
        let lookups = [t.l1i.accesses, t.l1d.accesses];
        let filtered = [0, 1].map(|s| accesses[s] + self.replays[s] - lookups[s]);
        RunStats {
            page_size: size,
            itlb_accesses: accesses[0],
            itlb_misses: self.misses[0],
            dtlb_accesses: accesses[1],
            dtlb_misses: self.misses[1],
            code_footprint_bytes: self.pages[0].len() as u64 * bytes,
            data_footprint_bytes: self.pages[1].len() as u64 * bytes,
            footprint_bytes: self.all_pages.len() as u64 * bytes,
            faults: self.all_pages.len() as u64,
            tlb_levels: level_stats(tlb, filtered, self.replays),
            mm: None,
            cost: None,
        }
    }
}
