//! A keyed bijection on `[0, n)` for any `n`, computed in constant memory.
//!
//! `chase` must visit a random cycle through millions (or billions) of nodes
//! without storing the permutation. [`Permutation`] scrambles the smallest
//! power-of-two domain `[0, 2^b)` holding `n` with a few keyed rounds that are
//! each a bijection on `b`-bit integers (xor with a key, multiply by an odd
//! number mod `2^b`, xor with a right shift of itself), and cycle-walks
//! (re-applies the scramble) until the result falls below `n`. Because the
//! domain is less than `2n`, a walk takes fewer than two rounds on average.

use crate::code::splitmix64;

/// Rounds of the scramble; three mix every input bit into every output bit.
const ROUNDS: usize = 3;

/// A pseudo-random bijection on `[0, n)`, chosen by a seed.
///
/// ```
/// use pagelab_workloads::Permutation;
/// let p = Permutation::new(10, 42);
/// let mut seen: Vec<u64> = (0..10).map(|i| p.apply(i)).collect();
/// seen.sort();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// ```
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    mask: u64,
    shift: u32,
    keys: [u64; ROUNDS],
    mults: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `[0, n)` chosen by `seed`. `n` must be at least 1.
    pub fn new(n: u64, seed: u64) -> Permutation {
        let n = n.max(1);
        let bits = 64 - (n - 1).leading_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut state = splitmix64(seed ^ 0x6368_6173_6521);
        let mut next = || {
            state = splitmix64(state);
            state
        };
        let keys = [(); ROUNDS].map(|_| next() & mask);
        let mults = [(); ROUNDS].map(|_| next() | 1);
        Permutation {
            n,
            mask,
            shift: (bits.div_ceil(2)).max(1),
            keys,
            mults,
        }
    }

    /// The size of the domain.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false: the domain holds at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    #[inline(always)]
    fn scramble(&self, mut x: u64) -> u64 {
        for r in 0..ROUNDS {
            x ^= self.keys[r];
            x = x.wrapping_mul(self.mults[r]) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }

    /// The image of `i`, for `i < len()` (larger `i` are reduced modulo `len()`).
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        let i = if i < self.n { i } else { i % self.n };
        let mut x = self.scramble(i);
        while x >= self.n {
            x = self.scramble(x);
        }
        x
    }
}
