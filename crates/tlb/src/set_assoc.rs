//! Set-associative array, LRU within each set.
//!
//! Each set is a small array of keys kept in recency order (most recent first,
//! empty ways at the end). A hit at way `p` shifts ways `0..p` down by one; a
//! miss shifts the whole set, dropping the last (least recent) way. With the
//! 2..24 ways of real TLBs this is one short pass that compares and shifts at once.
//! With [`Replacement::Random`] a miss in a full set replaces the entry at a position a
//! fixed pseudo-random sequence picks ([`victim`]) instead of the last.

use crate::array::{key, move_to_front, unkey, Key, Tlb, EMPTY};
use crate::config::{Replacement, SetIndex};
use pagelab_core::{PageSize, Vpn};

/// A set-associative TLB array: `entries / ways` sets of `ways` entries.
#[derive(Clone, Debug)]
pub struct SetAssoc {
    keys: Vec<Key>,
    ways: usize,
    set_mask: u64,
    /// log2 of the number of sets (`set_mask`'s ones, counted once: the baseline x86-64
    /// target has no `popcnt`, and a count in the lookup cost about 20 instructions).
    set_bits: u32,
    /// Bits of the page number above the set's, folded into it by XOR ([`SetIndex::Xor`]);
    /// 0 for a linear index.
    xor_mask: u64,
    len: usize,
    /// The state of the victims' sequence under [`Replacement::Random`]; 0 under LRU.
    rng: u64,
}

/// The first state of an array's sequence of victims under [`Replacement::Random`].
pub(crate) const VICTIM_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The next victim of a sequence at `state` (xorshift64, never 0 from a state that is
/// not) among `ways`: its position in the set's recency order, uniform over the ways.
#[inline]
pub(crate) fn victim(state: &mut u64, ways: usize) -> usize {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    (((x >> 32) * ways as u64) >> 32) as usize
}

impl SetAssoc {
    /// An empty array. Panics unless `ways >= 1`, `entries` is a multiple of `ways`
    /// and `entries / ways` is a power of two; configurations are validated first.
    pub fn new(entries: usize, ways: usize) -> SetAssoc {
        assert!(
            ways >= 1 && entries >= ways && entries / ways * ways == entries,
            "entries {entries} must be a positive multiple of ways {ways}"
        );
        let sets = entries / ways;
        assert!(
            sets.is_power_of_two(),
            "number of sets {sets} must be a power of two"
        );
        SetAssoc {
            keys: vec![EMPTY; entries],
            ways,
            set_mask: sets as u64 - 1,
            set_bits: sets.trailing_zeros(),
            xor_mask: 0,
            len: 0,
            rng: 0,
        }
    }

    /// The same array replacing as `replacement` says (empty: call before any access).
    pub fn with_replacement(mut self, replacement: Replacement) -> SetAssoc {
        self.rng = match replacement {
            Replacement::Lru => 0,
            Replacement::Random => VICTIM_SEED,
        };
        self
    }

    /// The same array with its sets picked by `index` (empty: call before any access).
    pub fn with_index(mut self, index: SetIndex) -> SetAssoc {
        self.xor_mask = match index {
            SetIndex::Linear => 0,
            SetIndex::Xor => self.set_mask,
        };
        self
    }

    /// Number of sets.
    pub fn sets(&self) -> usize {
        self.set_mask as usize + 1
    }

    /// Ways per set.
    pub fn ways(&self) -> usize {
        self.ways
    }

    #[inline]
    fn set_of(&self, k: Key) -> usize {
        // The set index uses the page number, not the packed size bits; a linear index
        // folds in nothing (xor_mask 0), an XOR index the bits above the set's.
        let vpn = k >> 5;
        let fold = (vpn >> self.set_bits) & self.xor_mask;
        ((vpn ^ fold) & self.set_mask) as usize * self.ways
    }

    #[inline]
    fn set_mut(&mut self, k: Key) -> &mut [Key] {
        let base = self.set_of(k);
        &mut self.keys[base..base + self.ways]
    }

    /// Puts `k` first in `set`, shifting ways `0..from` down by one and so
    /// overwriting way `from` (the hit entry, or the least recent on a miss).
    #[inline]
    fn promote(set: &mut [Key], from: usize, k: Key) {
        set.copy_within(0..from, 1);
        set[0] = k;
    }

    #[inline(always)]
    pub(crate) fn access_key(&mut self, k: Key) -> bool {
        match move_to_front(self.set_mut(k), k) {
            None => true,
            Some(dropped) => {
                if dropped == EMPTY {
                    self.len += 1;
                } else if self.rng != 0 {
                    self.keep_random(k, dropped);
                }
                false
            }
        }
    }

    /// After a miss in a full set moved every entry down one and dropped the last
    /// (`dropped`), replaces the [`victim`] instead: the entry that was at position `r`
    /// (now at `r + 1`) goes, those after it move back up, and `dropped` comes back last.
    #[inline(never)]
    fn keep_random(&mut self, k: Key, dropped: Key) {
        let r = victim(&mut self.rng, self.ways);
        let set = self.set_mut(k);
        let last = set.len() - 1;
        if r < last {
            set.copy_within(r + 2.., r + 1);
            set[last] = dropped;
        }
    }

    /// Cached pages of the set page `vpn` maps to, most recent first.
    pub fn set_order(&self, vpn: Vpn) -> Vec<(Vpn, PageSize)> {
        let base = self.set_of(key(vpn, PageSize::K4));
        self.keys[base..base + self.ways]
            .iter()
            .take_while(|&&k| k != EMPTY)
            .map(|&k| unkey(k))
            .collect()
    }
}

impl Tlb for SetAssoc {
    #[inline]
    fn lookup(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let k = key(vpn, size);
        let set = self.set_mut(k);
        match set.iter().position(|&e| e == k) {
            Some(p) => {
                Self::promote(set, p, k);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, vpn: Vpn, size: PageSize) -> Option<(Vpn, PageSize)> {
        if self.lookup(vpn, size) {
            return None;
        }
        let k = key(vpn, size);
        let ways = self.ways;
        let full = self.set_mut(k)[ways - 1] != EMPTY;
        let at = if full && self.rng != 0 {
            victim(&mut self.rng, ways)
        } else {
            ways - 1
        };
        let set = self.set_mut(k);
        let gone = set[at];
        Self::promote(set, at, k);
        if gone == EMPTY {
            self.len += 1;
            None
        } else {
            Some(unkey(gone))
        }
    }

    #[inline]
    fn access(&mut self, vpn: Vpn, size: PageSize) -> bool {
        self.access_key(key(vpn, size))
    }

    fn contains(&self, vpn: Vpn, size: PageSize) -> bool {
        let k = key(vpn, size);
        let base = self.set_of(k);
        self.keys[base..base + self.ways].contains(&k)
    }

    fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let k = key(vpn, size);
        let set = self.set_mut(k);
        match set.iter().position(|&e| e == k) {
            Some(p) => {
                set.copy_within(p + 1.., p);
                let last = set.len() - 1;
                set[last] = EMPTY;
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    fn invalidate_where(&mut self, mut remove: impl FnMut(Vpn, PageSize) -> bool) -> usize {
        let mut removed = 0;
        for set in self.keys.chunks_mut(self.ways) {
            // Compact the survivors in order, so recency order is kept.
            let end = set.iter().position(|&k| k == EMPTY).unwrap_or(set.len());
            let mut w = 0;
            for r in 0..end {
                let (v, s) = unkey(set[r]);
                if remove(v, s) {
                    removed += 1;
                } else {
                    set[w] = set[r];
                    w += 1;
                }
            }
            set[w..end].fill(EMPTY);
        }
        self.len -= removed;
        removed
    }

    fn flush(&mut self) {
        self.keys.fill(EMPTY);
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.keys.len()
    }

    fn resident(&self) -> Vec<(Vpn, PageSize)> {
        let mut v: Vec<_> = self
            .keys
            .iter()
            .filter(|&&k| k != EMPTY)
            .map(|&k| unkey(k))
            .collect();
        v.sort_by_key(|&(vpn, s)| (s, vpn));
        v
    }
}
