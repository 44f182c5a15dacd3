//! The fast path with AVX2 (and BMI2, POPCNT for the scalar parts), chosen at run time.

use super::{word, Sink};
use std::arch::x86_64::*;

#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
pub fn parse_blocks<S: Sink>(
    buf: &[u8],
    complete: usize,
    start: usize,
    line: u64,
    out: &mut S,
) -> (usize, u64, Result<(), &'static str>) {
    super::parse_blocks_with::<true, S>(buf, complete, start, line, out)
}

#[inline(always)]
pub fn newline_mask(block: &[u8; 64]) -> u64 {
    // SAFETY: only called from `parse_blocks`, whose caller checked AVX2.
    unsafe {
        let load = |at: usize| {
            _mm256_set_epi64x(
                word(block, at + 24) as i64,
                word(block, at + 16) as i64,
                word(block, at + 8) as i64,
                word(block, at) as i64,
            )
        };
        let nl = _mm256_set1_epi8(b'\n' as i8);
        let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(load(0), nl)) as u32 as u64;
        let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(load(32), nl)) as u32 as u64;
        lo | hi << 32
    }
}

#[inline(always)]
pub fn hex16(chunk: &[u8; 16]) -> (u32, u64) {
    // SAFETY: only called from `parse_blocks`, whose caller checked AVX2.
    unsafe {
        let x = _mm_set_epi64x(word(chunk, 8) as i64, word(chunk, 0) as i64);
        let (n, nib) = super::sse2::digits(x);
        // Pairs of digits into bytes, first digit high: d0 * 16 + d1.
        let pairs = _mm_maddubs_epi16(nib, _mm_set1_epi16(0x0110));
        let bytes = _mm_packus_epi16(pairs, pairs);
        let v = _mm_cvtsi128_si64(bytes) as u64;
        (n, v.swap_bytes())
    }
}
