//! The data caches of one core, nearest first, and memory behind them.

use crate::config::CostSpec;
use crate::set_assoc::Cache;
use serde::{Deserialize, Serialize};

/// What a cache line holds, for counting misses by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// A program's data.
    Data,
    /// Page-table entries, read by a walk.
    Table,
}

/// The counters of one cache level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCounts {
    /// The level's name (`l1d`, `l2`, `l3`).
    pub level: &'static str,
    /// Lookups of data lines.
    pub data_accesses: u64,
    /// Data lines not found here.
    pub data_misses: u64,
    /// Lookups of page-table lines (walks).
    pub table_accesses: u64,
    /// Page-table lines not found here.
    pub table_misses: u64,
}

/// Data caches in front of memory. A lookup goes down the levels until one
/// holds the line and costs that level's latency (memory's when none does);
/// every level it missed in is filled (non-inclusive, no write-backs).
#[derive(Clone, Debug)]
pub struct Caches {
    levels: Vec<Cache>,
    latency: Vec<u32>,
    memory: u32,
    counts: Vec<CacheCounts>,
}

impl Caches {
    /// Empty caches as `spec` (checked) describes them.
    pub fn new(spec: &CostSpec) -> Caches {
        let levels = spec.levels();
        Caches {
            levels: levels.iter().map(|(_, s)| Cache::new(s)).collect(),
            latency: levels.iter().map(|(_, s)| s.latency).collect(),
            memory: spec.caches.memory_latency,
            counts: levels
                .iter()
                .map(|(name, _)| CacheCounts {
                    level: name,
                    ..CacheCounts::default()
                })
                .collect(),
        }
    }

    /// Reads the line of physical byte `paddr`; returns the cycles it took.
    #[inline]
    pub fn access(&mut self, paddr: u64, kind: Line) -> u32 {
        for (i, cache) in self.levels.iter_mut().enumerate() {
            let hit = cache.access(paddr);
            let c = &mut self.counts[i];
            match kind {
                Line::Data => {
                    c.data_accesses += 1;
                    c.data_misses += u64::from(!hit);
                }
                Line::Table => {
                    c.table_accesses += 1;
                    c.table_misses += u64::from(!hit);
                }
            }
            if hit {
                return self.latency[i];
            }
        }
        self.memory
    }

    /// The first level's latency.
    pub fn l1_latency(&self) -> u32 {
        self.latency[0]
    }

    /// The first level's line size, log2.
    pub fn l1_line_shift(&self) -> u32 {
        self.levels[0].line_shift()
    }

    /// Counters per level, nearest first.
    pub fn counts(&self) -> &[CacheCounts] {
        &self.counts
    }

    /// The caches themselves, nearest first (for tests).
    pub fn levels(&self) -> &[Cache] {
        &self.levels
    }
}
