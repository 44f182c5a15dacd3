//! pagelab's checksum of a trace's bytes, for a result's provenance.

/// pagelab's 64-bit checksum of a byte stream: four independent multiply-rotate lanes over
/// 8-byte little-endian words, folded with the length. Not cryptographic: it tells two trace
/// files apart, at memory speed (about 8 GB/s), so that checksumming a trace costs a small
/// fraction of studying it.
#[derive(Clone, Debug)]
pub struct Checksum {
    lanes: [u64; 4],
    len: u64,
    tail: Vec<u8>,
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;

impl Default for Checksum {
    fn default() -> Self {
        Checksum {
            lanes: [P1, P2, P1 ^ P2, P1.wrapping_add(P2)],
            len: 0,
            tail: Vec::with_capacity(32),
        }
    }
}

impl Checksum {
    /// Feeds `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if !self.tail.is_empty() {
            let take = (32 - self.tail.len()).min(bytes.len());
            self.tail.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.tail.len() < 32 {
                return;
            }
            let block: [u8; 32] = self.tail[..].try_into().expect("32 bytes");
            self.block(&block);
            self.tail.clear();
        }
        let mut chunks = bytes.chunks_exact(32);
        for c in &mut chunks {
            self.block(c.try_into().expect("32 bytes"));
        }
        self.tail.extend_from_slice(chunks.remainder());
    }

    fn block(&mut self, b: &[u8; 32]) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            *lane = (*lane ^ w)
                .wrapping_mul(P1)
                .rotate_left(31)
                .wrapping_mul(P2);
        }
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no byte was fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The checksum as `pl64:` and 16 hex digits.
    pub fn finish(mut self) -> String {
        let mut last = [0u8; 32];
        last[..self.tail.len()].copy_from_slice(&self.tail);
        let tail_len = self.tail.len();
        if tail_len > 0 {
            self.block(&last);
        }
        let mut h = self.len.wrapping_mul(P2);
        for lane in self.lanes {
            h = (h ^ lane).wrapping_mul(P1).rotate_left(27);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(P2);
        h ^= h >> 29;
        format!("pl64:{h:016x}")
    }
}
