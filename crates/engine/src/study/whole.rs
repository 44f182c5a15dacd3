//! The study's path through the runs' whole L1 arrays side by side
//! ([`WholeL1`]) in the AVX-512 and AVX2 tiers, taken per batch where the
//! last batch's misses of the fronts came several lanes at a time (see
//! [`Study::choose`]).

use super::{Study, AVX2, AVX512};
use pagelab_core::VirtAddr;
use pagelab_tlb::{WholeL1, FRONT_LANES};
use pagelab_trace::page_word::{CHANGE_MASK, CHANGE_SHIFT, DATA, PAGE_SHIFT, REPLAY, STRADDLE};

/// Lookups for [`Study::whole_part`]: each a page word and its reach.
trait Lookups: Copy {
    /// How many.
    fn len(&self) -> usize;
    /// Lookup `j`: its word and its reach.
    fn get(&self, j: usize) -> (u64, usize);
}

impl Lookups for &[(u64, usize); 2] {
    fn len(&self) -> usize {
        2
    }
    #[inline(always)]
    fn get(&self, j: usize) -> (u64, usize) {
        self[j]
    }
}

impl<F: Fn(usize) -> (u64, usize) + Copy> Lookups for (usize, F) {
    fn len(&self) -> usize {
        self.0
    }
    #[inline(always)]
    fn get(&self, j: usize) -> (u64, usize) {
        (self.1)(j)
    }
}

impl Study {
    /// The runs' whole L1 arrays behind fronts of eight (see [`WholeL1`]),
    /// if they qualify.
    pub(super) fn take_whole(&mut self) -> Option<WholeL1> {
        WholeL1::take(self.runs.iter_mut().map(|r| (&mut r.tlb, r.size)))
    }

    /// Steps the runs over `words` with their whole L1 arrays side by side
    /// (see [`WholeL1`]): each word's lookups in every run it reaches at
    /// once, through the fronts and as far behind them as any lane needs,
    /// and only those that miss a whole L1 one by one, after each run of
    /// words.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,bmi1,bmi2,popcnt")]
    pub(super) fn feed_whole_avx512(&mut self, words: &[u64], whole: WholeL1) {
        // SAFETY: this function is compiled for AVX-512.
        unsafe { self.feed_whole::<AVX512>(words, whole) }
    }

    /// [`Study::feed_whole_avx512`] for the AVX2 tier ([`WholeL1::access_each_avx2`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    pub(super) fn feed_whole_avx2(&mut self, words: &[u64], whole: WholeL1) {
        // SAFETY: this function is compiled for AVX2.
        unsafe { self.feed_whole::<AVX2>(words, whole) }
    }

    /// [`Study::feed_whole_avx512`]'s body, inlined there (and in
    /// [`Study::feed_whole_avx2`]) and not compiled for their features itself:
    /// closures made here must have no more features than `WholeL1`'s loops to
    /// be inlined there.
    ///
    /// # Safety
    /// The CPU must have the features of `TIER` ([`AVX512`]: AVX-512F; [`AVX2`]: AVX2).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn feed_whole<const TIER: u8>(&mut self, words: &[u64], mut whole: WholeL1) {
        // Replay words by side and reach, counted into the runs at the end.
        let mut replays = [[0u64; FRONT_LANES + 1]; 2];
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            if w & STRADDLE != 0 {
                let (last, side) = (words[i + 1], (w & DATA) as usize);
                let reach = self.reach[((w >> CHANGE_SHIFT) & CHANGE_MASK) as usize] as usize;
                i += 2;
                if last - (w >> PAGE_SHIFT) != 1 {
                    // Rare: more than two 4K pages; the runs' own lookups.
                    whole.put_back(self.runs.iter_mut().map(|r| &mut r.tlb));
                    self.straddle(w, last, reach);
                    whole = self.take_whole().expect("the same runs as before");
                    continue;
                }
                // Two 4K pages: the first page's lookup as any word's,
                // then the second's in the runs where it is another page.
                let first = w >> PAGE_SHIFT;
                let span = self
                    .runs
                    .iter()
                    .take_while(|r| {
                        first >> (r.shift - PAGE_SHIFT) != last >> (r.shift - PAGE_SHIFT)
                    })
                    .count();
                for run in &mut self.runs[..span] {
                    run.counts.extra[side] += 1;
                }
                let pair = [(w, reach), (last << PAGE_SHIFT | side as u64, span)];
                // SAFETY: the caller's contract.
                unsafe { self.whole_part::<TIER>(&mut whole, &pair, &mut replays) };
                continue;
            }
            let part = super::part_at(words, i);
            // A copy: `self` is borrowed mutably below.
            let reach_of = &self.reach.clone();
            let lookups = |j: usize| {
                let w = part[j];
                (
                    w,
                    reach_of[((w >> CHANGE_SHIFT) & CHANGE_MASK) as usize] as usize,
                )
            };
            // SAFETY: the caller's contract.
            unsafe { self.whole_part::<TIER>(&mut whole, (part.len(), lookups), &mut replays) };
            i += part.len();
        }
        let (missed_words, missed_lanes) = whole.front_misses();
        whole.put_back(self.runs.iter_mut().map(|r| &mut r.tlb));
        self.count_replays(&replays);
        self.choose(missed_words, missed_lanes);
    }

    /// The lookups `lookups` (a word and its reach, or a slice of them)
    /// through `whole`, then the L1 misses' rest in the runs.
    ///
    /// # Safety
    /// The CPU must have the features of `TIER` (see [`Study::feed_whole`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn whole_part<const TIER: u8>(
        &mut self,
        whole: &mut WholeL1,
        lookups: impl Lookups,
        replays: &mut [[u64; FRONT_LANES + 1]; 2],
    ) {
        let next = |j: usize| {
            let (w, reach) = lookups.get(j);
            let side = (w & DATA) as usize;
            if w & REPLAY != 0 {
                replays[side][reach.min(FRONT_LANES)] += 1;
            }
            (side, VirtAddr(w >> PAGE_SHIFT << PAGE_SHIFT), reach)
        };
        let deferred = &mut self.deferred;
        let mut n = 0;
        let missed = |j: usize, lane: usize| {
            deferred[n] = (j as u32, lane as u8);
            n += 1;
        };
        if TIER == AVX2 {
            // SAFETY: the caller's contract: the CPU has AVX2.
            unsafe { whole.access_each_avx2(lookups.len(), next, missed) };
        } else {
            // SAFETY: the caller's contract: the CPU has AVX-512F.
            unsafe { whole.access_each_avx512(lookups.len(), next, missed) };
        }
        self.finish_l1_misses(whole.fronts(), n, |j| lookups.get(j).0);
    }
}
