//! The most recent L1 entries of several hierarchies, side by side.
//!
//! A page-size study steps one hierarchy per page size with each reference,
//! and most of those lookups hit one of the few most recent entries of the
//! side's L1 array (its front: `RANKS` entries, a const parameter of
//! [`Fronts`]: [`AVX512_RANKS`] in the AVX-512 tier, [`PORTABLE_RANKS`] in
//! the others).
//! [`Fronts`] takes the fronts of up to [`FRONT_LANES`] hierarchies into one
//! table, rank by rank with one lane per hierarchy, so that a reference's
//! lookups in all of them are a few operations on whole ranks (with AVX-512,
//! one instruction a rank, the table held in registers while
//! [`Fronts::access_each_avx512`] runs; with AVX2, two a rank,
//! [`Fronts::access_each_avx2`]). A lookup that misses its front goes
//! on in its own hierarchy exactly as the hierarchy's own lookup would: the
//! key pushed out of the front goes to the front of the rest of the array,
//! and so on ([`FrontMiss::l1`], then [`Fronts::after_l1_miss`]). [`Fronts::put_back`] returns the fronts
//! and the counts, after which the hierarchies are as if every lookup had
//! been their own.

use crate::array::{Key, EMPTY};
use crate::{Outcome, TlbHierarchy};
use pagelab_core::{PageSize, VirtAddr, MIN_PAGE_SHIFT};

/// Calls `f` with each lane whose bit is set in `lanes`, lowest first.
#[inline]
pub(crate) fn each_lane(mut lanes: u32, mut f: impl FnMut(usize)) {
    while lanes != 0 {
        f(lanes.trailing_zeros() as usize);
        lanes &= lanes - 1;
    }
}

/// The most hierarchies one [`Fronts`] holds.
pub const FRONT_LANES: usize = 8;

/// The entries of a front in the portable tier ([`Fronts::access_each`]):
/// it compares and moves every rank of every lane one by one, so eight ranks
/// cost it more than the lookups they keep from the arrays behind (the
/// native python3 study 1.09-1.14x slower with eight, docs/speed.md).
pub const PORTABLE_RANKS: usize = 4;

/// The entries of a front in the AVX-512 tier
/// ([`Fronts::access_each_avx512`]): a rank is one register, so eight cost
/// little more than four, and they keep far more lookups from the walk of
/// the array behind the front (gzip: 1.6 M of 17 M lookups go there instead
/// of 4.5 M; the model alone 0.69-0.81x on python3 and cc1).
pub const AVX512_RANKS: usize = 8;

/// Lanes of keys, one per hierarchy.
pub(crate) type Lanes = [Key; FRONT_LANES];

/// The page number a front holds for key `k` (an array's key: the page
/// number above the size's code): the fronts compare page numbers, each lane
/// being of one size, so that a reference's keys are one shift per lane.
#[inline(always)]
pub(crate) fn page_of(k: Key) -> u64 {
    if k == EMPTY {
        EMPTY
    } else {
        k >> 5
    }
}

/// The array's key for page number `page` (from [`page_of`]) of the size
/// whose code is `code`.
#[inline(always)]
pub(crate) fn key_of(page: u64, code: u64) -> Key {
    if page == EMPTY {
        EMPTY
    } else {
        page << 5 | code
    }
}

/// Each lane's page number of byte `addr` (lane `i`'s pages of `2^shift[i]`
/// bytes).
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn page_numbers(
    addr: VirtAddr,
    shift: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let mut v = _mm512_set1_epi64(addr.0 as i64);
    // `vpsrlvq` itself: the intrinsic's portable form selects 0 for shifts
    // of 64 or more, a compare and a blend more per reference, though no
    // lane's shift is ever that large.
    // SAFETY: one AVX-512F instruction on registers (the caller's contract).
    unsafe {
        std::arch::asm!("vpsrlvq {v}, {v}, {s}", v = inout(zmm_reg) v, s = in(zmm_reg) shift, options(pure, nomem, nostack, preserves_flags));
    }
    v
}

/// One lookup of `key` in `N` ranks of eight lanes, in the lanes `active`:
/// rank j takes rank j - 1's key where the key was at rank j or further, or
/// not in these ranks; rank 0 takes `first` (the key itself, or the key
/// pushed out of the ranks before these); the last rank's key goes on (the
/// caller keeps the old ranks for it). Returns the lanes that found the key
/// and those that missed it.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn move_to_front<const N: usize>(
    ranks: &mut [std::arch::x86_64::__m512i; N],
    active: u8,
    key: std::arch::x86_64::__m512i,
    first: std::arch::x86_64::__m512i,
) -> (u8, u8) {
    use std::arch::x86_64::*;
    let old = *ranks;
    let mut at = [0u8; N];
    let mut hit = 0;
    for rank in 0..N {
        at[rank] = _mm512_mask_cmpeq_epu64_mask(active, old[rank], key);
        hit |= at[rank];
    }
    let miss = active & !hit;
    let mut take = miss;
    for rank in (1..N).rev() {
        take |= at[rank];
        ranks[rank] = _mm512_mask_mov_epi64(old[rank], take, old[rank - 1]);
    }
    ranks[0] = _mm512_mask_mov_epi64(old[0], active, first);
    (hit, miss)
}

/// The L1 fronts of up to [`FRONT_LANES`] hierarchies, each for pages of one
/// size, `RANKS` entries each (see the module docs).
///
/// While it holds them, the hierarchies' own fronts are stale: use the
/// hierarchies only through [`FrontMiss::l1`] and [`Fronts::after_l1_miss`]
/// until [`Fronts::put_back`].
#[derive(Clone, Debug)]
pub struct Fronts<const RANKS: usize> {
    pub(crate) sizes: Vec<PageSize>,
    /// Per side and rank, the page number of each hierarchy's entry (see
    /// [`page_of`]; most recent at rank 0).
    pub(crate) keys: [[Lanes; RANKS]; 2],
    /// Per lane, the page shift, and the size's code in a key's low bits.
    pub(crate) shift: [u64; FRONT_LANES],
    pub(crate) code: [u64; FRONT_LANES],
    /// Per side and lane, front hits not yet counted in the hierarchy.
    pub(crate) hits: [[u64; FRONT_LANES]; 2],
    /// The last lookup's page number per lane, and the one it pushed out of
    /// the front (read only for the lanes that missed).
    key: Lanes,
    carry: Lanes,
}

impl<const RANKS: usize> Fronts<RANKS> {
    /// Takes the L1 fronts of `tlbs` (each with the page size it steps), if
    /// there are at most [`FRONT_LANES`] and each L1 side is one small fully
    /// associative array of at least `RANKS` entries caching such pages as
    /// themselves; else `None`, and nothing is taken.
    pub fn take<'a>(
        tlbs: impl IntoIterator<Item = (&'a mut TlbHierarchy, PageSize)>,
    ) -> Option<Fronts<RANKS>> {
        let mut fronts = Fronts {
            sizes: Vec::new(),
            keys: [[[EMPTY; FRONT_LANES]; RANKS]; 2],
            // Unused lanes: any key, never looked at.
            shift: [MIN_PAGE_SHIFT as u64; FRONT_LANES],
            code: [0; FRONT_LANES],
            hits: [[0; FRONT_LANES]; 2],
            key: [EMPTY; FRONT_LANES],
            carry: [EMPTY; FRONT_LANES],
        };
        for (lane, (tlb, size)) in tlbs.into_iter().enumerate() {
            if lane == FRONT_LANES {
                return None;
            }
            for s in 0..2 {
                let front = *tlb.front_array(s, size, RANKS)?.front_mut::<RANKS>();
                for (rank, &k) in front.iter().enumerate() {
                    fronts.keys[s][rank][lane] = page_of(k);
                }
            }
            fronts.sizes.push(size);
            fronts.shift[lane] = u64::from(size.shift());
            fronts.code[lane] = size.index() as u64;
        }
        Some(fronts)
    }

    /// Gives the fronts back to `tlbs` (the same hierarchies, in the same
    /// order, as taken) with the hits counted; they stay held too.
    pub fn put_back<'a>(&mut self, tlbs: impl IntoIterator<Item = &'a mut TlbHierarchy>) {
        for (lane, tlb) in tlbs.into_iter().enumerate().take(self.sizes.len()) {
            for s in 0..2 {
                let array = tlb
                    .front_array(s, self.sizes[lane], RANKS)
                    .expect("the hierarchies Fronts::take took");
                let front = array.front_mut::<RANKS>();
                for (rank, k) in front.iter_mut().enumerate() {
                    *k = key_of(self.keys[s][rank][lane], self.code[lane]);
                }
                tlb.count_front_hits(s, std::mem::take(&mut self.hits[s][lane]));
            }
        }
    }

    /// Looks up the page holding byte `addr` on side `s` (0: instruction, 1:
    /// data) in the first `reach` hierarchies; returns the mask of those
    /// whose front missed, with their page numbers in `self.key` and the
    /// ones they pushed out of the front in `self.carry`.
    #[inline(always)]
    fn access(&mut self, s: usize, addr: VirtAddr, reach: usize) -> u8 {
        let active = ((1u32 << reach.min(FRONT_LANES)) - 1) as u8;
        let mut key = [0; FRONT_LANES];
        for (lane, k) in key.iter_mut().enumerate() {
            *k = addr.0 >> self.shift[lane];
        }
        let f = &mut self.keys[s];
        let mut at = [0u8; RANKS];
        for (rank, m) in at.iter_mut().enumerate() {
            for lane in 0..FRONT_LANES {
                *m |= u8::from(f[rank][lane] == key[lane]) << lane;
            }
            *m &= active;
        }
        let hit = at.iter().fold(0, |h, &m| h | m);
        let miss = active & !hit;
        // Rank j takes rank j - 1's key where the key was at rank j or
        // further, or missed; rank 0 takes the key; the last rank's goes on.
        self.carry = f[RANKS - 1];
        let on = |m: u8, lane: usize| m >> lane & 1 != 0;
        let mut take = miss;
        for rank in (1..RANKS).rev() {
            take |= at[rank];
            let (before, from) = f.split_at_mut(rank);
            for (lane, (k, &prev)) in from[0].iter_mut().zip(&before[rank - 1]).enumerate() {
                if on(take, lane) {
                    *k = prev;
                }
            }
        }
        for lane in 0..FRONT_LANES {
            if on(active, lane) {
                f[0][lane] = key[lane];
            }
            self.hits[s][lane] += u64::from(on(hit, lane));
        }
        self.key = key;
        miss
    }

    /// Looks up `n` references in the fronts, in order: reference `i` is
    /// `next(i)` = (side: 0 instruction, 1 data; byte address; reach: the
    /// first `reach` hierarchies look it up). Each lookup that misses its
    /// front is handed to `missed` (the reference's number, the miss) at
    /// once, to be looked up in the rest of its L1 there ([`FrontMiss::l1`])
    /// before the next.
    #[inline]
    pub fn access_each(
        &mut self,
        n: usize,
        mut next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut missed: impl FnMut(usize, FrontMiss<RANKS>),
    ) {
        for i in 0..n {
            let (s, addr, reach) = next(i);
            let lanes = self.access(s, addr, reach);
            each_lane(u32::from(lanes), |lane| missed(i, self.miss(lane)));
        }
    }

    /// [`Fronts::access_each`] in AVX-512 instructions: the fronts of both
    /// sides stay in registers all along, a rank's eight lanes in one, and a
    /// reference's lookups in all of them take a few instructions per rank.
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
        mut missed: impl FnMut(usize, FrontMiss<RANKS>),
    ) {
        use std::arch::x86_64::*;
        let code = self.code;
        let on_miss = |i: usize, _side: usize, miss: u8, key: __m512i, carry: __m512i| {
            // The lanes' keys taken from the registers, not through memory
            // (a store and a load would cost more, and whether they do
            // depends on where the stack happens to lie).
            each_lane(u32::from(miss), |lane| {
                let pick = |v| {
                    let at = _mm512_set1_epi64(lane as i64);
                    _mm_cvtsi128_si64(_mm512_castsi512_si128(_mm512_permutexvar_epi64(at, v)))
                        as u64
                };
                let m = FrontMiss {
                    lane,
                    key: key_of(pick(key), code[lane]),
                    carry: key_of(pick(carry), code[lane]),
                };
                missed(i, m);
            });
        };
        // SAFETY: the CPU has AVX-512F (the caller's contract).
        unsafe { self.scan_avx512(n, next, on_miss) }
    }

    /// The loop of [`Fronts::access_each_avx512`]: the lookups of reference
    /// `i` that missed their fronts are handed to `on_miss` as (`i`, the
    /// side, the mask of the lanes that missed, the lanes' keys, the keys
    /// pushed out of the front's last rank), while the fronts stay in
    /// registers.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn scan_avx512(
        &mut self,
        n: usize,
        mut next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut on_miss: impl FnMut(
            usize,
            usize,
            u8,
            std::arch::x86_64::__m512i,
            std::arch::x86_64::__m512i,
        ),
    ) {
        use std::arch::x86_64::*;
        // SAFETY: each array is eight u64, 64 bytes, the unaligned load's
        // width; the CPU has AVX-512F (the caller's contract).
        let load = |lanes: &Lanes| unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) };
        let store =
            // SAFETY: as for `load`, into an array borrowed mutably.
            |lanes: &mut Lanes, v| unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), v) };
        // Plain loops: `array::map` and `from_fn` would take their closures
        // out of line, without AVX-512.
        let mut front = [[_mm512_setzero_si512(); RANKS]; 2];
        for (side, keys) in front.iter_mut().zip(&self.keys) {
            for (rank, lanes) in side.iter_mut().zip(keys) {
                *rank = load(lanes);
            }
        }
        let [mut front_i, mut front_d] = front;
        let mut hits = [load(&self.hits[0]), load(&self.hits[1])];
        let shift = load(&self.shift);
        let one = _mm512_set1_epi64(1);
        // One side's lookup in its front: the lanes that missed, and the key
        // pushed out of the last rank.
        let step = |front: &mut [__m512i; RANKS], hits: &mut __m512i, active: u8, key| {
            let old = *front;
            // SAFETY: the CPU has AVX-512F (the caller's contract).
            let (hit, miss) = unsafe { move_to_front(front, active, key, key) };
            *hits = _mm512_mask_add_epi64(*hits, hit, *hits, one);
            (miss, old[RANKS - 1])
        };
        for i in 0..n {
            let (s, addr, reach) = next(i);
            let active = ((1u32 << reach.min(FRONT_LANES)) - 1) as u8;
            // SAFETY: the CPU has AVX-512F (the caller's contract).
            let key = unsafe { page_numbers(addr, shift) };
            // A branch on the side, not blends: the words of a run mostly
            // keep to one side, so it is well predicted.
            let (miss, carry) = if s & 1 == 0 {
                step(&mut front_i, &mut hits[0], active, key)
            } else {
                step(&mut front_d, &mut hits[1], active, key)
            };
            if miss != 0 {
                on_miss(i, s & 1, miss, key, carry);
            }
        }
        let front = [front_i, front_d];
        for (side, keys) in front.iter().zip(&mut self.keys) {
            for (rank, lanes) in side.iter().zip(keys) {
                store(lanes, *rank);
            }
        }
        store(&mut self.hits[0], hits[0]);
        store(&mut self.hits[1], hits[1]);
    }

    /// The rest of a lookup of byte `addr` on side `s` in hierarchy `lane`
    /// (`tlb`) whose [`FrontMiss::l1`] missed: the L2, if any, then the walk
    /// counters.
    #[inline]
    pub fn after_l1_miss(
        &self,
        tlb: &mut TlbHierarchy,
        s: usize,
        lane: usize,
        addr: VirtAddr,
    ) -> Outcome {
        tlb.after_front_l1_miss(s, addr, self.sizes[lane])
    }

    /// Lane `lane`'s miss in the last lookup.
    #[inline(always)]
    fn miss(&self, lane: usize) -> FrontMiss<RANKS> {
        FrontMiss {
            lane,
            key: key_of(self.key[lane], self.code[lane]),
            carry: key_of(self.carry[lane], self.code[lane]),
        }
    }
}

/// A lookup that missed its hierarchy's front of `RANKS` entries (see
/// [`Fronts::access_each`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontMiss<const RANKS: usize> {
    /// The hierarchy's lane: its place among those taken.
    pub lane: usize,
    key: Key,
    carry: Key,
}

impl<const RANKS: usize> FrontMiss<RANKS> {
    /// Looks this lookup up in the rest of its hierarchy's L1 array (`tlb`,
    /// side `s`), as the hierarchy's own lookup would have gone on: the key
    /// pushed out of the front goes to the front of the rest, and so on.
    /// Returns whether the array held the page; when it did not,
    /// [`Fronts::after_l1_miss`] finishes the lookup, then or later (the L1
    /// does not depend on it), as long as each hierarchy's are finished in
    /// order.
    #[inline(always)]
    pub fn l1(self, tlb: &mut TlbHierarchy, s: usize) -> bool {
        tlb.l1_behind_front::<RANKS>(s, self.key, self.carry)
    }

    /// [`FrontMiss::l1`] with the walk of the array in AVX-512 instructions
    /// (the same result and the same array after).
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub unsafe fn l1_avx512(self, tlb: &mut TlbHierarchy, s: usize) -> bool {
        // SAFETY: the CPU has AVX-512F (the caller's contract).
        unsafe { tlb.l1_behind_front_avx512::<RANKS>(s, self.key, self.carry) }
    }

    /// [`FrontMiss::l1_avx512`] when `avx512`, else [`FrontMiss::l1`].
    ///
    /// # Safety
    /// `avx512` only where the CPU has AVX-512F.
    #[inline(always)]
    pub unsafe fn l1_in_tier(self, tlb: &mut TlbHierarchy, s: usize, avx512: bool) -> bool {
        #[cfg(target_arch = "x86_64")]
        if avx512 {
            // SAFETY: the CPU has AVX-512F (the caller's contract).
            return unsafe { self.l1_avx512(tlb, s) };
        }
        let _ = avx512;
        self.l1(tlb, s)
    }
}

#[cfg(target_arch = "x86_64")]
#[path = "front_avx2.rs"]
pub(crate) mod avx2;

#[cfg(test)]
#[path = "front_tests.rs"]
pub(crate) mod tests;
