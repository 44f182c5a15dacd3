//! [`Fronts::access_each`] in AVX2 instructions, for the `avx2` tier (CPUs without
//! AVX-512: most of those people use). Eight lanes are two registers of four; a
//! rank's compare, its move and the count of hits are a few instructions on both,
//! where the portable loop compares and moves lane by lane. The fronts stay in
//! memory (sixteen registers do not hold both sides' ranks), in the host's L1.

use super::{each_lane, key_of, FrontMiss, Fronts, Lanes, FRONT_LANES};
use pagelab_core::VirtAddr;
use std::arch::x86_64::*;

/// Eight lanes of 64 bits: lanes 0-3 and 4-7.
pub(crate) type Pair = [__m256i; 2];

/// Per reach (0..=8): all ones in the lanes of the first `reach` hierarchies.
static ACTIVE: [Lanes; FRONT_LANES + 1] = {
    let mut t = [[0u64; FRONT_LANES]; FRONT_LANES + 1];
    let mut reach = 0;
    while reach <= FRONT_LANES {
        let mut lane = 0;
        while lane < reach {
            t[reach][lane] = u64::MAX;
            lane += 1;
        }
        reach += 1;
    }
    t
};

/// The lanes of `lanes` as two registers.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn load(lanes: &Lanes) -> Pair {
    // SAFETY: eight u64 are two unaligned loads of 32 bytes.
    unsafe {
        [
            _mm256_loadu_si256(lanes.as_ptr().cast()),
            _mm256_loadu_si256(lanes.as_ptr().add(4).cast()),
        ]
    }
}

/// `v` into `lanes`.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn store(lanes: &mut Lanes, v: Pair) {
    // SAFETY: as in `load`, into an array borrowed mutably.
    unsafe {
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v[0]);
        _mm256_storeu_si256(lanes.as_mut_ptr().add(4).cast(), v[1]);
    }
}

impl<const RANKS: usize> Fronts<RANKS> {
    /// [`Fronts::access_each`] in AVX2 instructions (the same lookups, counts and misses,
    /// in the same order).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub unsafe fn access_each_avx2(
        &mut self,
        n: usize,
        next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut missed: impl FnMut(usize, FrontMiss<RANKS>),
    ) {
        let code = self.code;
        let on_miss = |i: usize, _side: usize, lanes: u32, key: Pair, carry: Pair| {
            let (mut keys, mut carried) = ([0; FRONT_LANES], [0; FRONT_LANES]);
            store(&mut keys, key);
            store(&mut carried, carry);
            each_lane(lanes, |lane| {
                missed(
                    i,
                    FrontMiss {
                        lane,
                        key: key_of(keys[lane], code[lane]),
                        carry: key_of(carried[lane], code[lane]),
                    },
                )
            });
        };
        // SAFETY: the CPU has AVX2 (the caller's contract).
        unsafe { self.scan_avx2(n, next, on_miss) }
    }

    /// The loop of [`Fronts::access_each_avx2`]: the lookups of reference `i` that
    /// missed their fronts are handed to `on_miss` as (`i`, the side, the bits of the
    /// lanes that missed, the lanes' keys, the keys pushed out of the front's last rank).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn scan_avx2(
        &mut self,
        n: usize,
        mut next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut on_miss: impl FnMut(usize, usize, u32, Pair, Pair),
    ) {
        let zero = _mm256_setzero_si256();
        let mut front = [[[zero; 2]; RANKS]; 2];
        for (side, keys) in front.iter_mut().zip(&self.keys) {
            for (rank, lanes) in side.iter_mut().zip(keys) {
                *rank = load(lanes);
            }
        }
        let mut hits = [load(&self.hits[0]), load(&self.hits[1])];
        let shift = load(&self.shift);
        for i in 0..n {
            let (s, addr, reach) = next(i);
            let (s, active) = (s & 1, load(&ACTIVE[reach.min(FRONT_LANES)]));
            let a = _mm256_set1_epi64x(addr.0 as i64);
            let key = [
                _mm256_srlv_epi64(a, shift[0]),
                _mm256_srlv_epi64(a, shift[1]),
            ];
            let f = &mut front[s];
            let old = *f;
            let (hit, miss) = move_to_front(f, active, key, key);
            for h in 0..2 {
                // A hit lane is all ones: minus one is plus one.
                hits[s][h] = _mm256_sub_epi64(hits[s][h], hit[h]);
            }
            let lanes = bits(miss);
            if lanes != 0 {
                on_miss(i, s, lanes, key, old[RANKS - 1]);
            }
        }
        for (side, keys) in front.iter().zip(&mut self.keys) {
            for (rank, lanes) in side.iter().zip(keys) {
                store(lanes, *rank);
            }
        }
        store(&mut self.hits[0], hits[0]);
        store(&mut self.hits[1], hits[1]);
    }
}

/// Bit `i` for lane `i` of `v` (each lane all ones or all zeros).
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn bits(v: Pair) -> u32 {
    let half = |v: __m256i| _mm256_movemask_pd(_mm256_castsi256_pd(v)) as u32;
    half(v[0]) | half(v[1]) << 4
}

/// One lookup of `key` in `N` ranks of eight lanes, in the lanes `active` (all ones or
/// all zeros): rank j takes rank j - 1's key where the key was at rank j or further, or
/// not in these ranks; rank 0 takes `first` (the key itself, or the key pushed out of
/// the ranks before these); the last rank's key goes on (the caller keeps the old ranks
/// for it). Returns the lanes that found the key and those that missed it, as
/// [`super::move_to_front`] does in AVX-512.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) fn move_to_front<const N: usize>(
    ranks: &mut [Pair; N],
    active: Pair,
    key: Pair,
    first: Pair,
) -> (Pair, Pair) {
    let zero = _mm256_setzero_si256();
    let old = *ranks;
    // Per rank, the active lanes holding the key; their union, the hits.
    let mut at = [[zero; 2]; N];
    let mut hit = [zero; 2];
    for (rank, lanes) in at.iter_mut().enumerate() {
        for h in 0..2 {
            lanes[h] = _mm256_and_si256(_mm256_cmpeq_epi64(old[rank][h], key[h]), active[h]);
            hit[h] = _mm256_or_si256(hit[h], lanes[h]);
        }
    }
    let miss = [
        _mm256_andnot_si256(hit[0], active[0]),
        _mm256_andnot_si256(hit[1], active[1]),
    ];
    let mut take = miss;
    for rank in (1..N).rev() {
        for h in 0..2 {
            take[h] = _mm256_or_si256(take[h], at[rank][h]);
            ranks[rank][h] = _mm256_blendv_epi8(old[rank][h], old[rank - 1][h], take[h]);
        }
    }
    for h in 0..2 {
        ranks[0][h] = _mm256_blendv_epi8(old[0][h], first[h], active[h]);
    }
    (hit, miss)
}
