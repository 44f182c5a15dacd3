//! Whole L1 arrays of several hierarchies, side by side.
//!
//! [`Fronts`] holds the most recent entries of up to [`FRONT_LANES`]
//! hierarchies' L1 arrays rank by rank, one lane per hierarchy; a lookup
//! that misses its front goes on in its own array, one lane at a time.
//! [`WholeL1`] holds the rest of those arrays the same way, eight ranks (a
//! tier) after another, so that the lookups of one reference that missed
//! their fronts go on through the arrays together: each tier's eight ranks
//! compared and moved for all those lanes at once, as the front's are, and
//! the next tier only for the lanes not found yet. A lookup found behind
//! the front costs one tier per eight ranks of depth, shared by every lane
//! that missed, with no walk of its own and no branch on its place.
//!
//! A tier costs as much for one lane as for eight, where a lane's own walk
//! behind the front ([`crate::FrontMiss`]) costs one vector of eight keys:
//! the tiers pay where a reference's misses of the front come several lanes
//! at once (python3 and cc1: 3 to 5 lanes a word, the model alone 0.84-0.90x),
//! not where they come one or two (gzip: 1.7, 1.07-1.10x); the study chooses
//! between the two per batch ([`WholeL1::front_misses`]).
//!
//! The AVX-512 tier steps it in one register a rank
//! ([`WholeL1::access_each_avx512`]), the AVX2 tier in two
//! ([`WholeL1::access_each_avx2`]); the portable tier uses [`Fronts`] alone.

use crate::array::EMPTY;
use crate::front::{each_lane, key_of, move_to_front, page_of, Fronts, Lanes, FRONT_LANES};
use crate::TlbHierarchy;
use pagelab_core::{PageSize, VirtAddr};

// A tier is one register of eight lanes, as a rank of the front is.
const _: () = assert!(FRONT_LANES == 8 && crate::front::AVX512_RANKS == 8);

/// Ranks in a tier behind the front: one AVX-512 register's compares each.
const TIER: usize = 8;

/// Ranks of the front: a tier too.
const RANKS: usize = TIER;

/// One rank of every lane, on a cache line of its own, so that a tier's
/// stores are whole lines that the next lookup's loads take forwarded.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
struct Row(Lanes);

/// The L1 arrays of up to [`FRONT_LANES`] hierarchies, each for pages of
/// one size: the fronts of `RANKS` entries ([`Fronts`]) and the ranks behind
/// them in tiers of eight (see the module docs).
///
/// While it holds them, the hierarchies' L1 arrays are stale: use the
/// hierarchies only through [`Fronts::after_l1_miss`] (through [`WholeL1::fronts`]) until
/// [`WholeL1::put_back`].
#[derive(Clone, Debug)]
pub struct WholeL1 {
    fronts: Fronts<RANKS>,
    /// Per side, the ranks after the front, rank by rank, a lane per hierarchy.
    behind: [Vec<Row>; 2],
    /// Per side and lane, lookups that missed the front (L1 accesses beside
    /// the front's hits), and lookups that missed the whole array.
    front_misses: [Lanes; 2],
    l1_misses: [Lanes; 2],
    /// References with some lookup that missed its front, since taken.
    missed_words: u64,
}

impl WholeL1 {
    /// Takes the L1 arrays of `tlbs` (each with the page size it steps), if
    /// [`Fronts::take`] takes their fronts and on each side every array has
    /// the same number of entries, `RANKS` and a whole number of tiers of
    /// eight; else `None`, and nothing is taken.
    pub fn take<'a>(
        tlbs: impl IntoIterator<Item = (&'a mut TlbHierarchy, PageSize)>,
    ) -> Option<WholeL1> {
        let mut tlbs: Vec<(&'a mut TlbHierarchy, PageSize)> = tlbs.into_iter().collect();
        if tlbs.len() > FRONT_LANES {
            return None;
        }
        let mut behind: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
        for (s, rows) in behind.iter_mut().enumerate() {
            let mut entries = None;
            for (lane, (tlb, size)) in tlbs.iter_mut().enumerate() {
                let keys = tlb.front_array(s, *size, RANKS)?.keys_mut();
                if *entries.get_or_insert(keys.len()) != keys.len()
                    || !(keys.len() - RANKS).is_multiple_of(TIER)
                {
                    return None;
                }
                rows.resize(keys.len() - RANKS, Row([EMPTY; FRONT_LANES]));
                for (row, &k) in rows.iter_mut().zip(&keys[RANKS..]) {
                    row.0[lane] = page_of(k);
                }
            }
        }
        let fronts = Fronts::take(tlbs.iter_mut().map(|(t, s)| (&mut **t, *s)))?;
        Some(WholeL1 {
            fronts,
            behind,
            front_misses: [[0; FRONT_LANES]; 2],
            l1_misses: [[0; FRONT_LANES]; 2],
            missed_words: 0,
        })
    }

    /// Since taken (or put back): the references with some lookup that
    /// missed its front, and those lookups. Their ratio says whether the
    /// tiers pay: a tier costs as much for one lane as for eight.
    pub fn front_misses(&self) -> (u64, u64) {
        let lanes = self.front_misses.iter().flatten().sum();
        (self.missed_words, lanes)
    }

    /// Gives the arrays back to `tlbs` (the same hierarchies, in the same
    /// order, as taken) with their lookups counted; they stay held too.
    pub fn put_back<'a>(&mut self, tlbs: impl IntoIterator<Item = &'a mut TlbHierarchy>) {
        let mut tlbs: Vec<&'a mut TlbHierarchy> = tlbs.into_iter().collect();
        self.fronts.put_back(tlbs.iter_mut().map(|t| &mut **t));
        for (lane, tlb) in tlbs.into_iter().enumerate().take(self.fronts.sizes.len()) {
            for s in 0..2 {
                let array = tlb
                    .front_array(s, self.fronts.sizes[lane], RANKS)
                    .expect("the hierarchies WholeL1::take took");
                let code = self.fronts.code[lane];
                for (k, row) in array.keys_mut()[RANKS..].iter_mut().zip(&self.behind[s]) {
                    *k = key_of(row.0[lane], code);
                }
                array.recount();
                tlb.count_front_hits(s, std::mem::take(&mut self.front_misses[s][lane]));
                tlb.count_l1_misses(s, std::mem::take(&mut self.l1_misses[s][lane]));
            }
        }
        self.missed_words = 0;
    }

    /// Looks up `n` references in the arrays, in order: reference `i` is
    /// `next(i)` = (side: 0 instruction, 1 data; byte address; reach: the
    /// first `reach` hierarchies look it up). Each lookup that misses its
    /// whole L1 array is handed to `missed` (the reference's number, the
    /// lane), to be finished by [`Fronts::after_l1_miss`] (through [`WholeL1::fronts`]), then or later
    /// (the L1 does not depend on it), as long as each hierarchy's are
    /// finished in order.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn access_each_avx512(
        &mut self,
        n: usize,
        next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut missed: impl FnMut(usize, usize),
    ) {
        use std::arch::x86_64::*;
        // SAFETY: eight u64, the width; the CPU has AVX-512F (the caller's contract).
        let load = |lanes: &Lanes| unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) };
        // SAFETY: as for `load`, into an array borrowed mutably.
        let store =
            |lanes: &mut Lanes, v| unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), v) };
        let one = _mm512_set1_epi64(1);
        let count = |counts: &mut Lanes, lanes: u8| {
            let v = load(counts);
            store(counts, _mm512_mask_add_epi64(v, lanes, v, one));
        };
        let (behind, front_misses, l1_misses, words) = (
            &mut self.behind,
            &mut self.front_misses,
            &mut self.l1_misses,
            &mut self.missed_words,
        );
        let on_miss = |i: usize, s: usize, miss: u8, key: __m512i, carry: __m512i| {
            count(&mut front_misses[s], miss);
            *words += 1;
            // SAFETY: the CPU has AVX-512F (the caller's contract).
            let left = unsafe { Self::behind_front(&mut behind[s], miss, key, carry) };
            if left != 0 {
                count(&mut l1_misses[s], left);
                each_lane(u32::from(left), |lane| missed(i, lane));
            }
        };
        // SAFETY: the CPU has AVX-512F (the caller's contract).
        unsafe { self.fronts.scan_avx512(n, next, on_miss) }
    }

    /// The lookups of `key` in the lanes `active` that missed the front,
    /// through the tiers `rows`, `carry` (the keys pushed out of the front)
    /// going to the front of them; returns the lanes that missed every tier.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn behind_front(
        rows: &mut [Row],
        mut active: u8,
        key: std::arch::x86_64::__m512i,
        mut carry: std::arch::x86_64::__m512i,
    ) -> u8 {
        use std::arch::x86_64::*;
        // SAFETY: a row is eight u64 on a line of its own, the load's
        // width; the CPU has AVX-512F (the caller's contract).
        let load = |row: &Row| unsafe { _mm512_loadu_si512(row.0.as_ptr().cast()) };
        // SAFETY: as for `load`, into a row borrowed mutably.
        let store = |row: &mut Row, v| unsafe { _mm512_storeu_si512(row.0.as_mut_ptr().cast(), v) };
        for tier in rows.chunks_exact_mut(TIER) {
            let mut old = [_mm512_setzero_si512(); TIER];
            for (v, row) in old.iter_mut().zip(tier.iter()) {
                let mut x = load(row);
                // The vector made opaque (no instruction): else the
                // compiler sees that the lanes not taken are the memory's
                // own and stores only the others, a masked store, which the
                // next lookup's load of the line waits for instead of
                // taking it forwarded.
                // SAFETY: an empty template; the register in is the register out.
                unsafe {
                    std::arch::asm!("/* {0} */", inout(zmm_reg) x, options(pure, nomem, nostack, preserves_flags));
                }
                *v = x;
            }
            // As in the front (`Fronts`), the tier's first rank taking the
            // key pushed out of the ranks before.
            let mut new = old;
            // SAFETY: the CPU has AVX-512F (the caller's contract).
            let (_, still) = unsafe { move_to_front(&mut new, active, key, carry) };
            for (row, v) in tier.iter_mut().zip(new) {
                store(row, v);
            }
            carry = old[TIER - 1];
            active = still;
            if active == 0 {
                break;
            }
        }
        active
    }

    /// The fronts, through whose [`Fronts::after_l1_miss`] a lookup that
    /// missed the whole L1 goes on to the L2 and the walk counters.
    #[inline]
    pub fn fronts(&self) -> &Fronts<RANKS> {
        &self.fronts
    }
}

#[cfg(target_arch = "x86_64")]
#[path = "whole_avx2.rs"]
mod avx2;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::tests::{drive, Ref};
    use crate::{preset, Outcome, TlbConfig, TlbStats};
    use proptest::prelude::*;

    /// Steps the first `reach` of the hierarchies through each of `refs`:
    /// through [`WholeL1`] (its AVX2 loop if `avx2`, else its AVX-512 one), `chunk`
    /// references a call, or each hierarchy on its own when `chunk` is 0 (see
    /// [`drive`]).
    fn step(
        cfg: &TlbConfig,
        refs: &[Ref],
        chunk: usize,
        avx2: bool,
    ) -> (Vec<TlbStats>, Vec<Vec<Outcome>>) {
        let take = |tlbs: &mut [TlbHierarchy], sizes: &[PageSize]| {
            WholeL1::take(tlbs.iter_mut().zip(sizes.iter().copied()))
                .expect("the configuration qualifies")
        };
        let lookup = |whole: &mut WholeL1, tlbs: &mut [TlbHierarchy], _: usize, part: &[Ref]| {
            let next = |i: usize| {
                let (data, addr, reach) = part[i];
                (usize::from(data), addr, reach)
            };
            let mut l1_misses = Vec::new();
            let missed = |i, lane| l1_misses.push((i, lane));
            if avx2 {
                // SAFETY: the caller checked that the CPU has AVX2.
                unsafe { whole.access_each_avx2(part.len(), next, missed) };
            } else {
                // SAFETY: the caller checked that the CPU has AVX-512F.
                unsafe { whole.access_each_avx512(part.len(), next, missed) };
            }
            l1_misses
                .into_iter()
                .map(|(i, lane)| {
                    let (data, addr, _) = part[i];
                    let o = whole.fronts().after_l1_miss(
                        &mut tlbs[lane],
                        usize::from(data),
                        lane,
                        addr,
                    );
                    (i, lane, o)
                })
                .collect()
        };
        let put_back =
            |whole: &mut WholeL1, tlbs: &mut [TlbHierarchy]| whole.put_back(tlbs.iter_mut());
        drive(cfg, refs, chunk, take, lookup, put_back)
    }

    /// A front and nothing behind it (instructions), a front and a tier
    /// (data), and an L2 both sides share, so that its order matters.
    fn tiny() -> TlbConfig {
        let text = "name = \"t\"\n[l1i]\narrays = [{ entries = 8 }]\n[l1d]\narrays = [{ entries = 16 }]\n[l2]\narrays = [{ entries = 24 }]\n";
        TlbConfig::from_toml_str(text, "test").unwrap()
    }

    proptest! {
        /// Lookups through the whole arrays give every outcome and every
        /// counter of the hierarchies' own lookups, with and without an L2.
        #[test]
        fn whole_arrays_agree_with_own_lookups(
            refs in proptest::collection::vec((any::<bool>(), 0u64..300, 0u64..0x1000, 1usize..=4), 0..3000),
            tiny_arrays in any::<bool>(),
            chunk in 1usize..200,
        ) {
            let refs: Vec<_> = refs.iter().map(|&(d, p, o, r)| (d, VirtAddr(p * p * 0x3000 + o), r)).collect();
            let cfg = if tiny_arrays { tiny() } else { preset("zen4").unwrap() };
            let own = step(&cfg, &refs, 0, false);
            if pagelab_core::isa::Isa::Avx512.supported() {
                prop_assert_eq!(step(&cfg, &refs, chunk, false), own.clone(), "AVX-512");
            } else {
                eprintln!("the AVX-512 loop skipped: this CPU has no AVX-512F");
            }
            if pagelab_core::isa::Isa::Avx2.supported() {
                prop_assert_eq!(step(&cfg, &refs, chunk, true), own, "AVX2");
            } else {
                eprintln!("the AVX2 loop skipped: this CPU has no AVX2");
            }
        }
    }

    #[test]
    fn only_whole_tiers_are_taken() {
        let mut tlb = TlbHierarchy::new(&preset("weisberg").unwrap()).unwrap();
        assert!(WholeL1::take([(&mut tlb, PageSize::K4)]).is_some());
        // Entries behind the front not a whole number of tiers.
        let text =
            "name = \"t\"\n[l1i]\narrays = [{ entries = 8 }]\n[l1d]\narrays = [{ entries = 12 }]\n";
        let mut odd = TlbHierarchy::new(&TlbConfig::from_toml_str(text, "test").unwrap()).unwrap();
        assert!(WholeL1::take([(&mut odd, PageSize::K4)]).is_none());
        // Different lengths on one side.
        let mut other = TlbHierarchy::new(&tiny()).unwrap();
        assert!(WholeL1::take([(&mut tlb, PageSize::K4), (&mut other, PageSize::M2)]).is_none());
    }
}
