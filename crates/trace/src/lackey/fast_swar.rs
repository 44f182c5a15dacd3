//! The fast path's byte classification on 64-bit words (SWAR), for targets without SSE2
//! (on x86_64 compiled for the tests only).

use super::word;

const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// 0x80 in each byte of `x` that is zero.
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// 0x80 in each byte of `x` that is at least `lo` (`lo` in 1..=0x80), for bytes below 0x80.
fn at_least(x: u64, lo: u8) -> u64 {
    ((x & LOW7) + splat(0x80 - lo)) & HIGH
}

/// Bit `i` of the result is the high bit of byte `i` of `x`.
fn gather(x: u64) -> u64 {
    ((x >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

pub fn newline_mask(block: &[u8; 64]) -> u64 {
    (0..8).fold(0, |m, i| {
        m | gather(zero_bytes(word(block, 8 * i) ^ splat(b'\n'))) << (8 * i)
    })
}

/// 0x80 in each byte that is a hexadecimal digit, and the letters among them.
fn classify(x: u64) -> (u64, u64) {
    let ascii = !x & HIGH;
    let digit = at_least(x, b'0') & !at_least(x, b'9' + 1);
    let y = x | splat(0x20);
    let alpha = at_least(y, b'a') & !at_least(y, b'f' + 1) & ascii;
    ((digit & ascii) | alpha, alpha)
}

/// Nibble `15 - i` of the result is the digit value of byte `i`.
fn pack(a: u64, alpha_a: u64, b: u64, alpha_b: u64) -> u64 {
    let nib = |x: u64, alpha: u64| {
        let v = (x & splat(0x0f)) + (alpha >> 7) * 9;
        // Byte 0 (the first digit) is the most significant.
        let mut v = v.swap_bytes();
        v = (v | v >> 4) & 0x00ff_00ff_00ff_00ff;
        v = (v | v >> 8) & 0x0000_ffff_0000_ffff;
        (v | v >> 16) & 0xffff_ffff
    };
    nib(a, alpha_a) << 32 | nib(b, alpha_b)
}

pub fn hex16(chunk: &[u8; 16]) -> (u32, u64) {
    let (a, b) = (word(chunk, 0), word(chunk, 8));
    let (hex_a, alpha_a) = classify(a);
    let (hex_b, alpha_b) = classify(b);
    let not_hex = gather(!hex_a & HIGH) | gather(!hex_b & HIGH) << 8 | 1 << 16;
    let n = not_hex.trailing_zeros();
    (n, pack(a, alpha_a, b, alpha_b))
}
