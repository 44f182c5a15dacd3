//! [`WholeL1`] in AVX2 instructions, for the `avx2` tier: the fronts' loop of
//! [`Fronts::access_each_avx2`] (eight lanes in two registers), and behind it the
//! tiers, each rank two registers, compared and moved for every lane that missed
//! at once, as [`WholeL1::access_each_avx512`] does in one.

use super::{Row, WholeL1, TIER};
use crate::front::avx2::{bits, load, move_to_front, store, Pair};
use crate::front::{each_lane, Lanes, FRONT_LANES};
use pagelab_core::VirtAddr;
use std::arch::x86_64::*;

/// Lane `i` all ones where bit `i` of `lanes` is set, else zeros.
#[target_feature(enable = "avx2")]
#[inline]
fn lanes_of(lanes: u32) -> Pair {
    let v = _mm256_set1_epi64x(i64::from(lanes));
    let low = _mm256_setr_epi64x(1, 2, 4, 8);
    let high = _mm256_setr_epi64x(16, 32, 64, 128);
    [
        _mm256_cmpeq_epi64(_mm256_and_si256(v, low), low),
        _mm256_cmpeq_epi64(_mm256_and_si256(v, high), high),
    ]
}

/// Adds one to `counts` in the lanes set in `lanes` (all ones: minus one is plus one).
#[target_feature(enable = "avx2")]
#[inline]
fn count(counts: &mut Lanes, lanes: Pair) {
    let v = load(counts);
    store(
        counts,
        [
            _mm256_sub_epi64(v[0], lanes[0]),
            _mm256_sub_epi64(v[1], lanes[1]),
        ],
    );
}

impl WholeL1 {
    /// [`WholeL1::access_each_avx512`] in AVX2 instructions: the same lookups, counts
    /// and misses, in the same order.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub unsafe fn access_each_avx2(
        &mut self,
        n: usize,
        next: impl FnMut(usize) -> (usize, VirtAddr, usize),
        mut missed: impl FnMut(usize, usize),
    ) {
        let (behind, front_misses, l1_misses, words) = (
            &mut self.behind,
            &mut self.front_misses,
            &mut self.l1_misses,
            &mut self.missed_words,
        );
        let on_miss = |i: usize, s: usize, miss: u32, key: Pair, carry: Pair| {
            let active = lanes_of(miss);
            count(&mut front_misses[s], active);
            *words += 1;
            let left = behind_front(&mut behind[s], active, key, carry);
            if bits(left) != 0 {
                count(&mut l1_misses[s], left);
                each_lane(bits(left), |lane| missed(i, lane));
            }
        };
        // SAFETY: the CPU has AVX2 (the caller's contract).
        unsafe { self.fronts.scan_avx2(n, next, on_miss) }
    }
}

/// The lookups of `key` in the lanes `active` that missed the front, through the tiers
/// `rows`, `carry` (the keys pushed out of the front) going to the front of them;
/// returns the lanes that missed every tier.
#[target_feature(enable = "avx2")]
#[inline]
fn behind_front(rows: &mut [Row], mut active: Pair, key: Pair, mut carry: Pair) -> Pair {
    const _: () = assert!(FRONT_LANES == 8);
    for tier in rows.chunks_exact_mut(TIER) {
        let zero = _mm256_setzero_si256();
        let mut old = [[zero; 2]; TIER];
        for (v, row) in old.iter_mut().zip(tier.iter()) {
            *v = load(&row.0);
        }
        // As in the front, the tier's first rank taking the key pushed out of the
        // ranks before.
        let mut new = old;
        let (_, still) = move_to_front(&mut new, active, key, carry);
        for (row, v) in tier.iter_mut().zip(new) {
            store(&mut row.0, v);
        }
        carry = old[TIER - 1];
        active = still;
        if bits(active) == 0 {
            break;
        }
    }
    active
}
