//! The data caches of one core, nearest first, and memory behind them.

use crate::config::CostSpec;
use crate::set_assoc::Cache;
use crate::shared::{SharedFirst, SharedLine, TABLE_TAG};
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
    /// The first level shared with other runs, if any (see [`SharedFirst`]).
    shared: Option<SharedFirst>,
    /// With a shared first level: the sets this run holds itself (those
    /// holding its page-table lines), one bit each.
    own: u64,
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
            shared: None,
            own: 0,
        }
    }

    /// Shares the first level with other runs (see [`SharedFirst`]): from
    /// now on data lines are read with [`Caches::access_shared`], and
    /// [`Caches::levels`]'s first level holds only this run's own sets.
    /// Call it on new caches only.
    pub fn share_first(&mut self, shared: &SharedFirst) {
        self.shared = Some(shared.clone());
        self.own = 0;
    }

    /// Reads the line of physical byte `paddr`; returns the cycles it took.
    #[inline]
    pub fn access(&mut self, paddr: u64, kind: Line) -> u32 {
        if self.shared.is_some() {
            return self.access_own(paddr, kind);
        }
        self.access_from(0, paddr, kind)
    }

    /// Reads a data line in caches whose first level is shared: `line` is
    /// its lookup in the shared level, `paddr` gives its physical address in
    /// this run (called only when the line goes below the first level).
    /// Returns the cycles it took.
    #[inline]
    pub fn access_shared(&mut self, line: SharedLine, paddr: impl FnOnce() -> u64) -> u32 {
        let hit = if self.own & (1 << line.set) == 0 {
            line.hit
        } else {
            self.own_data(line)
        };
        self.count(0, Line::Data, hit);
        if hit {
            return self.latency[0];
        }
        self.access_from(1, paddr(), Line::Data)
    }

    /// Whether this run holds any first-level set of its own (one with a
    /// page-table line) beside a shared first level (for tests).
    pub fn owns_first_sets(&self) -> bool {
        self.own != 0
    }

    /// A data line in a first-level set this run holds itself.
    #[cold]
    fn own_data(&mut self, line: SharedLine) -> bool {
        let l1 = &mut self.levels[0];
        let hit = l1.access_tag(line.set, line.tag);
        if l1.set_tags(line.set).iter().all(|&t| t & TABLE_TAG == 0) {
            // Its last page-table line is gone: the set is the shared one again.
            self.own &= !(1 << line.set);
            if let Some(shared) = &self.shared {
                let n = &shared.owners[line.set];
                n.set(n.get() - 1);
            }
        }
        hit
    }

    /// A page-table line read with a shared first level: its set becomes
    /// (or stays) this run's own, the line tagged physically. Data lines go
    /// through [`Caches::access_shared`] then.
    #[cold]
    fn access_own(&mut self, paddr: u64, kind: Line) -> u32 {
        debug_assert_eq!(
            kind,
            Line::Table,
            "a shared first level reads data lines by access_shared"
        );
        let l1 = &mut self.levels[0];
        let line = paddr >> l1.line_shift();
        let set = l1.set_of(line);
        if self.own & (1 << set) == 0 {
            if let Some(shared) = &self.shared {
                l1.copy_set(set, &shared.cache.borrow());
                let n = &shared.owners[set];
                n.set(n.get() + 1);
            }
            self.own |= 1 << set;
        }
        let hit = l1.access_tag(set, (line + 1) | TABLE_TAG);
        self.count(0, kind, hit);
        if hit {
            return self.latency[0];
        }
        self.access_from(1, paddr, kind)
    }

    /// Reads the line of `paddr` from level `first` down.
    #[inline]
    fn access_from(&mut self, first: usize, paddr: u64, kind: Line) -> u32 {
        for i in first..self.levels.len() {
            let hit = self.levels[i].access(paddr);
            self.count(i, kind, hit);
            if hit {
                return self.latency[i];
            }
        }
        self.memory
    }

    /// Counts a lookup of a `kind` line at level `i`.
    #[inline(always)]
    fn count(&mut self, i: usize, kind: Line, hit: bool) {
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

    /// The caches themselves, nearest first (for tests; with a shared
    /// first level, the first holds only this run's own sets).
    pub fn levels(&self) -> &[Cache] {
        &self.levels
    }
}
