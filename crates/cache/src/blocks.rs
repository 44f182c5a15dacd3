//! The host's translations of 2M blocks of guest-physical memory, as a guest's walks see
//! them under nested paging (`[nested] block_entries`, `block_miss`, `block_interval`).
//!
//! On this project's AMD Zen 4 guest a 4K page's walk cost more the more 2M blocks of
//! guest-physical memory the data's frames fell in, and not at all with their order within
//! a block (`docs/cost.md`, sessions 38 and 39): something on the way caches the host's
//! translation of a guest-physical block, a thousand or so of them, and a walk whose
//! guest-physical address falls in a block it does not hold waits longer, by more than the
//! host's page-table reads that the model already makes through its caches. What that
//! something is (a walk cache of the host's level-2 entries, the hypervisor's backing)
//! the machine does not say, so the model takes it as measured: an LRU set of
//! `block_entries` blocks, `block_miss` cycles a walk waits for each block not in it, and
//! `block_interval` cycles each such miss holds up the references after it when they do
//! not depend on one another (the misses did not overlap in a stride as walks do).
//! `pagelab machines --measure` measures all three with pooled kernels
//! ([`miss_share`] is what its fit expects of them).

use rustc_hash::FxHashMap;

/// log2 of a block: 2M, the host's large page on x86-64.
pub const BLOCK_SHIFT: u32 = 21;

/// The most blocks `block_entries` may give (4T of guest memory).
pub const MAX_BLOCK_ENTRIES: u32 = 1 << 21;

const NIL: u32 = u32::MAX;

/// A fully associative LRU set of keys, of any capacity, at O(1) a lookup: a map from key
/// to slot and a doubly linked list of slots, most recent first. The same answers as
/// [`crate::Lru`] (the tests check it against it), which scans its keys and suits a few
/// dozen entries.
#[derive(Clone, Debug)]
pub struct LruSet {
    cap: usize,
    slot: FxHashMap<u64, u32>,
    /// `(key, previous, next)` of each slot; `NIL` ends the list.
    nodes: Vec<(u64, u32, u32)>,
    head: u32,
    tail: u32,
}

impl LruSet {
    /// An empty set of at most `entries` keys (0: it holds nothing).
    pub fn new(entries: u32) -> LruSet {
        LruSet {
            cap: entries as usize,
            slot: FxHashMap::default(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Looks `key` up, making it the most recent; inserts it on a miss, dropping the least
    /// recent key when full. Returns whether it was there.
    pub fn access(&mut self, key: u64) -> bool {
        if self.cap == 0 {
            return false;
        }
        if let Some(&s) = self.slot.get(&key) {
            if s != self.head {
                self.unlink(s);
                self.push_front(s);
            }
            return true;
        }
        let s = if self.nodes.len() == self.cap {
            let s = self.tail;
            self.unlink(s);
            self.slot.remove(&self.nodes[s as usize].0);
            self.nodes[s as usize].0 = key;
            s
        } else {
            self.nodes.push((key, NIL, NIL));
            (self.nodes.len() - 1) as u32
        };
        self.slot.insert(key, s);
        self.push_front(s);
        false
    }

    fn unlink(&mut self, s: u32) {
        let (_, prev, next) = self.nodes[s as usize];
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].2 = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].1 = prev,
        }
    }

    fn push_front(&mut self, s: u32) {
        self.nodes[s as usize].1 = NIL;
        self.nodes[s as usize].2 = self.head;
        match self.head {
            NIL => self.tail = s,
            h => self.nodes[h as usize].1 = s,
        }
        self.head = s;
    }
}

/// The host's block translations of one run: which blocks it holds, and what a miss costs.
#[derive(Clone, Debug)]
pub struct HostBlocks {
    held: LruSet,
    /// Cycles a walk waits for a block not held (`block_miss`).
    pub miss: u32,
}

impl HostBlocks {
    /// `entries` blocks held, `miss` cycles for one not held.
    pub fn new(entries: u32, miss: u32) -> HostBlocks {
        HostBlocks {
            held: LruSet::new(entries),
            miss,
        }
    }

    /// Whether the block holding guest-physical `gpa` was held (it is now).
    #[inline]
    pub fn access(&mut self, gpa: u64) -> bool {
        self.held.access(gpa >> BLOCK_SHIFT)
    }
}

/// The share of a loop's walks whose block an LRU set of `entries` blocks does not hold, in
/// the steady state: `pages` pages, each on a frame in one of `blocks` blocks drawn
/// uniformly at random (seeded by `seed`, as the model's scattered frames are), visited in
/// the same order pass after pass, every visit a walk. The order does not matter: the
/// blocks along it are random either way. What [`LruSet`] gives over four passes after one
/// to warm it.
pub fn miss_share(pages: u64, blocks: u64, entries: u32, seed: u64) -> f64 {
    if pages == 0 || blocks == 0 {
        return 0.0;
    }
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let seq: Vec<u64> = (0..pages)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % blocks
        })
        .collect();
    let mut set = LruSet::new(entries);
    for &b in &seq {
        set.access(b);
    }
    const PASSES: u64 = 4;
    let mut misses = 0u64;
    for _ in 0..PASSES {
        misses += seq.iter().filter(|&&b| !set.access(b)).count() as u64;
    }
    misses as f64 / (PASSES * pages) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lru;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn an_lru_set_answers_as_the_scanning_lru(
            cap in 0u32..12,
            keys in proptest::collection::vec(0u64..20, 0..400),
        ) {
            let (mut fast, mut slow) = (LruSet::new(cap), Lru::new(cap));
            for k in keys {
                prop_assert_eq!(fast.access(k), slow.access(k));
                prop_assert!(fast.len() <= cap as usize);
            }
        }
    }

    #[test]
    fn a_set_of_n_holds_a_cycle_of_n_and_misses_a_cycle_of_n_plus_one() {
        let mut s = LruSet::new(100);
        for pass in 0..3 {
            let hits = (0..100).filter(|&k| s.access(k)).count();
            assert_eq!(hits, if pass == 0 { 0 } else { 100 });
        }
        let mut s = LruSet::new(100);
        for _ in 0..3 {
            assert_eq!((0..101).filter(|&k| s.access(k)).count(), 0);
        }
        assert_eq!(s.len(), 100);
        assert!(LruSet::new(0).is_empty());
    }

    #[test]
    fn blocks_are_2m_of_guest_physical_memory() {
        let mut b = HostBlocks::new(2, 40);
        assert!(!b.access(0x20_0000));
        assert!(b.access(0x3f_ffff)); // the same block
        assert!(!b.access(0x40_0000));
        assert!(!b.access(0));
        assert!(!b.access(0x20_0000)); // the least recent went
    }

    #[test]
    fn the_miss_share_follows_the_blocks_against_the_entries() {
        // Every block held: no misses after the first pass.
        assert_eq!(miss_share(4096, 8, 1024, 1), 0.0);
        assert_eq!(miss_share(4096, 1024, 1024, 1), 0.0);
        // Far more blocks visited in a cycle than held: nearly every walk misses.
        assert!(miss_share(4096, 1 << 20, 1024, 1) > 0.99);
        // In between it rises with the blocks.
        let s: Vec<f64> = [1536, 2048, 4096, 16384]
            .iter()
            .map(|&b| miss_share(4096, b, 1024, 1))
            .collect();
        assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
        assert!(s[0] > 0.0 && s[3] < 1.0, "{s:?}");
        assert_eq!(miss_share(0, 8, 8, 1), 0.0);
    }
}
