//! The page-size study: one pass over a trace feeds one TLB hierarchy and one
//! set of footprint counters per page size.

use pagelab_core::{Event, PageSize, SourceInfo, VirtAddr};
use pagelab_report::{RunStats, SimResult};
use pagelab_tlb::{
    FrontMiss, Fronts, OtherSizes, Outcome, Side, TlbConfig, TlbError, TlbHierarchy, FRONT_LANES,
    PORTABLE_RANKS,
};

mod counts;
mod whole;
pub(crate) use counts::{level_stats, sim_result, tlb_json, PageCounts};
use pagelab_trace::page_word::{CHANGE_MASK, CHANGE_SHIFT, DATA, PAGE_SHIFT, REPLAY, STRADDLE};
use pagelab_trace::{PageBatch, PageFilter, MAX_FILTER_DEPTH};

/// What a study simulates.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    /// Page sizes, each simulated as the one fixed page size of its run.
    pub page_sizes: Vec<PageSize>,
    /// The TLB every run uses.
    pub tlb: TlbConfig,
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
        .clamp(1, MAX_FILTER_DEPTH)
}

/// The page filter a study of `tlb` uses: its depth and whether some array caches
/// fragments. A native trace's page index made with this filter
/// (`NativeWriter::with_page_index`) is what such a study reads instead of the records.
pub fn page_filter_params(tlb: &TlbConfig) -> (usize, bool) {
    (filter_depth(tlb), has_fragments(tlb))
}

/// The state of one page size's run.
struct SizeRun {
    size: PageSize,
    shift: u32,
    tlb: TlbHierarchy,
    counts: PageCounts,
}

const SIDES: [Side; 2] = [Side::Instr, Side::Data];

/// The tiers of [`Study::feed_fronts`]: which of [`Fronts`]' loops it runs.
const PORTABLE: u8 = 0;
const AVX2: u8 = 1;
const AVX512: u8 = 2;

/// The ranks of the fronts in the AVX2 tier: eight, as in the AVX-512 tier (a rank is
/// two registers; against four, the native study's CPU 0.91-0.97x on python3, cc1 and
/// xz, even on gzip: docs/speed.md, session 48).
const AVX2_RANKS: usize = pagelab_tlb::AVX512_RANKS;

/// The most words [`Study::feed_fronts`] looks up in the fronts before it
/// finishes the lookups that missed a whole L1.
const FRONT_RUN: usize = 256;

/// The words from `i` up to the next one spanning pages, at most [`FRONT_RUN`].
fn part_at(words: &[u64], i: usize) -> &[u64] {
    let part = &words[i..words.len().min(i + FRONT_RUN)];
    let end = part.iter().position(|w| w & STRADDLE != 0);
    &part[..end.unwrap_or(part.len())]
}

impl SizeRun {
    fn new(size: PageSize, tlb: &TlbConfig) -> Result<Self, TlbError> {
        Ok(SizeRun {
            size,
            shift: size.shift(),
            tlb: TlbHierarchy::new(tlb)?,
            counts: PageCounts::default(),
        })
    }

    /// The page of word `w` (see [`pagelab_trace::page_word`]), looked up at its first byte.
    #[inline(always)]
    fn touch(&mut self, w: u64) {
        let side = (w & DATA) as usize;
        let addr = w >> PAGE_SHIFT << PAGE_SHIFT;
        let outcome = self.tlb.access_addr(SIDES[side], VirtAddr(addr), self.size);
        if w & REPLAY != 0 {
            debug_assert_eq!(outcome, Outcome::L1Hit, "a replayed page must be in L1");
            self.counts.replays[side] += 1;
        } else if outcome != Outcome::L1Hit {
            self.missed_l1(side, addr, outcome);
        }
    }

    /// A lookup behind the L1 (see [`PageCounts::missed_l1`]).
    #[cold]
    #[inline(never)]
    fn missed_l1(&mut self, side: usize, addr: u64, outcome: Outcome) {
        self.counts.missed_l1(side, addr >> self.shift, outcome);
    }

    /// A reference spanning 4K pages `w`'s to `last`: the first page if it is
    /// not the side's most recent (`visit`), then every further page of this
    /// size it overlaps, each at its first byte.
    #[cold]
    fn straddle(&mut self, w: u64, last: u64, visit: bool) {
        if visit {
            self.touch(w);
        }
        let side = (w & DATA) as usize;
        let k = self.shift - PAGE_SHIFT;
        let (first, last) = ((w >> PAGE_SHIFT) >> k, last >> k);
        self.counts.extra[side] += last - first;
        for vpn in first + 1..=last {
            self.touch((vpn << k) << PAGE_SHIFT | (w & DATA));
        }
    }

    fn stats(&self, refs: [u64; 2]) -> RunStats {
        self.counts.stats(self.size, &self.tlb, refs)
    }
}

/// A page-size study in progress: feed it events, then ask for the result.
///
/// References first go through a [`PageFilter`], which drops those that
/// repeat one of their side's few most recent 4K pages (hits in every run's
/// L1) and hands on one word per other reference. Each word then steps the
/// runs of the page sizes at which its page is not the side's most recent:
/// the runs are kept smallest page first, and a word whose page changed only
/// in low bits stops before the sizes that contain both pages.
///
/// ```
/// use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
/// use pagelab_engine::{Study, StudyConfig};
/// let cfg = StudyConfig { page_sizes: vec![PageSize::K4, PageSize::M2], tlb: pagelab_tlb::preset("weisberg").unwrap() };
/// let mut study = Study::new(&cfg).unwrap();
/// study.feed(&[Event::Ref(MemRef { addr: VirtAddr(0x1000), size: 8, kind: AccessKind::Load })]);
/// let result = study.finish(Default::default());
/// assert_eq!(result.runs[0].dtlb_misses, 1);
/// ```
pub struct Study {
    /// The runs, smallest page size first.
    runs: Vec<SizeRun>,
    /// For each run in the configuration's order, its index in `runs`.
    order: Vec<usize>,
    /// How many of the first runs a word with each change distance steps.
    reach: [u8; 65],
    /// The filter of [`Study::feed`]'s events, and its batch.
    filter: PageFilter,
    batch: PageBatch,
    filter_depth: usize,
    /// Whether some TLB array caches fragments of larger pages.
    fragments: bool,
    refs: [u64; 2],
    other_events: u64,
    tlb_json: serde_json::Value,
    /// Room for the lookups of [`FRONT_RUN`] words that missed a whole L1
    /// array held by the fronts: (the word's number, the run).
    deferred: Vec<(u32, u8)>,
    /// Whether the next batch goes through [`pagelab_tlb::WholeL1`] (see [`Study::choose`]).
    tiers: bool,
}

impl Study {
    /// A study of every page size in `cfg`, all fed in one pass.
    pub fn new(cfg: &StudyConfig) -> Result<Study, TlbError> {
        let mut order: Vec<usize> = (0..cfg.page_sizes.len()).collect();
        order.sort_by_key(|&i| cfg.page_sizes[i]);
        let runs = order
            .iter()
            .map(|&i| SizeRun::new(cfg.page_sizes[i], &cfg.tlb))
            .collect::<Result<Vec<_>, _>>()?;
        let mut position = vec![0; order.len()];
        for (at, &i) in order.iter().enumerate() {
            position[i] = at;
        }
        let fragments = has_fragments(&cfg.tlb);
        // A run of pages 2^k times 4K sees the side's most recent page again
        // when the change distance is at most k; with fragments, only when the
        // 4K page is the same (distance 0).
        let mut reach = [0u8; 65];
        for (change, r) in reach.iter_mut().enumerate() {
            *r = runs
                .iter()
                .filter(|run| {
                    let same_below = if fragments { 0 } else { run.shift - PAGE_SHIFT };
                    change as u32 > same_below
                })
                .count() as u8;
        }
        let depth = filter_depth(&cfg.tlb);
        Ok(Study {
            runs,
            order: position,
            reach,
            filter: PageFilter::new(depth, fragments),
            batch: PageBatch::default(),
            filter_depth: depth,
            fragments,
            refs: [0; 2],
            other_events: 0,
            tlb_json: tlb_json(&cfg.tlb),
            deferred: vec![(0, 0); FRONT_RUN * FRONT_LANES],
            tiers: true,
        })
    }

    /// A fresh filter for this study's page batches (see [`Study::feed_pages`]).
    pub fn page_filter(&self) -> PageFilter {
        PageFilter::new(self.filter_depth, self.fragments)
    }

    /// References fed so far (instruction plus data).
    pub fn refs(&self) -> u64 {
        self.refs[0] + self.refs[1]
    }

    /// Steps every run over a batch of events. Events other than references
    /// are counted and otherwise ignored: every page here is one fixed size.
    pub fn feed(&mut self, events: &[Event]) {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        for e in events {
            self.filter.event(e, &mut batch);
        }
        // So that this batch's words stand on their own (see `feed_pages`).
        self.filter.flush(&mut batch);
        self.feed_pages(&batch);
        self.batch = batch;
    }

    /// Steps every run over a batch of page words made by a filter from
    /// [`Study::page_filter`]. Batches of several filters may be mixed
    /// provided each filter was flushed before the next one's words.
    pub fn feed_pages(&mut self, batch: &PageBatch) {
        self.refs[0] += batch.refs[0];
        self.refs[1] += batch.refs[1];
        self.other_events += batch.other_events;
        #[cfg(target_arch = "x86_64")]
        if pagelab_core::isa::active() == pagelab_core::isa::Isa::Avx512 {
            // The whole L1 arrays in tiers behind fronts of eight, where
            // they have that shape and the last batch's front misses were
            // many lanes each; else fronts alone.
            if let Some(whole) = self.take_whole().filter(|_| self.tiers) {
                // SAFETY: the active tier is one the CPU has (`isa::active`
                // checks), and the AVX-512 tier's features are those
                // `feed_whole_avx512` is compiled for.
                return unsafe { self.feed_whole_avx512(&batch.words, whole) };
            }
            // Eight ranks where the L1 arrays have room, else four.
            if let Some(fronts) = self.take_fronts::<{ pagelab_tlb::AVX512_RANKS }>() {
                // SAFETY: as for the whole L1 above, with `feed_fronts_avx512`.
                return unsafe { self.feed_fronts_avx512(&batch.words, fronts) };
            }
            if let Some(fronts) = self.take_fronts::<PORTABLE_RANKS>() {
                // SAFETY: as above.
                return unsafe { self.feed_fronts_avx512(&batch.words, fronts) };
            }
            return self.feed_each(&batch.words);
        }
        #[cfg(target_arch = "x86_64")]
        if pagelab_core::isa::active() == pagelab_core::isa::Isa::Avx2 {
            // As in the AVX-512 tier, each rank two registers.
            if let Some(whole) = self.take_whole().filter(|_| self.tiers) {
                // SAFETY: the active tier is one the CPU has (`isa::active` checks), and
                // the AVX2 tier's features are those `feed_whole_avx2` is compiled for.
                return unsafe { self.feed_whole_avx2(&batch.words, whole) };
            }
            if let Some(fronts) = self.take_fronts::<AVX2_RANKS>() {
                // SAFETY: the active tier is one the CPU has (`isa::active` checks), and
                // the AVX2 tier's features are those `feed_fronts_avx2` is compiled for.
                return unsafe { self.feed_fronts_avx2(&batch.words, fronts) };
            }
        }
        match self.take_fronts::<PORTABLE_RANKS>() {
            Some(fronts) => self.feed_fronts::<PORTABLE, PORTABLE_RANKS>(&batch.words, fronts),
            None => self.feed_each(&batch.words),
        }
    }

    /// [`Study::feed_fronts`] compiled for the AVX2 tier, whose fronts compare and move
    /// four lanes an instruction ([`Fronts::access_each_avx2`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    fn feed_fronts_avx2<const RANKS: usize>(&mut self, words: &[u64], fronts: Fronts<RANKS>) {
        self.feed_fronts::<AVX2, RANKS>(words, fronts)
    }

    /// The runs' L1 fronts of `RANKS` entries, if they qualify (see
    /// [`Fronts::take`]).
    fn take_fronts<const RANKS: usize>(&mut self) -> Option<Fronts<RANKS>> {
        Fronts::take(self.runs.iter_mut().map(|r| (&mut r.tlb, r.size)))
    }

    /// Replay words counted by side and reach, into every run they reached.
    fn count_replays(&mut self, replays: &[[u64; FRONT_LANES + 1]; 2]) {
        for (side, by_reach) in replays.iter().enumerate() {
            for (at, run) in self.runs.iter_mut().enumerate() {
                run.counts.replays[side] += by_reach[at + 1..].iter().sum::<u64>();
            }
        }
    }

    /// [`Study::feed_fronts`] compiled for AVX-512, which the lanes of the
    /// fronts take in one instruction each.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,bmi1,bmi2,popcnt")]
    fn feed_fronts_avx512<const RANKS: usize>(&mut self, words: &[u64], fronts: Fronts<RANKS>) {
        self.feed_fronts::<AVX512, RANKS>(words, fronts)
    }

    /// Steps the runs over `words` with their L1 fronts side by side (see
    /// [`Fronts`]): each word's lookups in every run it reaches at once, and
    /// only those that miss a front one by one.
    #[inline(always)]
    fn feed_fronts<const TIER: u8, const RANKS: usize>(
        &mut self,
        words: &[u64],
        mut fronts: Fronts<RANKS>,
    ) {
        // Replay words by side and reach, counted into the runs at the end.
        let mut replays = [[0u64; FRONT_LANES + 1]; 2];
        // Words with a lookup behind the front, and such lookups.
        let (mut missed_words, mut missed_lanes) = (0u64, 0u64);
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            if w & STRADDLE != 0 {
                // Rare: the fronts go back for the runs' own lookups.
                let reach = self.reach[((w >> CHANGE_SHIFT) & CHANGE_MASK) as usize] as usize;
                fronts.put_back(self.runs.iter_mut().map(|r| &mut r.tlb));
                self.straddle(w, words[i + 1], reach);
                fronts = self.take_fronts().expect("the same runs as before");
                i += 2;
                continue;
            }
            let part = part_at(words, i);
            let reach_of = &self.reach;
            let next = |j: usize| {
                let w = part[j];
                let side = (w & DATA) as usize;
                let reach = reach_of[((w >> CHANGE_SHIFT) & CHANGE_MASK) as usize] as usize;
                if w & REPLAY != 0 {
                    replays[side][reach.min(FRONT_LANES)] += 1;
                }
                (side, VirtAddr(w >> PAGE_SHIFT << PAGE_SHIFT), reach)
            };
            // The lookups that missed a whole L1, finished after the run
            // of words (so that its loop has no calls and keeps the fronts
            // in registers).
            let runs = &mut self.runs;
            let deferred = &mut self.deferred;
            let mut n = 0;
            let mut last = usize::MAX;
            let missed = |j: usize, m: FrontMiss<RANKS>| {
                missed_lanes += 1;
                missed_words += u64::from(j != last);
                last = j;
                let side = (part[j] & DATA) as usize;
                // SAFETY: only `feed_fronts_avx512` passes `AVX512`, for a CPU that has it.
                if !unsafe { m.l1_in_tier(&mut runs[m.lane].tlb, side, TIER == AVX512) } {
                    deferred[n] = (j as u32, m.lane as u8);
                    n += 1;
                }
            };
            #[cfg(target_arch = "x86_64")]
            match TIER {
                // SAFETY: only `feed_fronts_avx512` passes `AVX512`, for a CPU that has it.
                AVX512 => unsafe { fronts.access_each_avx512(part.len(), next, missed) },
                // SAFETY: only `feed_fronts_avx2` passes `AVX2`, for a CPU that has it.
                AVX2 => unsafe { fronts.access_each_avx2(part.len(), next, missed) },
                _ => fronts.access_each(part.len(), next, missed),
            }
            #[cfg(not(target_arch = "x86_64"))]
            fronts.access_each(part.len(), next, missed);
            self.finish_l1_misses(&fronts, n, |j| part[j]);
            i += part.len();
        }
        fronts.put_back(self.runs.iter_mut().map(|r| &mut r.tlb));
        self.count_replays(&replays);
        self.choose(missed_words, missed_lanes);
    }

    /// The first `n` lookups of [`Study::deferred`] (each the index of a word
    /// `word` gives, and a lane), which missed their run's whole L1: each goes on
    /// to the L2 and the walk through `fronts`, and is counted in its run.
    #[inline(always)]
    fn finish_l1_misses<const R: usize>(
        &mut self,
        fronts: &Fronts<R>,
        n: usize,
        word: impl Fn(usize) -> u64,
    ) {
        for &(j, lane) in &self.deferred[..n] {
            let w = word(j as usize);
            let side = (w & DATA) as usize;
            let addr = w >> PAGE_SHIFT << PAGE_SHIFT;
            let run = &mut self.runs[usize::from(lane)];
            let outcome =
                fronts.after_l1_miss(&mut run.tlb, side, usize::from(lane), VirtAddr(addr));
            debug_assert!(w & REPLAY == 0, "a replayed page must be in L1");
            if w & REPLAY == 0 {
                run.missed_l1(side, addr, outcome);
            }
        }
    }

    /// Whether the next batch goes through [`pagelab_tlb::WholeL1`], from this batch's
    /// `words` with a lookup behind the front and those `lookups`: a tier
    /// behind the front costs as much for one lane as for eight, so it pays
    /// where misses of the front come many lanes at once (python3, cc1: 3 to
    /// 5 lanes a word), not where they come one or two (gzip: 1.7), where
    /// each lane's own walk is cheaper.
    fn choose(&mut self, words: u64, lookups: u64) {
        if words >= 256 {
            self.tiers = 2 * lookups >= 5 * words;
        }
    }

    /// Steps the runs over `words` one by one.
    fn feed_each(&mut self, words: &[u64]) {
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let reach = self.reach[((w >> CHANGE_SHIFT) & CHANGE_MASK) as usize] as usize;
            if w & STRADDLE != 0 {
                self.straddle(w, words[i + 1], reach);
                i += 2;
                continue;
            }
            for run in &mut self.runs[..reach] {
                run.touch(w);
            }
            i += 1;
        }
    }

    /// A word spanning 4K pages `w`'s to `last`, in every run.
    fn straddle(&mut self, w: u64, last: u64, reach: usize) {
        for (at, run) in self.runs.iter_mut().enumerate() {
            run.straddle(w, last, at < reach);
        }
    }

    /// The result so far, in the `pagelab.sim/1` schema.
    pub fn finish(&self, source: SourceInfo) -> SimResult {
        let runs = self.order.iter().map(|&at| self.runs[at].stats(self.refs));
        sim_result(source, self.tlb_json.clone(), self.refs, runs.collect())
    }

    /// Events that were not references (map, unmap, ...), ignored by this study.
    pub fn other_events(&self) -> u64 {
        self.other_events
    }
}

#[cfg(test)]
mod tests;
