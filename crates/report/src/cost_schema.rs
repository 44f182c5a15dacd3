//! What a run's time came to, when the machine gives caches and latencies.

use serde::{Deserialize, Serialize};

/// Estimated time of one run (see `docs/cost.md`): an in-order, additive
/// model of instructions, TLB hits, walks and data references through the caches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostStats {
    /// All cycles: `instr_cycles + tlb_cycles + walk_cycles + data_cycles -
    /// overlapped_cycles`.
    pub cycles: u64,
    /// Cycles per reference (instruction fetches and data references).
    pub cycles_per_ref: f64,
    /// Cycles per data reference (Winwood et al.'s (OLS 2002) "per access").
    pub cycles_per_data_ref: f64,
    /// Instructions times the machine's base cycles per instruction.
    pub instr_cycles: u64,
    /// Cycles of TLB lookups (hits, and the last level's lookup before a walk).
    pub tlb_cycles: u64,
    /// Cycles of data references: the latency of the level holding each line.
    pub data_cycles: u64,
    /// Loads (data references of kind load; a benchmark's accesses when its
    /// stores only initialise, as the stride workload's).
    #[serde(default)]
    pub loads: u64,
    /// Cycles of the loads alone: their translations, walks and cache
    /// latencies (no instruction cycles).
    #[serde(default)]
    pub load_cycles: u64,
    /// `load_cycles / loads`: what one load costs in memory.
    #[serde(default)]
    pub cycles_per_load: f64,
    /// Page walks (TLB misses, both sides).
    pub walks: u64,
    /// Memory references of the walks (page-table entries read; up to 24 per
    /// walk under nested paging).
    pub walk_refs: u64,
    /// Cycles of those references, through the caches.
    pub walk_cycles: u64,
    /// Walks that a walk cache let start below the root.
    pub walk_cache_hits: u64,
    /// Guest-physical addresses the walks had the host translate in a 2M block whose
    /// translation the host's block translations did not hold (`[nested] block_miss`;
    /// 0 otherwise, and then not written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_block_misses: u64,
    /// Cycles of TLB lookups, walks and data references hidden behind other
    /// misses in flight (independent references on a machine with `[overlap]`;
    /// 0 otherwise, and then not written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overlapped_cycles: u64,
    /// Per cache level, nearest first: lookups and misses of data lines and of
    /// page-table lines.
    pub caches: Vec<CacheLevelCost>,
    /// Cycles of the 4K run over this run's, when the study has a 4K run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_over_4k: Option<f64>,
}

/// One cache level's counters, data and page-table lines apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLevelCost {
    /// `l1d`, `l2` or `l3`.
    pub level: String,
    /// Lookups of data lines.
    pub data_accesses: u64,
    /// Data lines not found.
    pub data_misses: u64,
    /// Lookups of page-table lines.
    pub table_accesses: u64,
    /// Page-table lines not found.
    pub table_misses: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
