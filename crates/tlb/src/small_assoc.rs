//! Fully associative LRU array for small sizes (up to [`SmallFullyAssoc::MAX_ENTRIES`]).
//!
//! Keys sit in a flat array, each with a one-byte fingerprint and a one-byte
//! recency rank (0 = most recent). A lookup compares the fingerprint with every
//! fingerprint at once (vector byte compares and a bitmask) and checks the full
//! key of each candidate. Touching an entry of rank `r` adds one to every rank
//! below `r` and sets its own to 0, again a few vector operations; a miss in a
//! full array replaces the entry of rank `entries - 1`, found like a key. Ranks
//! of the valid entries are always a permutation of `0..len`, so this is exact
//! LRU with no clock to overflow. At TLB sizes it beats a hash table and a
//! linked list: no pointer chasing and no dependent loads, only 64-byte sweeps.

use crate::array::{key, unkey, Key, Tlb, EMPTY};
use pagelab_core::PageSize;

/// Entries per block: fingerprints and ranks are swept a block at a time.
const BLOCK: usize = 64;
/// Capacity of the fixed storage: two blocks.
const CAP: usize = 2 * BLOCK;
/// The rank of empty slots and padding: at least every valid rank, so a touch never moves it.
const NO_RANK: u8 = (CAP - 1) as u8;

#[inline]
fn fingerprint(k: Key) -> u8 {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// Bit `i` set when `block[i] == x`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn match_mask(block: &[u8; BLOCK], x: u8) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut m = 0u64;
    for (j, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of the x86-64 baseline, so the intrinsics are
        // always available; `chunk` is 16 readable bytes and `loadu` has no
        // alignment requirement.
        let bits = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(x as i8)))
        };
        m |= u64::from(bits as u16) << (16 * j);
    }
    m
}

/// Bit `i` set when `block[i] == x` (portable version).
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn match_mask(block: &[u8; BLOCK], x: u8) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0, |m, (i, &b)| m | u64::from(b == x) << i)
}

/// A fully associative TLB array of at most 128 entries with exact LRU replacement.
///
/// Same contract and results as [`crate::FullyAssoc`]; [`crate::TlbArray::new`]
/// picks it for fully associative arrays of up to [`SmallFullyAssoc::MAX_ENTRIES`].
#[derive(Clone, Debug)]
pub struct SmallFullyAssoc {
    /// Fingerprints of `keys`; padding and empty slots hold the fingerprint of [`EMPTY`].
    fps: [u8; CAP],
    /// Recency ranks: a permutation of `0..len` over the valid slots, [`NO_RANK`] elsewhere.
    ranks: [u8; CAP],
    /// Slots `0..len` are valid; the rest are [`EMPTY`].
    keys: [Key; CAP],
    entries: usize,
    /// Blocks worth sweeping: `entries` rounded up to a block.
    blocks: usize,
    len: usize,
}

impl SmallFullyAssoc {
    /// The largest array this type holds.
    pub const MAX_ENTRIES: usize = CAP;

    /// An empty array of `entries` entries. Panics unless `1 <= entries <= 128`.
    pub fn new(entries: usize) -> SmallFullyAssoc {
        assert!(
            (1..=CAP).contains(&entries),
            "small fully associative TLB needs 1..={CAP} entries, got {entries}"
        );
        SmallFullyAssoc {
            fps: [fingerprint(EMPTY); CAP],
            ranks: [NO_RANK; CAP],
            keys: [EMPTY; CAP],
            entries,
            blocks: entries.div_ceil(BLOCK),
            len: 0,
        }
    }

    /// The slot holding `k`, if any.
    #[inline]
    fn find(&self, k: Key) -> Option<usize> {
        let f = fingerprint(k);
        for b in 0..self.blocks {
            let block: &[u8; BLOCK] = self.fps[b * BLOCK..][..BLOCK].try_into().unwrap();
            let mut m = match_mask(block, f);
            while m != 0 {
                let i = b * BLOCK + m.trailing_zeros() as usize;
                if self.keys[i] == k {
                    return Some(i);
                }
                m &= m - 1;
            }
        }
        None
    }

    /// The slot whose rank is `r` (which some valid slot has).
    #[inline]
    fn slot_of_rank(&self, r: u8) -> usize {
        for b in 0..self.blocks {
            let block: &[u8; BLOCK] = self.ranks[b * BLOCK..][..BLOCK].try_into().unwrap();
            let m = match_mask(block, r);
            if m != 0 {
                return b * BLOCK + m.trailing_zeros() as usize;
            }
        }
        unreachable!("rank {r} not held by any of {} entries", self.len)
    }

    /// Makes `slot`, whose rank was `r`, the most recent: every rank below `r` moves down one.
    #[inline]
    fn promote(&mut self, slot: usize, r: u8) {
        if r == 0 {
            return;
        }
        for b in 0..self.blocks {
            let block: &mut [u8; BLOCK] =
                (&mut self.ranks[b * BLOCK..][..BLOCK]).try_into().unwrap();
            for x in block.iter_mut() {
                *x += u8::from(*x < r);
            }
        }
        self.ranks[slot] = 0;
    }

    /// Inserts a key known to be absent as the most recent; returns the evicted key, if any.
    #[inline]
    fn insert_absent(&mut self, k: Key) -> Option<Key> {
        let (slot, old) = if self.len < self.entries {
            // A new slot ranks as if it were `len`, below every valid one.
            self.len += 1;
            (self.len - 1, None)
        } else {
            let slot = self.slot_of_rank((self.len - 1) as u8);
            (slot, Some(self.keys[slot]))
        };
        self.keys[slot] = k;
        self.fps[slot] = fingerprint(k);
        self.ranks[slot] = (self.len - 1) as u8;
        self.promote(slot, (self.len - 1) as u8);
        old
    }

    #[inline]
    pub(crate) fn access_key(&mut self, k: Key) -> bool {
        match self.find(k) {
            Some(i) => {
                self.promote(i, self.ranks[i]);
                true
            }
            None => {
                self.insert_absent(k);
                false
            }
        }
    }

    /// Empties slot `i`: ranks above its rank move up one, and the last valid
    /// slot moves into `i` to keep `0..len` dense.
    fn remove_slot(&mut self, i: usize) {
        let r = self.ranks[i];
        for x in &mut self.ranks[..self.len] {
            *x -= u8::from(*x > r);
        }
        let last = self.len - 1;
        self.keys[i] = self.keys[last];
        self.fps[i] = self.fps[last];
        self.ranks[i] = self.ranks[last];
        self.keys[last] = EMPTY;
        self.fps[last] = fingerprint(EMPTY);
        self.ranks[last] = NO_RANK;
        self.len -= 1;
    }

    /// Cached pages from most to least recent.
    pub fn lru_order(&self) -> Vec<(u64, PageSize)> {
        let mut slots: Vec<usize> = (0..self.len).collect();
        slots.sort_unstable_by_key(|&i| self.ranks[i]);
        slots.into_iter().map(|i| unkey(self.keys[i])).collect()
    }
}

impl Tlb for SmallFullyAssoc {
    #[inline]
    fn lookup(&mut self, vpn: u64, size: PageSize) -> bool {
        let k = key(vpn, size);
        match self.find(k) {
            Some(i) => {
                self.promote(i, self.ranks[i]);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, vpn: u64, size: PageSize) -> Option<(u64, PageSize)> {
        if self.lookup(vpn, size) {
            return None;
        }
        self.insert_absent(key(vpn, size)).map(unkey)
    }

    #[inline]
    fn access(&mut self, vpn: u64, size: PageSize) -> bool {
        self.access_key(key(vpn, size))
    }

    fn contains(&self, vpn: u64, size: PageSize) -> bool {
        self.find(key(vpn, size)).is_some()
    }

    fn invalidate(&mut self, vpn: u64, size: PageSize) -> bool {
        match self.find(key(vpn, size)) {
            Some(i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    fn invalidate_where(&mut self, mut remove: impl FnMut(u64, PageSize) -> bool) -> usize {
        let mut removed = 0;
        let mut i = 0;
        while i < self.len {
            let (v, s) = unkey(self.keys[i]);
            if remove(v, s) {
                // The last slot moves into `i`: look at `i` again.
                self.remove_slot(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
        removed
    }

    fn flush(&mut self) {
        self.fps = [fingerprint(EMPTY); CAP];
        self.keys = [EMPTY; CAP];
        self.ranks = [NO_RANK; CAP];
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.entries
    }

    fn resident(&self) -> Vec<(u64, PageSize)> {
        let mut v: Vec<_> = self.keys[..self.len].iter().map(|&k| unkey(k)).collect();
        v.sort_by_key(|&(vpn, s)| (s, vpn));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::RefTlb;
    use proptest::prelude::*;

    #[test]
    fn match_mask_finds_every_position() {
        let mut block = [0u8; BLOCK];
        for i in 0..BLOCK {
            block[i] = 7;
            assert_eq!(match_mask(&block, 7), 1 << i);
            block[i] = 0;
        }
        assert_eq!(match_mask(&block, 0), u64::MAX);
    }

    #[test]
    fn lru_order_follows_accesses() {
        let k = PageSize::K4;
        let mut t = SmallFullyAssoc::new(3);
        for v in [1, 2, 3, 1, 4] {
            t.access(v, k);
        }
        assert_eq!(t.lru_order(), vec![(4, k), (1, k), (3, k)]);
        assert!(t.invalidate(1, k));
        assert_eq!(t.lru_order(), vec![(4, k), (3, k)]);
        assert!(!t.access(5, k));
        assert!(!t.access(6, k));
        assert_eq!(t.lru_order(), vec![(6, k), (5, k), (4, k)]);
    }

    #[test]
    fn full_128_entry_array_cycles_exactly() {
        let k = PageSize::K4;
        let mut t = SmallFullyAssoc::new(128);
        for round in 0..3 {
            for v in 0..129u64 {
                assert!(!t.access(v * 7919, k), "round {round} page {v}");
            }
        }
        let mut t = SmallFullyAssoc::new(128);
        (0..128u64).for_each(|v| assert!(!t.access(v, k)));
        assert!((0..128u64).all(|v| t.access(v, k)));
        assert_eq!(t.lru_order()[0], (127, k));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Access(u64, u8),
        Insert(u64, u8),
        Lookup(u64, u8),
        Invalidate(u64, u8),
        InvalidateOdd,
        Flush,
    }

    fn size(i: u8) -> PageSize {
        [
            PageSize::K4,
            PageSize::from_shift(14).unwrap(),
            PageSize::M2,
        ][i as usize % 3]
    }

    fn ops(pages: u64) -> impl Strategy<Value = Vec<Op>> {
        let page = (0..pages, 0u8..3);
        let op = prop_oneof![
            40 => page.clone().prop_map(|(v, s)| Op::Access(v, s)),
            4 => page.clone().prop_map(|(v, s)| Op::Insert(v, s)),
            4 => page.clone().prop_map(|(v, s)| Op::Lookup(v, s)),
            2 => page.prop_map(|(v, s)| Op::Invalidate(v, s)),
            1 => Just(Op::InvalidateOdd),
            1 => Just(Op::Flush),
        ];
        proptest::collection::vec(op, 1..800)
    }

    /// The reference array's `insert`: a touch when present, else an insert reporting the victim.
    fn ref_insert(r: &mut RefTlb, v: u64, s: PageSize) -> Option<(u64, PageSize)> {
        if r.contains(v, s) {
            r.access(v, s);
            return None;
        }
        let before = r.resident();
        r.access(v, s);
        let after = r.resident();
        before.into_iter().find(|e| !after.contains(e))
    }

    fn check(entries: usize, pages: &[Op]) -> Result<(), TestCaseError> {
        let mut t = SmallFullyAssoc::new(entries);
        let mut r = RefTlb::new(entries, None);
        for (i, op) in pages.iter().enumerate() {
            match *op {
                Op::Access(v, s) => {
                    prop_assert_eq!(t.access(v, size(s)), r.access(v, size(s)), "step {}", i)
                }
                Op::Insert(v, s) => prop_assert_eq!(
                    t.insert(v, size(s)),
                    ref_insert(&mut r, v, size(s)),
                    "step {}",
                    i
                ),
                Op::Lookup(v, s) => {
                    let hit = r.contains(v, size(s));
                    if hit {
                        r.access(v, size(s));
                    }
                    prop_assert_eq!(t.lookup(v, size(s)), hit, "step {}", i);
                }
                Op::Invalidate(v, s) => prop_assert_eq!(
                    t.invalidate(v, size(s)),
                    r.invalidate(v, size(s)),
                    "step {}",
                    i
                ),
                Op::InvalidateOdd => {
                    let odd: Vec<_> = r.resident().into_iter().filter(|e| e.0 % 2 == 1).collect();
                    odd.iter().for_each(|&(v, s)| {
                        r.invalidate(v, s);
                    });
                    prop_assert_eq!(t.invalidate_where(|v, _| v % 2 == 1), odd.len());
                }
                Op::Flush => {
                    t.flush();
                    r.flush();
                }
            }
            prop_assert_eq!(t.len(), r.resident().len());
            let mut ranks = t.ranks[..t.len].to_vec();
            ranks.sort_unstable();
            prop_assert!(
                ranks.iter().enumerate().all(|(i, &x)| x as usize == i),
                "ranks {:?}",
                ranks
            );
        }
        prop_assert_eq!(t.lru_order(), r.set_order(0));
        prop_assert_eq!(t.resident(), r.resident());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn matches_reference(entries in 1usize..=CAP, ops in ops(200)) {
            check(entries, &ops)?;
        }

        #[test]
        fn matches_reference_small_and_crowded(entries in 1usize..20, ops in ops(30)) {
            check(entries, &ops)?;
        }
    }
}
