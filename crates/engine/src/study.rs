//! The page-size study: one pass over a trace feeds one TLB hierarchy and one
//! set of footprint counters per page size.

use pagelab_core::{Event, MemRef, PageSize, SourceInfo};
use pagelab_report::{LevelStats, RefCounts, RunStats, SimResult, SIM_SCHEMA};
use pagelab_tlb::{OtherSizes, Outcome, Side, TlbConfig, TlbError, TlbHierarchy};
use rustc_hash::FxHashSet;

/// The granularity of the per-side repeat filter: the smallest page size modelled.
const FILTER_SHIFT: u32 = 12;

/// What a study simulates.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    /// Page sizes, each simulated as the one fixed page size of its run.
    pub page_sizes: Vec<PageSize>,
    /// The TLB every run uses.
    pub tlb: TlbConfig,
}

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

/// Whether some array of `tlb` caches fragments of pages larger than its sizes.
fn has_fragments(tlb: &TlbConfig) -> bool {
    tlb.levels().iter().any(|(_, l)| {
        l.arrays
            .iter()
            .any(|a| a.other_sizes == OtherSizes::Fragment)
    })
}

/// How many recent pages per side the shared filter may remember: no more
/// than any L1 array's associativity (its entries, when fully associative).
fn filter_depth(tlb: &TlbConfig) -> usize {
    [&tlb.l1i, &tlb.l1d]
        .iter()
        .flat_map(|l| l.arrays.iter())
        .map(|a| a.ways.unwrap_or(a.entries))
        .min()
        .unwrap_or(1)
        .clamp(1, MAX_DEPTH)
}

/// The state of one page size's run.
struct SizeRun {
    size: PageSize,
    shift: u32,
    /// Granularity of the repeat filter: the page size, or 4K when some TLB array
    /// caches fragments of pages (then two addresses of one page may need two entries).
    key_shift: u32,
    tlb: TlbHierarchy,
    /// Most recent filter key per side (index 0 instructions, 1 data).
    last: [u64; 2],
    /// Page accesses per side, and how many of those missed every TLB level.
    accesses: [u64; 2],
    misses: [u64; 2],
    /// Accesses that hit the side's most recent entry without going to the TLB model.
    mru_hits: [u64; 2],
    /// Replayed lookups, to take out of the TLB's own L1 counters.
    replays: [u64; 2],
    /// Distinct pages touched per side, and by either side.
    pages: [FxHashSet<u64>; 2],
    all_pages: FxHashSet<u64>,
}

impl SizeRun {
    fn new(size: PageSize, tlb: &TlbConfig) -> Result<Self, TlbError> {
        let fragments = tlb.levels().iter().any(|(_, l)| {
            l.arrays
                .iter()
                .any(|a| a.other_sizes == OtherSizes::Fragment)
        });
        Ok(SizeRun {
            size,
            shift: size.shift(),
            key_shift: if fragments {
                FILTER_SHIFT
            } else {
                size.shift()
            },
            tlb: TlbHierarchy::new(tlb)?,
            last: [u64::MAX; 2],
            accesses: [0; 2],
            misses: [0; 2],
            mru_hits: [0; 2],
            replays: [0; 2],
            pages: [FxHashSet::default(), FxHashSet::default()],
            all_pages: FxHashSet::default(),
        })
    }

    /// One access on `side` to the page holding byte `addr`.
    #[inline]
    fn touch(&mut self, side: usize, addr: u64) {
        self.accesses[side] += 1;
        let key = addr >> self.key_shift;
        if key == self.last[side] {
            // The side's most recent entry: a hit at L1 that changes no LRU order.
            self.mru_hits[side] += 1;
            return;
        }
        self.last[side] = key;
        let s = if side == 0 { Side::Instr } else { Side::Data };
        let outcome = self.tlb.access_addr(s, addr, self.size);
        if outcome == Outcome::Miss {
            self.misses[side] += 1;
        }
        // Only a miss in the side's own L1 can be this side's first touch of a
        // page (an L2 shared by both sides may already hold it).
        if outcome != Outcome::L1Hit {
            let vpn = addr >> self.shift;
            if self.pages[side].insert(vpn) {
                self.all_pages.insert(vpn);
            }
        }
    }

    /// Re-touches a page that was hit while the shared filter deferred it, to
    /// put the LRU order right; it is an L1 hit and no access of its own.
    #[inline]
    fn replay(&mut self, side: usize, addr: u64) {
        let key = addr >> self.key_shift;
        if key == self.last[side] {
            return;
        }
        self.last[side] = key;
        let s = if side == 0 { Side::Instr } else { Side::Data };
        let outcome = self.tlb.access_addr(s, addr, self.size);
        debug_assert_eq!(outcome, Outcome::L1Hit, "a replayed page must be in L1");
        self.replays[side] += 1;
    }

    /// Every page a pending reference touches, in ascending order, each at its first byte
    /// (the first page at the reference's own address, which matters to fragmenting arrays).
    #[inline]
    fn reference(&mut self, p: &Pending) {
        let side = p.side as usize;
        if p.replay {
            self.replay(side, p.first);
            return;
        }
        self.touch(side, p.first);
        for vpn in (p.first >> self.shift) + 1..=(p.last >> self.shift) {
            self.touch(side, vpn << self.shift);
        }
    }

    fn stats(&self, filtered: [u64; 2]) -> RunStats {
        let bytes = self.size.bytes();
        let levels = level_stats(
            &self.tlb,
            [
                filtered[0] + self.mru_hits[0],
                filtered[1] + self.mru_hits[1],
            ],
            self.replays,
        );
        RunStats {
            page_size: self.size,
            itlb_accesses: self.accesses[0] + filtered[0],
            itlb_misses: self.misses[0],
            dtlb_accesses: self.accesses[1] + filtered[1],
            dtlb_misses: self.misses[1],
            code_footprint_bytes: self.pages[0].len() as u64 * bytes,
            data_footprint_bytes: self.pages[1].len() as u64 * bytes,
            footprint_bytes: self.all_pages.len() as u64 * bytes,
            faults: self.all_pages.len() as u64,
            tlb_levels: levels,
            mm: None,
        }
    }
}

/// A reference that the shared repeat filter could not answer: its byte range and side.
#[derive(Clone, Copy, Debug)]
struct Pending {
    first: u64,
    last: u64,
    side: u8,
    /// A replay of a deferred hit (see [`Study`]): a guaranteed L1 hit that
    /// only restores the LRU order, counted nowhere.
    replay: bool,
}

/// The most recent distinct 4K pages per side the shared filter remembers.
const MAX_DEPTH: usize = 4;

/// Below this many pending references a batch is stepped on one thread.
const PARALLEL_MIN: usize = 16 * 1024;

/// A page-size study in progress: feed it events, then ask for the result.
///
/// Each batch is stepped in two phases: one cheap serial pass answers every
/// reference that repeats its side's previous 4K page (a hit in every run's
/// L1) and collects the rest; then every page size's run steps over that
/// remainder, the runs in parallel when the batch is large.
///
/// ```
/// use pagelab_core::{AccessKind, Event, MemRef, PageSize};
/// use pagelab_engine::{Study, StudyConfig};
/// let cfg = StudyConfig { page_sizes: vec![PageSize::K4, PageSize::M2], tlb: pagelab_tlb::preset("weisberg").unwrap() };
/// let mut study = Study::new(&cfg).unwrap();
/// study.feed(&[Event::Ref(MemRef { addr: 0x1000, size: 8, kind: AccessKind::Load })]);
/// let result = study.finish(Default::default());
/// assert_eq!(result.runs[0].dtlb_misses, 1);
/// ```
pub struct Study {
    runs: Vec<SizeRun>,
    /// Per side, the most recent distinct 4K pages touched, most recent first
    /// (`u64::MAX` when empty), `depth` of them.
    recent: [[u64; MAX_DEPTH]; 2],
    /// How many pages the filter remembers: at most the associativity of every
    /// L1 array, so each of them is sure to be in every run's L1.
    depth: usize,
    /// Whether hits were deferred since the runs last saw this side's order.
    dirty: [bool; 2],
    /// References answered by that filter, per side: one access and one L1 hit at every size.
    filtered: [u64; 2],
    refs: [u64; 2],
    other_events: u64,
    pending: Vec<Pending>,
    /// Whether some TLB array caches fragments of larger pages.
    fragments: bool,
    tlb_json: serde_json::Value,
}

impl Study {
    /// A study of every page size in `cfg`, all fed in one pass.
    pub fn new(cfg: &StudyConfig) -> Result<Study, TlbError> {
        Ok(Study {
            runs: cfg
                .page_sizes
                .iter()
                .map(|&s| SizeRun::new(s, &cfg.tlb))
                .collect::<Result<_, _>>()?,
            recent: [[u64::MAX; MAX_DEPTH]; 2],
            depth: filter_depth(&cfg.tlb),
            dirty: [false; 2],
            filtered: [0; 2],
            refs: [0; 2],
            other_events: 0,
            pending: Vec::new(),
            fragments: has_fragments(&cfg.tlb),
            tlb_json: serde_json::to_value(&cfg.tlb).unwrap_or(serde_json::Value::Null),
        })
    }

    /// References fed so far (instruction plus data).
    pub fn refs(&self) -> u64 {
        self.refs[0] + self.refs[1]
    }

    /// Steps every run over a batch of events. Events other than references
    /// are counted and otherwise ignored: every page here is one fixed size.
    pub fn feed(&mut self, events: &[Event]) {
        self.pending.clear();
        for ev in events {
            match ev {
                Event::Ref(r) => self.filter(r),
                _ => self.other_events += 1,
            }
        }
        let pending = &self.pending;
        let step = |run: &mut SizeRun| {
            for p in pending {
                run.reference(p);
            }
        };
        if pending.len() >= PARALLEL_MIN && self.runs.len() > 1 {
            use rayon::prelude::*;
            self.runs.par_iter_mut().for_each(step);
        } else {
            self.runs.iter_mut().for_each(step);
        }
    }

    #[inline]
    fn filter(&mut self, r: &MemRef) {
        let side = usize::from(!r.kind.is_instr());
        self.refs[side] += 1;
        let first = r.addr;
        let last = r.last_byte();
        let small = first >> FILTER_SHIFT;
        let single = small == last >> FILTER_SHIFT;
        let recent = &mut self.recent[side];
        if single {
            if recent[0] == small {
                // The side's most recent 4K page, hence its most recent page at
                // every size: a hit in every run's L1 that changes no LRU order.
                self.filtered[side] += 1;
                return;
            }
            if let Some(i) = recent[1..self.depth].iter().position(|&p| p == small) {
                // Among the `depth` most recent pages: a sure L1 hit at every size.
                // Its move to the front is deferred; the runs replay the order
                // before they next see a reference.
                recent.copy_within(0..=i, 1);
                recent[0] = small;
                self.dirty[side] = true;
                self.filtered[side] += 1;
                return;
            }
        }
        if self.dirty[side] {
            for i in (0..self.depth).rev() {
                if recent[i] != u64::MAX {
                    let addr = recent[i] << FILTER_SHIFT;
                    self.pending.push(Pending {
                        first: addr,
                        last: addr,
                        side: side as u8,
                        replay: true,
                    });
                }
            }
            self.dirty[side] = false;
        }
        self.pending.push(Pending {
            first,
            last,
            side: side as u8,
            replay: false,
        });
        if !single && self.fragments {
            // A fragmenting array holds the fragment of the address looked up,
            // which for a straddling reference differs by size: forget everything.
            *recent = [u64::MAX; MAX_DEPTH];
            return;
        }
        // The 4K pages the reference touched, oldest first, go to the front.
        let last_small = last >> FILTER_SHIFT;
        for page in last_small.saturating_sub(self.depth as u64 - 1).max(small)..=last_small {
            let at = recent[..self.depth]
                .iter()
                .position(|&p| p == page)
                .unwrap_or(self.depth - 1);
            recent.copy_within(0..at, 1);
            recent[0] = page;
        }
    }

    /// The result so far, in the `pagelab.sim/1` schema.
    pub fn finish(&self, source: SourceInfo) -> SimResult {
        SimResult {
            schema: SIM_SCHEMA.to_string(),
            source,
            tlb: self.tlb_json.clone(),
            refs: RefCounts {
                instr: self.refs[0],
                data: self.refs[1],
            },
            runs: self.runs.iter().map(|r| r.stats(self.filtered)).collect(),
            elapsed_seconds: None,
        }
    }

    /// Events that were not references (map, unmap, ...), ignored by this study.
    pub fn other_events(&self) -> u64 {
        self.other_events
    }
}
