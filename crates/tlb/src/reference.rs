//! The test oracle: the simplest possible LRU TLB and hierarchy.
//!
//! Every set is a `Vec` kept in recency order (most recent first), scanned
//! linearly; a hit moves the entry to the front, a miss inserts at the front and
//! pops the back when the set is over its ways. The hierarchy re-derives which
//! array caches each page on every access from the configuration, by the same
//! documented rules as [`crate::TlbHierarchy`] but without precomputation.
//! Slow on purpose: it exists so that the fast arrays and hierarchy, here and in
//! the engine, can be checked against it on random and real traces.
//!
//! ```
//! use pagelab_tlb::reference::RefTlb;
//! use pagelab_core::{PageSize, Vpn};
//! let mut t = RefTlb::new(2, None);
//! let k = PageSize::K4;
//! assert!(!t.access(Vpn(1), k));
//! assert!(!t.access(Vpn(2), k));
//! assert!(t.access(Vpn(1), k));
//! assert!(!t.access(Vpn(3), k)); // evicts 2, the least recent
//! assert!(!t.contains(Vpn(2), k));
//! ```

use crate::config::{LevelConfig, OtherSizes, Replacement, SetIndex, TlbConfig};
use crate::{LevelStats, Outcome, Side, SideStats, TlbStats};
use pagelab_core::{PageSize, VirtAddr, Vpn};

/// Reference LRU array: fully associative when `ways` is `None`.
#[derive(Clone, Debug)]
pub struct RefTlb {
    sets: Vec<Vec<(Vpn, PageSize)>>,
    ways: usize,
    index: SetIndex,
    /// Under [`Replacement::Random`], the xorshift64 state of the victims' sequence.
    random: Option<u64>,
}

impl RefTlb {
    /// An empty array of `entries` entries in sets of `ways` (all of them when `None`).
    pub fn new(entries: usize, ways: Option<usize>) -> RefTlb {
        let ways = ways.unwrap_or(entries);
        RefTlb {
            sets: vec![Vec::new(); entries / ways],
            ways,
            index: SetIndex::Linear,
            random: None,
        }
    }

    /// The same array replacing as `replacement` says: under [`Replacement::Random`] a miss
    /// in a full set removes the entry whose place in the set's recency order (0 the most
    /// recent) is the next of a xorshift64 sequence (shifts 13, 7, 17) from
    /// 0x9e3779b97f4a7c15, its high 32 bits scaled to the ways.
    pub fn with_replacement(mut self, replacement: Replacement) -> RefTlb {
        self.random = (replacement == Replacement::Random).then_some(0x9e37_79b9_7f4a_7c15);
        self
    }

    /// The same array with its sets picked by `index`.
    pub fn with_index(mut self, index: SetIndex) -> RefTlb {
        self.index = index;
        self
    }

    fn set(&self, vpn: Vpn) -> usize {
        let sets = self.sets.len() as u64;
        match self.index {
            SetIndex::Linear => (vpn.0 % sets) as usize,
            // Written out from the definition rather than through SetIndex::set, so the
            // oracle does not share the fast path's code.
            SetIndex::Xor => {
                let bits = sets.trailing_zeros();
                ((vpn.0 ^ (vpn.0 >> bits)) % sets) as usize
            }
        }
    }

    /// Looks up, on a hit moves to front, on a miss inserts at front. Returns whether it hit.
    pub fn access(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let ways = self.ways;
        let i = self.set(vpn);
        let set = &mut self.sets[i];
        match set.iter().position(|&e| e == (vpn, size)) {
            Some(p) => {
                let e = set.remove(p);
                set.insert(0, e);
                true
            }
            None => {
                if set.len() == ways {
                    let at = match &mut self.random {
                        None => ways - 1,
                        Some(x) => {
                            *x ^= *x << 13;
                            *x ^= *x >> 7;
                            *x ^= *x << 17;
                            ((*x >> 32) * ways as u64 / (1 << 32)) as usize
                        }
                    };
                    set.remove(at);
                }
                set.insert(0, (vpn, size));
                false
            }
        }
    }

    /// Whether the page is cached.
    pub fn contains(&self, vpn: Vpn, size: PageSize) -> bool {
        self.sets[self.set(vpn)].contains(&(vpn, size))
    }

    /// Removes the page; returns whether it was cached.
    pub fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let i = self.set(vpn);
        let before = self.sets[i].len();
        self.sets[i].retain(|&e| e != (vpn, size));
        before != self.sets[i].len()
    }

    /// Empties the array.
    pub fn flush(&mut self) {
        self.sets.iter_mut().for_each(Vec::clear);
    }

    /// The set page `vpn` maps to, most recent first.
    pub fn set_order(&self, vpn: Vpn) -> Vec<(Vpn, PageSize)> {
        self.sets[self.set(vpn)].clone()
    }

    /// Every cached page, sorted by size then page number.
    pub fn resident(&self) -> Vec<(Vpn, PageSize)> {
        let mut v: Vec<_> = self.sets.iter().flatten().copied().collect();
        v.sort_by_key(|&(vpn, s)| (s, vpn));
        v
    }
}

#[derive(Clone, Debug)]
struct RefLevel {
    cfg: LevelConfig,
    arrays: Vec<RefTlb>,
    stats: LevelStats,
}

impl RefLevel {
    fn new(cfg: &LevelConfig) -> RefLevel {
        let arrays = cfg
            .arrays
            .iter()
            .map(|a| {
                RefTlb::new(a.entries, a.ways)
                    .with_index(a.index)
                    .with_replacement(a.replacement)
            })
            .collect();
        RefLevel {
            cfg: cfg.clone(),
            arrays,
            stats: LevelStats::default(),
        }
    }

    /// Array choice, straight from the rules: listed, else unlisted-all, else the
    /// array listing the largest smaller size (whole or as a fragment).
    fn pick(&self, size: PageSize) -> (usize, PageSize) {
        for (i, a) in self.cfg.arrays.iter().enumerate() {
            if let Some(list) = &a.sizes {
                if list.contains(&size) {
                    return (i, size);
                }
            }
        }
        for (i, a) in self.cfg.arrays.iter().enumerate() {
            if a.sizes.is_none() {
                return (i, size);
            }
        }
        let mut best: Option<(usize, PageSize)> = None;
        for (i, a) in self.cfg.arrays.iter().enumerate() {
            for &s in a.sizes.iter().flatten() {
                let better = match best {
                    None => true,
                    Some((_, b)) => s > b,
                };
                if s < size && better {
                    best = Some((i, s));
                }
            }
        }
        let (i, below) = best.expect("validated level holds 4K");
        match self.cfg.arrays[i].other_sizes {
            OtherSizes::Hold => (i, size),
            OtherSizes::Fragment => (i, below),
        }
    }

    fn access(&mut self, addr: VirtAddr, size: PageSize) -> bool {
        let (i, stored) = self.pick(size);
        let hit = self.arrays[i].access(addr.vpn(stored), stored);
        self.stats.accesses += 1;
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        hit
    }
}

/// Reference hierarchy with the same semantics and counters as [`crate::TlbHierarchy`].
#[derive(Clone, Debug)]
pub struct RefHierarchy {
    name: String,
    l1: [RefLevel; 2],
    /// Unified: one level used by both sides; split: one per side.
    l2: Vec<RefLevel>,
    sides: [SideStats; 2],
}

impl RefHierarchy {
    /// Builds from a configuration (assumed valid).
    pub fn new(cfg: &TlbConfig) -> RefHierarchy {
        let l2 = [&cfg.l2, &cfg.l2i, &cfg.l2d]
            .into_iter()
            .flatten()
            .map(RefLevel::new)
            .collect();
        RefHierarchy {
            name: cfg.name.clone(),
            l1: [RefLevel::new(&cfg.l1i), RefLevel::new(&cfg.l1d)],
            l2,
            sides: [SideStats::default(); 2],
        }
    }

    /// Translates byte address `addr` mapped by a page of `size`.
    pub fn access_addr(&mut self, side: Side, addr: VirtAddr, size: PageSize) -> Outcome {
        let s = side as usize;
        self.sides[s].accesses += 1;
        if self.l1[s].access(addr, size) {
            self.sides[s].l1_hits += 1;
            return Outcome::L1Hit;
        }
        let l2 = match self.l2.len() {
            0 => None,
            1 => Some(&mut self.l2[0]),
            _ => Some(&mut self.l2[s]),
        };
        if l2.is_some_and(|l| l.access(addr, size)) {
            self.sides[s].l2_hits += 1;
            Outcome::L2Hit
        } else {
            self.sides[s].misses += 1;
            Outcome::Miss
        }
    }

    /// Translates page `vpn` of `size` (fragments: the one holding its first byte).
    pub fn access(&mut self, side: Side, vpn: Vpn, size: PageSize) -> Outcome {
        self.access_addr(side, vpn.start(size), size)
    }

    /// Every counter, in the same shape as [`crate::TlbHierarchy::stats`].
    pub fn stats(&self) -> TlbStats {
        let (l2, l2i, l2d) = match self.l2.len() {
            0 => (None, None, None),
            1 => (Some(self.l2[0].stats), None, None),
            _ => (None, Some(self.l2[0].stats), Some(self.l2[1].stats)),
        };
        TlbStats {
            config: self.name.clone(),
            l1i: self.l1[0].stats,
            l1d: self.l1[1].stats,
            l2,
            l2i,
            l2d,
            instr: self.sides[0],
            data: self.sides[1],
        }
    }
}
