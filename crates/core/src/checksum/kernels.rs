//! The checksum's vector kernels: the same sums as [`super::words`], eight lanes at once.

use super::{BLOCK_STRIPES, P32, SECRET, STRIPE};
use std::arch::x86_64::*;

/// Swaps the two 64-bit lanes of each 128-bit half (`acc[i ^ 1]`).
const SWAP: i32 = 0b01_00_11_10;

/// The SSE2 kernel (the x86-64 baseline, so the portable tier's): four registers
/// of two lanes.
pub(super) fn sse2(acc: &mut [u64; 8], stripe: &mut usize, data: &[u8]) {
    // SAFETY: SSE2 is part of x86-64; the loads are unaligned loads within `acc`,
    // `SECRET` (stripe + 7 <= 22 < 32 words) and the 64-byte stripes of `data`.
    unsafe {
        let mut a: [__m128i; 4] =
            std::array::from_fn(|j| _mm_loadu_si128(acc.as_ptr().add(2 * j).cast()));
        for s in data.chunks_exact(STRIPE) {
            let key = SECRET.as_ptr().add(*stripe);
            for (j, a) in a.iter_mut().enumerate() {
                let w = _mm_loadu_si128(s.as_ptr().add(16 * j).cast());
                let k = _mm_xor_si128(w, _mm_loadu_si128(key.add(2 * j).cast()));
                let p = _mm_mul_epu32(k, _mm_srli_epi64::<32>(k));
                *a = _mm_add_epi64(*a, _mm_add_epi64(p, _mm_shuffle_epi32::<SWAP>(w)));
            }
            *stripe += 1;
            if *stripe == BLOCK_STRIPES {
                let p = _mm_set1_epi64x(P32 as i64);
                for (j, a) in a.iter_mut().enumerate() {
                    let x = _mm_xor_si128(*a, _mm_srli_epi64::<47>(*a));
                    let x =
                        _mm_xor_si128(x, _mm_loadu_si128(SECRET.as_ptr().add(24 + 2 * j).cast()));
                    let lo = _mm_mul_epu32(x, p);
                    let hi = _mm_mul_epu32(_mm_srli_epi64::<32>(x), p);
                    *a = _mm_add_epi64(lo, _mm_slli_epi64::<32>(hi));
                }
                *stripe = 0;
            }
        }
        for (j, a) in a.iter().enumerate() {
            _mm_storeu_si128(acc.as_mut_ptr().add(2 * j).cast(), *a);
        }
    }
}

/// The AVX-512 kernel: one register of eight lanes.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn avx512(acc: &mut [u64; 8], stripe: &mut usize, data: &[u8]) {
    // SAFETY: the caller checked AVX-512F; the loads are as in `sse2`.
    unsafe {
        let mut a = _mm512_loadu_si512(acc.as_ptr().cast());
        let p = _mm512_set1_epi64(P32 as i64);
        let mix = _mm512_loadu_si512(SECRET.as_ptr().add(24).cast());
        for s in data.chunks_exact(STRIPE) {
            let w = _mm512_loadu_si512(s.as_ptr().cast());
            let k = _mm512_xor_si512(w, _mm512_loadu_si512(SECRET.as_ptr().add(*stripe).cast()));
            let m = _mm512_mul_epu32(k, _mm512_srli_epi64::<32>(k));
            let swapped = _mm512_shuffle_epi32::<SWAP>(w);
            a = _mm512_add_epi64(a, _mm512_add_epi64(m, swapped));
            *stripe += 1;
            if *stripe == BLOCK_STRIPES {
                let x = _mm512_xor_si512(a, _mm512_srli_epi64::<47>(a));
                let x = _mm512_xor_si512(x, mix);
                let lo = _mm512_mul_epu32(x, p);
                let hi = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x), p);
                a = _mm512_add_epi64(lo, _mm512_slli_epi64::<32>(hi));
                *stripe = 0;
            }
        }
        _mm512_storeu_si512(acc.as_mut_ptr().cast(), a);
    }
}
