//! The versioned result schema: what one simulation (or a study of several) produced.
//!
//! Field names are a contract with other tools: later versions add fields, never rename them.
//! Unknown fields are ignored on reading so that an older pagelab can read a newer result.

use pagelab_core::{PageSize, SourceInfo};
use serde::{Deserialize, Serialize};

/// The `schema` string of a [`SimResult`].
pub const SIM_SCHEMA: &str = "pagelab.sim/1";
/// The `schema` string of a [`StudyResult`].
pub const STUDY_SCHEMA: &str = "pagelab.study/1";

/// The result of simulating one trace source under several page sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Always [`SIM_SCHEMA`]; checked by [`crate::load_sim`].
    pub schema: String,
    /// Where the trace came from.
    pub source: SourceInfo,
    /// The TLB configuration, as its owner serialized it (any JSON).
    #[serde(default)]
    pub tlb: serde_json::Value,
    /// How many references the trace held.
    pub refs: RefCounts,
    /// One entry per simulated page size, smallest first by convention.
    pub runs: Vec<RunStats>,
    /// Wall-clock time of the simulation, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_seconds: Option<f64>,
    /// What made the result (absent inside a study, whose own provenance covers it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::Provenance>,
    /// The machine whose caches and latencies timed the runs
    /// (`--cost MACHINE`, and `nested:host=SIZE` under `--virt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

impl Default for SimResult {
    /// An empty result carrying the right schema string; fill the rest with struct update syntax.
    fn default() -> Self {
        SimResult {
            schema: SIM_SCHEMA.to_string(),
            source: SourceInfo::default(),
            tlb: serde_json::Value::Null,
            refs: RefCounts::default(),
            runs: Vec::new(),
            elapsed_seconds: None,
            provenance: None,
            machine: None,
        }
    }
}

impl SimResult {
    /// A short name for the TLB: its `name` field if the config has one, else the config as
    /// compact JSON (`-` when there is no config at all).
    pub fn tlb_name(&self) -> String {
        match &self.tlb {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(s) => s.clone(),
            v => match v.get("name").and_then(|n| n.as_str()) {
                Some(name) => name.to_string(),
                None => v.to_string(),
            },
        }
    }

    /// The source as people read it: `workload stride (len=1000, step=4K)`.
    pub fn source_label(&self) -> String {
        let s = &self.source;
        let mut out = format!("{} {}", s.kind, s.name);
        if let Some(c) = &s.compression {
            out.push_str(&format!(" [{c}]"));
        }
        if !s.params.is_empty() {
            let params: Vec<String> = s.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!(" ({})", params.join(", ")));
        }
        out
    }
}

/// How many memory references of each kind a trace held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefCounts {
    /// Instruction fetches.
    pub instr: u64,
    /// Data loads, stores and modifies.
    pub data: u64,
}

/// What happened under one page size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// The page size simulated (bytes in JSON).
    pub page_size: PageSize,
    /// Lookups in the instruction TLB.
    pub itlb_accesses: u64,
    /// Instruction TLB misses.
    pub itlb_misses: u64,
    /// Lookups in the data TLB.
    pub dtlb_accesses: u64,
    /// Data TLB misses.
    pub dtlb_misses: u64,
    /// Memory touched by instruction fetches, rounded up to whole pages.
    pub code_footprint_bytes: u64,
    /// Memory touched by data references, rounded up to whole pages.
    pub data_footprint_bytes: u64,
    /// All memory touched, rounded up to whole pages (a page used for both counts once).
    pub footprint_bytes: u64,
    /// Page faults: first touches of a page.
    pub faults: u64,
    /// Per-level TLB counters, when the TLB has levels worth reporting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tlb_levels: Vec<LevelStats>,
    /// The memory-management model's figures, for a run under a policy
    /// (`pagelab sim --policy`); absent from a fixed-page-size study.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub mm: Option<PolicyStats>,
    /// The estimated time, when the machine gives caches and latencies
    /// (`pagelab sim --cost MACHINE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::CostStats>,
}

/// What a run of the memory-management model adds to a run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyStats {
    /// The policy, as given on the command line (`base:64K`, `linux-thp:...`).
    pub policy: String,
    /// Faults by the size of the page each mapped, as `{"4K": n, "2M": n}`.
    pub faults_by_size: std::collections::BTreeMap<String, u64>,
    /// Bytes mapped at the end, whole pages (internal fragmentation included).
    pub rss_bytes: u64,
    /// The highest `rss_bytes` during the run.
    pub peak_rss_bytes: u64,
    /// Page-table memory at the end, all processes.
    pub page_table_bytes: u64,
    /// Memory references made by page walks (table levels touched on TLB misses).
    pub walk_refs: u64,
    /// Pages promoted to a larger size.
    pub promotions: u64,
    /// Pages demoted to smaller ones.
    pub demotions: u64,
    /// Reservations preempted.
    pub preemptions: u64,
    /// Bytes copied (relocation, copy-on-write).
    pub copied_bytes: u64,
    /// Bytes zeroed for new pages.
    pub zeroed_bytes: u64,
    /// The fragmentation figure at the end: the unusable free space index at
    /// the large page order (0 = all free memory usable, 1 = none).
    pub fragmentation: f64,
    /// Its worst (highest) value during the run.
    pub fragmentation_worst: f64,
    /// Events the trace contradicted itself with, or the model does not carry out yet.
    pub anomalies: std::collections::BTreeMap<String, u64>,
    /// Bytes reclaimed: anonymous pages swapped out plus page-cache folios dropped.
    #[serde(default)]
    pub reclaimed_bytes: u64,
    /// Bytes of anonymous pages swapped out.
    #[serde(default)]
    pub swapped_out_bytes: u64,
    /// Bytes of swapped-out memory read back by faults.
    #[serde(default)]
    pub swapped_in_bytes: u64,
    /// Bytes in swap at the end.
    #[serde(default)]
    pub swap_bytes: u64,
    /// Faults that read from disk: swap-ins and page-cache misses (Linux's `maj_flt`).
    #[serde(default)]
    pub major_faults: u64,
    /// Of those, faults on swapped-out memory.
    #[serde(default)]
    pub swap_in_faults: u64,
    /// Bytes of page-cache folios dropped by reclaim.
    #[serde(default)]
    pub cache_dropped_bytes: u64,
    /// Bytes of dirty page-cache data written back before being dropped.
    #[serde(default)]
    pub written_back_bytes: u64,
    /// Bytes read into the page cache at faults.
    #[serde(default)]
    pub file_read_bytes: u64,
    /// Faults that mapped a whole page-cache folio larger than the base page.
    #[serde(default)]
    pub file_superpage_faults: u64,
    /// Times reclaim ran because an allocation took a zone below its low watermark.
    #[serde(default)]
    pub kswapd_runs: u64,
    /// Times reclaim ran because an allocation failed.
    #[serde(default)]
    pub direct_reclaims: u64,
    /// LRU pages reclaim looked at.
    #[serde(default)]
    pub reclaim_scanned: u64,
    /// Superpages reclaim split before reclaiming their base pages.
    #[serde(default)]
    pub reclaim_splits: u64,
    /// Reservations reclaim preempted before reclaiming mapped pages.
    #[serde(default)]
    pub reclaim_preemptions: u64,
    /// Faults by the pid of the task that took them, when the trace has several
    /// processes (a vfork child's in its parent's address space are its own).
    #[serde(default, skip_serializing_if = "faults_of_one_task")]
    pub faults_by_pid: std::collections::BTreeMap<u32, u64>,
    /// The policy's own counters (for linux-thp: `anon_fault_alloc`, `anon_fault_fallback` per size).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub policy_counters: serde_json::Value,
    /// Each process's mappings at its exit, in exit order, when the run was asked to keep
    /// them (`validate --per-mapping`): `[{"pid", "mappings": [{"start", "end", "name",
    /// "pages", "folios": {"64K": n}}]}]` (see [`crate::validate_mappings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_mappings: Option<serde_json::Value>,
    /// The kernel's own memory on a machine given by `--machine`: struct page,
    /// page clustering, `mem_map_bytes`, and on a 32-bit kernel its low memory
    /// and the peak of the page tables the kernel kept there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<serde_json::Value>,
    /// On a machine of several NUMA nodes: the memory policy, local and
    /// remote allocations (count and bytes) and references, and per node its
    /// memory, processes, allocations and references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<serde_json::Value>,
    /// On a machine with per-CPU hot and cold page lists (`[pcp]`, `--pcp`):
    /// their sizes, the order-0 allocations they served (hot and cold), those
    /// the buddy allocator served, and the buddy-lock acquisitions with and
    /// without the lists (docs/formats.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<serde_json::Value>,
}

impl RunStats {
    /// A run with every counter at zero.
    pub fn new(page_size: PageSize) -> Self {
        RunStats {
            page_size,
            itlb_accesses: 0,
            itlb_misses: 0,
            dtlb_accesses: 0,
            dtlb_misses: 0,
            code_footprint_bytes: 0,
            data_footprint_bytes: 0,
            footprint_bytes: 0,
            faults: 0,
            tlb_levels: Vec::new(),
            mm: None,
            cost: None,
        }
    }

    /// iTLB misses per access, in percent; `None` without accesses.
    pub fn itlb_miss_percent(&self) -> Option<f64> {
        percent(self.itlb_misses, self.itlb_accesses)
    }

    /// dTLB misses per access, in percent; `None` without accesses.
    pub fn dtlb_miss_percent(&self) -> Option<f64> {
        percent(self.dtlb_misses, self.dtlb_accesses)
    }
}

/// Counters of one TLB level (`l1i`, `l1d`, `l2`, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelStats {
    /// The level's name, such as `l1i`.
    pub level: String,
    /// Lookups that reached this level.
    pub accesses: u64,
    /// Lookups this level answered.
    pub hits: u64,
    /// Lookups this level passed on.
    pub misses: u64,
}

/// Several simulations, one per workload or trace, in one file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyResult {
    /// Always [`STUDY_SCHEMA`]; checked by [`crate::load_study`].
    pub schema: String,
    /// One result per source, in the order they were run.
    pub results: Vec<SimResult>,
    /// What made the study.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::Provenance>,
}

impl StudyResult {
    /// A study holding `results`, with the right schema string.
    pub fn new(results: Vec<SimResult>) -> Self {
        StudyResult {
            schema: STUDY_SCHEMA.to_string(),
            results,
            provenance: None,
        }
    }
}

impl Default for StudyResult {
    fn default() -> Self {
        StudyResult::new(Vec::new())
    }
}

/// Anything that holds simulation results: one [`SimResult`], a [`StudyResult`] or a slice.
///
/// Every exporter takes `&impl Results` (or `&dyn Results`) so that one code path serves both.
pub trait Results {
    /// The results, in order.
    fn results(&self) -> &[SimResult];
}

impl Results for SimResult {
    fn results(&self) -> &[SimResult] {
        std::slice::from_ref(self)
    }
}

impl Results for StudyResult {
    fn results(&self) -> &[SimResult] {
        &self.results
    }
}

impl Results for [SimResult] {
    fn results(&self) -> &[SimResult] {
        self
    }
}

impl Results for Vec<SimResult> {
    fn results(&self) -> &[SimResult] {
        self
    }
}

fn percent(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

fn faults_of_one_task(m: &std::collections::BTreeMap<u32, u64>) -> bool {
    m.len() < 2
}
