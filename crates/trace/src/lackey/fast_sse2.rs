//! The fast path's byte classification with SSE2, part of every x86_64 target.

use super::word;
use std::arch::x86_64::*;

#[target_feature(enable = "sse2")]
fn load(b: &[u8], at: usize) -> __m128i {
    _mm_set_epi64x(word(b, at + 8) as i64, word(b, at) as i64)
}

#[target_feature(enable = "sse2")]
fn splat(b: u8) -> __m128i {
    _mm_set1_epi8(b as i8)
}

#[target_feature(enable = "sse2")]
pub fn newline_mask(block: &[u8; 64]) -> u64 {
    let nl = splat(b'\n');
    (0..4).fold(0, |m, i| {
        let eq = _mm_cmpeq_epi8(load(block, 16 * i), nl);
        m | (_mm_movemask_epi8(eq) as u16 as u64) << (16 * i)
    })
}

#[target_feature(enable = "sse2")]
pub fn hex16(chunk: &[u8; 16]) -> (u32, u64) {
    let (n, nib) = digits(load(chunk, 0));
    // Pairs of digits into bytes, first digit high: 16-bit lane d0 | d1 << 8 -> d0 << 4 | d1.
    let pairs = _mm_and_si128(
        _mm_or_si128(_mm_slli_epi16::<4>(nib), _mm_srli_epi16::<8>(nib)),
        _mm_set1_epi16(0xff),
    );
    let bytes = _mm_packus_epi16(pairs, pairs);
    let v = _mm_cvtsi128_si64(bytes) as u64;
    (n, v.swap_bytes())
}

/// The number of leading hexadecimal digits of the 16 bytes `x` (0..=16), and each byte's
/// value as a digit (meaningful for the digits only): the part of `hex16` that this
/// module's and the AVX2 one's share (they differ in how they pair the digits).
#[inline(always)]
pub(super) fn digits(x: __m128i) -> (u32, __m128i) {
    // SAFETY: SSE2 only, which this build enables (the module's cfg checks).
    unsafe {
        let splat = |b: u8| _mm_set1_epi8(b as i8);
        // Signed compares: bytes from 0x80 up are negative and so never in range.
        let in_range = |v, lo: u8, hi: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, splat(lo - 1)),
                _mm_cmplt_epi8(v, splat(hi + 1)),
            )
        };
        let digit = in_range(x, b'0', b'9');
        let alpha = in_range(_mm_or_si128(x, splat(0x20)), b'a', b'f');
        let hex = _mm_movemask_epi8(_mm_or_si128(digit, alpha)) as u32;
        let n = (!hex | 1 << 16).trailing_zeros();
        let nib = _mm_add_epi8(
            _mm_and_si128(x, splat(0x0f)),
            _mm_and_si128(alpha, splat(9)),
        );
        (n, nib)
    }
}
