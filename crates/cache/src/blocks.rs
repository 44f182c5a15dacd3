//! The host's translations of 2M blocks of guest-physical memory, as a guest's walks see
//! them under nested paging (`[nested] block_miss`, `block_entries`, `block_interval`).
//!
//! On this project's AMD Zen 4 guest a 4K page's walk cost more the more 2M blocks of
//! guest-physical memory the data's frames fell in, and not at all with their order within
//! a block (`docs/cost.md`, sessions 38 to 40): something caches the host's translation of
//! a guest-physical block, and a walk whose guest-physical address falls in a block it does
//! not hold waits longer, by more than the host's page-table reads that the model already
//! makes through its caches. Session 40 found where: the guest's own L2 D-TLB. A stride
//! over 11M of 4K pages (22 a set of its 24 ways) took 1.4 ns an access with its frames in
//! 64 blocks and 3.0 ns with them in 2054, though its pages fit the TLB and, once warm,
//! should not walk at all; over 10M (20 a set) the blocks added 0.2 ns. Each walk's block
//! takes an entry in the sets the guest's pages use, and pushes them out. So by default
//! (`block_entries = 0`) the model holds the blocks in the run's TLB beside the guest's
//! entries ([`HostBlocks::in_tlb`]; the engine looks each walk's blocks up there,
//! `pagelab_tlb::TlbHierarchy::host_block`), and a walk waits `block_miss` cycles for each
//! it does not find. `block_entries` holds them apart instead, in an LRU set of that many,
//! as session 39 modelled them; `block_interval` has each miss take the translations for
//! that many cycles, one miss at a time, in a loop of independent loads
//! ([`crate::overlap`]). `pagelab machines --measure` measures both with pooled
//! kernels (`pagelab_machine::blocks`).

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
    /// The blocks held apart; `None`: in the guest's TLB, which the caller asks
    /// ([`HostBlocks::asked`]).
    held: Option<LruSet>,
    /// Cycles a walk waits for a block not held (`block_miss`).
    pub miss: u32,
    /// The blocks the last walk asked for, where the TLB holds them.
    asked: Vec<u64>,
}

impl HostBlocks {
    /// `entries` blocks held, `miss` cycles for one not held.
    pub fn new(entries: u32, miss: u32) -> HostBlocks {
        HostBlocks {
            held: Some(LruSet::new(entries)),
            miss,
            asked: Vec::new(),
        }
    }

    /// Blocks held in the guest's TLB beside its own entries, `miss` cycles for one not
    /// held: each walk's blocks are left for the caller to look up ([`HostBlocks::asked`]).
    pub fn in_tlb(miss: u32) -> HostBlocks {
        HostBlocks {
            held: None,
            miss,
            asked: Vec::new(),
        }
    }

    /// Whether the block holding guest-physical `gpa` was held (it is now); where the TLB
    /// holds them, `true`, and the block is left in [`HostBlocks::asked`].
    #[inline]
    pub fn access(&mut self, gpa: u64) -> bool {
        match &mut self.held {
            Some(set) => set.access(gpa >> BLOCK_SHIFT),
            None => {
                self.asked.push(gpa >> BLOCK_SHIFT);
                true
            }
        }
    }

    /// The blocks walks asked for since the last call, where the TLB holds them, emptied.
    pub fn asked(&mut self) -> std::vec::Drain<'_, u64> {
        self.asked.drain(..)
    }
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
    fn blocks_in_the_tlb_are_left_for_the_caller() {
        let mut b = HostBlocks::in_tlb(40);
        assert!(b.access(0x20_0000) && b.access(0x3f_ffff) && b.access(0));
        assert_eq!(b.asked().collect::<Vec<_>>(), [1, 1, 0]);
        assert_eq!(b.asked().count(), 0);
    }
}
