//! pagelab's checksum of a trace's bytes, for a result's provenance.
//!
//! # Definition (`pl2:`)
//! The bytes are taken in stripes of 64 (eight little-endian 64-bit words `w[0..8]`), the
//! last stripe zero padded. Eight 64-bit accumulators start at `INIT`. Stripe `s` of a
//! block (16 stripes, 1 KiB) adds, for each lane `i`,
//!
//! ```text
//! k = w[i] ^ SECRET[s + i]
//! acc[i]     += (k mod 2^32) * (k >> 32)      (a 32 x 32 -> 64-bit product)
//! acc[i ^ 1] += w[i]
//! ```
//!
//! and after a block's 16th stripe each accumulator is scrambled:
//! `a ^= a >> 47; a ^= SECRET[24 + i]; a *= P32` (wrapping). The last, padded stripe is
//! added as any other, at its place in its block. `SECRET` is 32 words of splitmix64
//! from a fixed seed.
//!
//! The stream is cut into segments of [`Checksum::SEGMENT`] (2 MiB) at fixed offsets, the last
//! shorter; each segment is summed as above from `INIT` on its own, and its length and
//! accumulators fold to a 64-bit digest. The digests chain in order, the stream's
//! length is folded in (see [`Checksum::finish`]), and the result is written `pl2:` and
//! 16 hex digits. The segments let a reader that parses a file in pieces on many
//! threads hash each piece's bytes as it parses them.
//!
//! Every lane is a chain of one add per stripe, so the sum runs at the speed of the
//! loads: eight lanes are one AVX-512 register or four SSE2 registers, and the
//! portable words give the same value on every CPU (tested against each other and
//! against a byte-at-a-time reference in `checksum/tests.rs`). It replaced `pl64:` (four
//! lanes of two multiplies and a rotate per word over the whole stream, about 8 GB/s) in
//! session 47: the Lackey study's pieces could not hash it, so the file was read a second
//! time for it, a tenth of the study's time.

use crate::isa::{self, Isa};

/// Bytes in a stripe: eight 64-bit lanes.
const STRIPE: usize = 64;
/// Stripes in a block, after which the accumulators are scrambled.
const BLOCK_STRIPES: usize = 16;

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
/// The scramble's multiplier, below 2^32 so that a SIMD lane multiplies it in two halves.
const P32: u64 = 0x9E37_79B1;

/// 32 words of splitmix64 from a fixed seed: keys 0..23 for the stripes (stripe `s`,
/// lane `i` takes word `s + i`), 24..31 for the scramble and the final fold.
const SECRET: [u64; 32] = {
    let mut out = [0u64; 32];
    let mut state: u64 = 0x7061_6765_6c61_6232; // "pagelab2"
    let mut i = 0;
    while i < 32 {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out[i] = z ^ (z >> 31);
        i += 1;
    }
    out
};

/// The accumulators' start.
const INIT: [u64; 8] = [
    P1,
    P2,
    P1 ^ P2,
    P1.wrapping_add(P2),
    P32,
    P1.rotate_left(17),
    P2.rotate_left(29),
    !P1,
];

/// Bytes in a segment of the stream ([`Checksum::SEGMENT`]).
const SEGMENT: usize = 2 << 20;

/// pagelab's 64-bit checksum of a byte stream (the module's `pl2:` definition). Not
/// cryptographic: it tells two trace files apart at the speed of the loads, so that
/// checksumming a trace costs a small fraction of studying it.
///
/// Fed in any pieces, it gives the same value; the digests of the segments, taken apart
/// ([`Checksum::segment_digest`]) and combined in order ([`Checksum::from_segments`]),
/// give it too.
#[derive(Clone, Debug)]
pub struct Checksum {
    /// The segment being fed.
    seg: Lanes,
    /// Bytes per segment: [`Checksum::SEGMENT`], smaller in tests.
    segment: usize,
    /// The closed segments' digests, chained.
    chain: u64,
    /// Segments closed.
    closed: u64,
    len: u64,
}

/// One segment's lanes.
#[derive(Clone, Debug)]
struct Lanes {
    acc: [u64; 8],
    /// Stripes of the current block already added.
    stripe: usize,
    /// Bytes fed to this segment.
    len: usize,
    tail: [u8; STRIPE],
    tail_len: usize,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            acc: INIT,
            stripe: 0,
            len: 0,
            tail: [0; STRIPE],
            tail_len: 0,
        }
    }
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum::with_segment(SEGMENT)
    }
}

/// The chain's start.
const CHAIN: u64 = 0x7061_6765_6c61_6273; // "pagelabs"

impl Checksum {
    /// Bytes in a segment of the stream, hashed on its own (see the module's definition):
    /// the Lackey reader's pieces (`pagelab_trace::Pieces`) are this size, so each piece
    /// hashes its own segment, on its own thread, while its bytes are in the caches.
    pub const SEGMENT: usize = SEGMENT;

    /// A checksum over segments of `bytes` (at least 1) instead of [`Checksum::SEGMENT`]: another
    /// function of the bytes, which tests use to cross many segment boundaries.
    pub fn with_segment(bytes: usize) -> Checksum {
        Checksum {
            seg: Lanes::default(),
            segment: bytes.max(1),
            chain: CHAIN,
            closed: 0,
            len: 0,
        }
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        while !bytes.is_empty() {
            // A full segment is closed when the next byte comes (or at the end), so that
            // `segment_digest` sees a segment fed exactly to its end.
            if self.seg.len == self.segment {
                self.close();
            }
            let take = (self.segment - self.seg.len).min(bytes.len());
            self.seg.update(&bytes[..take]);
            bytes = &bytes[take..];
        }
    }

    /// Folds the segment being fed into the chain and starts the next.
    fn close(&mut self) {
        let d = std::mem::take(&mut self.seg).digest();
        self.chain = chain(self.chain, d);
        self.closed += 1;
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no byte was fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digest of the one segment fed (at most `segment` bytes), for
    /// [`Checksum::from_segments`]; `None` if more than one segment was fed.
    pub fn segment_digest(self) -> Option<u64> {
        (self.closed == 0).then(|| self.seg.digest())
    }

    /// The checksum of a stream of `len` bytes from its segments' digests, in order:
    /// what [`Checksum::finish`] gives for the whole stream.
    pub fn from_segments(digests: impl IntoIterator<Item = u64>, len: u64) -> String {
        seal(digests.into_iter().fold(CHAIN, chain), len)
    }

    /// The checksum as `pl2:` and 16 hex digits: each segment's digest (see
    /// the module's definition) chained in order, `h = rotl((h ^ d) * P1, 27) * P2` from
    /// `CHAIN`; then `h ^= len * P2` and `avalanche(h)`.
    pub fn finish(mut self) -> String {
        if self.seg.len > 0 {
            self.close();
        }
        seal(self.chain, self.len)
    }
}

impl Lanes {
    /// Feeds `bytes`, all within the segment.
    fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len();
        if self.tail_len > 0 {
            let take = (STRIPE - self.tail_len).min(bytes.len());
            self.tail[self.tail_len..self.tail_len + take].copy_from_slice(&bytes[..take]);
            self.tail_len += take;
            bytes = &bytes[take..];
            if self.tail_len < STRIPE {
                return;
            }
            let tail = self.tail;
            self.stripes(&tail);
            self.tail_len = 0;
        }
        let whole = bytes.len() / STRIPE * STRIPE;
        self.stripes(&bytes[..whole]);
        let rest = &bytes[whole..];
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
    }

    /// Adds whole stripes (`data.len()` a multiple of [`STRIPE`]) with the active tier's
    /// kernel.
    fn stripes(&mut self, data: &[u8]) {
        debug_assert_eq!(data.len() % STRIPE, 0);
        if data.is_empty() {
            return;
        }
        let tier = isa::active();
        #[cfg(target_arch = "x86_64")]
        {
            if tier >= Isa::Avx512 {
                // SAFETY: the active tier is `avx512` only where the CPU has AVX-512F
                // (`isa::selected` refuses a tier the CPU lacks).
                return unsafe { kernels::avx512(&mut self.acc, &mut self.stripe, data) };
            }
            // The `avx2` tier too: twice as wide a kernel would still outrun the loads.
            kernels::sse2(&mut self.acc, &mut self.stripe, data)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = tier;
            words(&mut self.acc, &mut self.stripe, data)
        }
    }

    /// The segment's digest: the last stripe, zero padded, added as any other; then
    /// `h = len * P2`, and for each lane `h = rotl(h ^ (acc[i] ^ SECRET[24 + i]) * P1,
    /// 27) * P2`; then `avalanche(h)`.
    fn digest(mut self) -> u64 {
        if self.tail_len > 0 {
            let mut last = [0u8; STRIPE];
            last[..self.tail_len].copy_from_slice(&self.tail[..self.tail_len]);
            words(&mut self.acc, &mut self.stripe, &last);
        }
        fold(self.len as u64, &self.acc)
    }
}

/// [`Lanes::digest`]'s fold of a segment's length and accumulators.
fn fold(len: u64, acc: &[u64; 8]) -> u64 {
    let mut h = len.wrapping_mul(P2);
    for (i, lane) in acc.iter().enumerate() {
        h = (h ^ (lane ^ SECRET[24 + i]).wrapping_mul(P1))
            .rotate_left(27)
            .wrapping_mul(P2);
    }
    avalanche(h)
}

/// One link of the segments' chain.
fn chain(h: u64, digest: u64) -> u64 {
    (h ^ digest)
        .wrapping_mul(P1)
        .rotate_left(27)
        .wrapping_mul(P2)
}

/// The checksum of a stream of `len` bytes whose digests chained to `h`, as written.
fn seal(h: u64, len: u64) -> String {
    format!("pl2:{:016x}", avalanche(h ^ len.wrapping_mul(P2)))
}

/// The last mix: `h ^= h >> 33; h *= P1; h ^= h >> 29`.
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(P1);
    h ^ (h >> 29)
}

/// The scramble of lane `i` after a block.
#[inline(always)]
fn scramble(a: u64, i: usize) -> u64 {
    ((a ^ (a >> 47)) ^ SECRET[24 + i]).wrapping_mul(P32)
}

/// The portable kernel: one word at a time (every tier's results are this one's).
fn words(acc: &mut [u64; 8], stripe: &mut usize, data: &[u8]) {
    for s in data.chunks_exact(STRIPE) {
        for i in 0..8 {
            let w = u64::from_le_bytes(s[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            let k = w ^ SECRET[*stripe + i];
            acc[i] = acc[i].wrapping_add((k & 0xffff_ffff).wrapping_mul(k >> 32));
            acc[i ^ 1] = acc[i ^ 1].wrapping_add(w);
        }
        *stripe += 1;
        if *stripe == BLOCK_STRIPES {
            for (i, a) in acc.iter_mut().enumerate() {
                *a = scramble(*a, i);
            }
            *stripe = 0;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod kernels;

#[cfg(test)]
mod tests;
