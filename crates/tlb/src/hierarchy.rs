//! Split L1, optional L2 (unified or per side), counters.

use crate::array::{Tlb, TlbArray};
use crate::config::{LevelConfig, OtherSizes, TlbConfig};
use crate::TlbError;
use pagelab_core::{AccessKind, PageSize, VirtAddr, Vpn, MIN_PAGE_SHIFT};
use serde::{Deserialize, Serialize};

mod fronts;

/// Which L1 a reference goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Instruction fetches.
    Instr = 0,
    /// Loads, stores and modifies.
    Data = 1,
}

impl Side {
    /// The side a reference of this kind uses.
    #[inline]
    pub fn of(kind: AccessKind) -> Side {
        if kind.is_instr() {
            Side::Instr
        } else {
            Side::Data
        }
    }
}

/// Where a translation was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// In the first level.
    L1Hit,
    /// Missed the first level, found in the second.
    L2Hit,
    /// Missed every level: a page walk.
    Miss,
}

/// Counters of one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelStats {
    /// Lookups in this level.
    pub accesses: u64,
    /// Lookups that found the page.
    pub hits: u64,
    /// Lookups that did not (each fills this level).
    pub misses: u64,
}

/// Counters of one side, over all levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideStats {
    /// References translated.
    pub accesses: u64,
    /// Found in L1.
    pub l1_hits: u64,
    /// Missed L1, found in L2.
    pub l2_hits: u64,
    /// Missed every level: page walks.
    pub misses: u64,
}

/// Every counter of a [`TlbHierarchy`]; the `l2*` fields are present as configured.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlbStats {
    /// The configuration's name.
    pub config: String,
    /// Instruction-side L1.
    pub l1i: LevelStats,
    /// Data-side L1.
    pub l1d: LevelStats,
    /// Unified L2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<LevelStats>,
    /// Instruction-side L2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2i: Option<LevelStats>,
    /// Data-side L2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2d: Option<LevelStats>,
    /// Instruction side over all levels.
    pub instr: SideStats,
    /// Data side over all levels.
    pub data: SideStats,
}

impl TlbStats {
    /// The counters of one side.
    pub fn side(&self, side: Side) -> &SideStats {
        match side {
            Side::Instr => &self.instr,
            Side::Data => &self.data,
        }
    }
}

/// Where a page of one size goes in a level: which array, and the size of the
/// entry it is stored as (its own size, or the fragment size).
#[derive(Clone, Copy, Debug, Default)]
struct Route {
    array: u8,
    store_shift: u8,
}

const NSIZES: usize = PageSize::COUNT;

/// One level: arrays plus a precomputed route per page size.
#[derive(Clone, Debug)]
struct Level {
    arrays: Vec<TlbArray>,
    routes: [Route; NSIZES],
    accesses: u64,
    misses: u64,
}

impl Level {
    fn new(cfg: &LevelConfig) -> Level {
        let arrays = cfg
            .arrays
            .iter()
            .map(|a| {
                TlbArray::new(a.entries, a.ways)
                    .with_index(a.index)
                    .with_replacement(a.replacement)
            })
            .collect();
        let mut routes = [Route::default(); NSIZES];
        for (r, size) in routes.iter_mut().zip(PageSize::all()) {
            let (array, stored) = route(cfg, size);
            *r = Route {
                array: array as u8,
                store_shift: stored.shift() as u8,
            };
        }
        Level {
            arrays,
            routes,
            accesses: 0,
            misses: 0,
        }
    }

    /// An access, counted.
    #[inline(always)]
    fn access(&mut self, addr: VirtAddr, shift: u32) -> bool {
        self.accesses += 1;
        let hit = self.access_uncounted(addr, shift);
        self.misses += u64::from(!hit);
        hit
    }

    /// An access that changes the arrays as [`Level::access`] does but not the counts
    /// (an entry of the model's own, such as a host block's: [`TlbHierarchy::host_block`]).
    #[inline(always)]
    fn access_uncounted(&mut self, addr: VirtAddr, shift: u32) -> bool {
        // The key of `array::key`, from shifts: this is the hottest line.
        let r = self.routes[(shift - u32::from(MIN_PAGE_SHIFT)) as usize];
        let store = r.store_shift as u64;
        let k = ((addr.0 >> store) << 5) | (store - u64::from(MIN_PAGE_SHIFT));
        self.arrays[r.array as usize].access_key(k)
    }

    fn invalidate(&mut self, vpn: Vpn, size: PageSize) {
        let r = self.routes[size.index()];
        let array = &mut self.arrays[r.array as usize];
        let store = r.store_shift as u32;
        if store == size.shift() {
            array.invalidate(vpn, size);
        } else {
            let d = size.shift() - store;
            array.invalidate_where(|v, s| s.shift() == store && v.0 >> d == vpn.0);
        }
    }

    fn stats(&self) -> LevelStats {
        LevelStats {
            accesses: self.accesses,
            hits: self.accesses - self.misses,
            misses: self.misses,
        }
    }
}

/// The array of a level that caches pages of `size`, and the size of the entry
/// it stores for them. Rules, in order: the array listing `size`; else the array
/// without a size list; else the array listing the largest size below `size`,
/// storing the page whole (`hold`) or its fragment of that size (`fragment`).
/// "Largest below" rather than "smallest": a 4M page on a core with 4K and 2M
/// arrays goes to the 2M array, as hardware splinters it into 2M entries.
pub(crate) fn route(cfg: &LevelConfig, size: PageSize) -> (usize, PageSize) {
    let lists =
        |a: &crate::ArrayConfig, s: PageSize| a.sizes.as_ref().is_some_and(|l| l.contains(&s));
    if let Some(i) = cfg.arrays.iter().position(|a| lists(a, size)) {
        return (i, size);
    }
    if let Some(i) = cfg.arrays.iter().position(|a| a.sizes.is_none()) {
        return (i, size);
    }
    let (i, below) = cfg
        .arrays
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.sizes.iter().flatten().map(move |s| (i, *s)))
        .filter(|&(_, s)| s < size)
        .max_by_key(|&(_, s)| s)
        .expect("validated level holds 4K");
    match cfg.arrays[i].other_sizes {
        OtherSizes::Hold => (i, size),
        OtherSizes::Fragment => (i, below),
    }
}

/// The bit that sets the host's block translations ([`TlbHierarchy::host_block`]) apart
/// from the guest's pages in a TLB array.
const HOST_TAG: u64 = 1 << 62;

#[derive(Clone, Debug)]
enum L2 {
    None,
    Unified(Level),
    Split([Level; 2]),
}

/// A split L1 TLB with an optional L2, with counters.
///
/// On an access the side's L1 is looked up; on an L1 miss the L2 is looked up
/// (and filled on a miss), and the L1 is filled. Levels are not kept inclusive.
#[derive(Clone, Debug)]
pub struct TlbHierarchy {
    config: TlbConfig,
    l1: [Level; 2],
    l2: L2,
    l2_hits: [u64; 2],
    walks: [u64; 2],
}

impl TlbHierarchy {
    /// Builds an empty hierarchy after validating `config`.
    pub fn new(config: &TlbConfig) -> Result<TlbHierarchy, TlbError> {
        config.validate(&format!("config `{}`", config.name))?;
        let l2 = match (&config.l2, &config.l2i, &config.l2d) {
            (Some(u), _, _) => L2::Unified(Level::new(u)),
            (None, Some(i), Some(d)) => L2::Split([Level::new(i), Level::new(d)]),
            _ => L2::None,
        };
        Ok(TlbHierarchy {
            config: config.clone(),
            l1: [Level::new(&config.l1i), Level::new(&config.l1d)],
            l2,
            l2_hits: [0; 2],
            walks: [0; 2],
        })
    }

    /// The configuration this hierarchy was built from.
    pub fn config(&self) -> &TlbConfig {
        &self.config
    }

    /// log2 of the bytes an L1 entry on `side` covers for pages of `size`:
    /// the page's own size, or its fragment's where the L1 array that takes
    /// such pages caches fragments. Addresses that agree above this shift hit
    /// the same L1 entry.
    pub fn l1_entry_shift(&self, side: Side, size: PageSize) -> u32 {
        u32::from(self.l1[side as usize].routes[size.index()].store_shift)
    }

    /// Translates page `vpn` of `size`. An array that fragments pages of this
    /// size caches the fragment holding the page's first byte; use
    /// [`TlbHierarchy::access_addr`] when fragments matter.
    #[inline]
    pub fn access(&mut self, side: Side, vpn: Vpn, size: PageSize) -> Outcome {
        self.access_addr(side, vpn.start(size), size)
    }

    /// Translates byte address `addr`, mapped by a page of `size`.
    // Always inlined into the caller's loop: an L1 hit, by far the common case,
    // then costs no call; the rest of the walk is out of line.
    #[inline(always)]
    pub fn access_addr(&mut self, side: Side, addr: VirtAddr, size: PageSize) -> Outcome {
        let s = side as usize;
        let shift = size.shift();
        if self.l1[s].access(addr, shift) {
            return Outcome::L1Hit;
        }
        self.after_l1_miss(s, addr, shift)
    }

    /// The host's translation of 2M block `block` of guest-physical memory, held in the data
    /// side's last level beside the guest's entries (they share its sets: the block's
    /// number indexes it, as a 2M page's would); a miss fills it. Returns whether it was
    /// held. Not counted in the statistics.
    pub fn host_block(&mut self, block: u64) -> bool {
        let level = match &mut self.l2 {
            L2::None => &mut self.l1[Side::Data as usize],
            L2::Unified(l) => l,
            L2::Split(ls) => &mut ls[Side::Data as usize],
        };
        // A tag of its own: guest-virtual addresses stay below 2^57.
        level.access_uncounted(VirtAddr(HOST_TAG | (block << 21)), 21)
    }

    /// The L2 (if any) and the walk counters, after an L1 miss on side `s`.
    #[inline(never)]
    fn after_l1_miss(&mut self, s: usize, addr: VirtAddr, shift: u32) -> Outcome {
        let l2 = match &mut self.l2 {
            L2::None => {
                self.walks[s] += 1;
                return Outcome::Miss;
            }
            L2::Unified(l) => l,
            L2::Split(ls) => &mut ls[s],
        };
        if l2.access(addr, shift) {
            self.l2_hits[s] += 1;
            Outcome::L2Hit
        } else {
            self.walks[s] += 1;
            Outcome::Miss
        }
    }

    fn levels_mut(&mut self) -> impl Iterator<Item = &mut Level> {
        let l2: Vec<&mut Level> = match &mut self.l2 {
            L2::None => vec![],
            L2::Unified(l) => vec![l],
            L2::Split(ls) => ls.iter_mut().collect(),
        };
        self.l1.iter_mut().chain(l2)
    }

    /// Empties every array of every level (counters are kept).
    pub fn flush(&mut self) {
        for level in self.levels_mut() {
            level.arrays.iter_mut().for_each(Tlb::flush);
        }
    }

    /// Removes page `vpn` of `size` (or its fragments) from every level.
    pub fn invalidate(&mut self, vpn: Vpn, size: PageSize) {
        for level in self.levels_mut() {
            level.invalidate(vpn, size);
        }
    }

    /// Removes every entry, of any size, overlapping bytes `[start, start + len)`.
    pub fn invalidate_range(&mut self, start: VirtAddr, len: u64) {
        self.invalidate_range_masked(start, len, u64::MAX);
    }

    /// Removes every entry whose address, with only the bits of `mask` kept,
    /// overlaps bytes `[start, start + len)`: with the bits above a tag
    /// cleared from `mask`, the range in every address space at once (see
    /// [`TlbConfig::asids`](crate::TlbConfig)).
    pub fn invalidate_range_masked(&mut self, start: VirtAddr, len: u64, mask: u64) {
        let end = start.saturating_add(len);
        for level in self.levels_mut() {
            for a in &mut level.arrays {
                a.invalidate_where(|v, s| {
                    let first = VirtAddr(v.start(s).0 & mask);
                    first < end && first.saturating_add(s.bytes()) > start
                });
            }
        }
    }

    /// Zeroes every counter (cached entries are kept).
    pub fn reset_stats(&mut self) {
        for level in self.levels_mut() {
            level.accesses = 0;
            level.misses = 0;
        }
        self.l2_hits = [0; 2];
        self.walks = [0; 2];
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> TlbStats {
        let side = |s: usize| {
            let l1 = self.l1[s].stats();
            SideStats {
                accesses: l1.accesses,
                l1_hits: l1.hits,
                l2_hits: self.l2_hits[s],
                misses: self.walks[s],
            }
        };
        let (l2, l2i, l2d) = match &self.l2 {
            L2::None => (None, None, None),
            L2::Unified(l) => (Some(l.stats()), None, None),
            L2::Split([i, d]) => (None, Some(i.stats()), Some(d.stats())),
        };
        TlbStats {
            config: self.config.name.clone(),
            l1i: self.l1[0].stats(),
            l1d: self.l1[1].stats(),
            l2,
            l2i,
            l2d,
            instr: side(0),
            data: side(1),
        }
    }
}
