//! Fully associative LRU array for small sizes (up to [`SmallFullyAssoc::MAX_ENTRIES`]).
//!
//! The keys sit in one flat array in recency order, most recent first, empty
//! slots at the end. An access walks from the front, shifting each entry back
//! by one as it goes, until it meets the key (a hit: the key goes to the front)
//! or falls off the end (a miss: the least recent entry drops out). There is no
//! index to maintain, so the cost of a hit is its LRU stack distance. That
//! suits what reaches a TLB after the engine's repeat filters: almost every
//! lookup hits one of the few most recent pages, and a hash table and linked
//! list cost more in dependent loads than a short walk through one cache line.

use crate::array::{key, move_to_front, move_to_front_by_walk, unkey, Key, Tlb, EMPTY};
use pagelab_core::{PageSize, Vpn};

/// Capacity of the fixed storage.
const CAP: usize = 128;

/// Keys a vector of the AVX-512 walk behind the front holds.
const CHUNK: usize = 8;

/// A fully associative TLB array of at most 128 entries with exact LRU replacement.
///
/// Same contract and results as [`crate::FullyAssoc`]; [`crate::TlbArray::new`]
/// picks it for fully associative arrays of up to [`SmallFullyAssoc::MAX_ENTRIES`].
// `repr(C)` with the sizes first, and the keys on a cache line of their
// own: the AVX-512 walk behind a front of eight
// (`access_behind_front_avx512`) loads and stores whole lines of keys, so a
// line's store is forwarded to the next lookup's load of the same line (a
// store split across two lines, or a load spanning two stores, is not).
#[repr(C, align(64))]
#[derive(Clone, Debug)]
pub struct SmallFullyAssoc {
    entries: usize,
    len: usize,
    _pad: [u64; 6],
    /// Most recent first; slots `len..` are [`EMPTY`]. The last [`CHUNK`]
    /// are always empty: room for a whole vector after any array's last key.
    keys: [Key; CAP + CHUNK],
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
            entries,
            len: 0,
            _pad: [0; 6],
            keys: [EMPTY; CAP + CHUNK],
        }
    }

    #[inline]
    fn valid(&self) -> &[Key] {
        &self.keys[..self.len]
    }

    /// Inserts or touches `k` as the most recent; returns the entry that dropped
    /// out ([`EMPTY`] when there was room), or `None` on a hit.
    #[inline]
    fn touch(&mut self, k: Key) -> Option<Key> {
        let dropped = move_to_front(&mut self.keys[..self.entries], k)?;
        if dropped == EMPTY {
            self.len += 1;
        }
        Some(dropped)
    }

    #[inline]
    pub(crate) fn access_key(&mut self, k: Key) -> bool {
        self.touch(k).is_none()
    }

    /// The number of entries.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// The `N` most recent keys (while [`crate::Fronts`] holds them, stale).
    pub(crate) fn front_mut<const N: usize>(&mut self) -> &mut [Key; N] {
        self.keys
            .first_chunk_mut()
            .expect("the array holds more keys than the front")
    }

    /// Every entry's key, most recent first (while [`crate::WholeL1`]
    /// holds them, stale); after writing them, [`SmallFullyAssoc::recount`].
    pub(crate) fn keys_mut(&mut self) -> &mut [Key] {
        &mut self.keys[..self.entries]
    }

    /// Counts the entries again after [`SmallFullyAssoc::keys_mut`] wrote
    /// keys in recency order, the empty ones last.
    pub(crate) fn recount(&mut self) {
        self.len = self.keys[..self.entries]
            .iter()
            .position(|&k| k == EMPTY)
            .unwrap_or(self.entries);
    }

    /// The rest of an access that missed the front, which has already taken
    /// `k` and pushed out `carry`: `carry` goes to the front of the rest, and
    /// `k` leaves it if it is there (a hit); else the last entry drops out.
    /// The front is the first `N` keys; needs at least `N` entries.
    #[inline]
    pub(crate) fn access_behind_front<const N: usize>(&mut self, k: Key, carry: Key) -> bool {
        match move_to_front_by_walk(&mut self.keys[N..self.entries], k, carry) {
            None => true,
            Some(dropped) => {
                if dropped == EMPTY {
                    self.len += 1;
                }
                false
            }
        }
    }

    /// [`SmallFullyAssoc::access_behind_front`] in AVX-512 instructions:
    /// the keys behind the front eight at a time, each vector compared with
    /// `k` and shifted back one key (the previous vector's last key, or
    /// `carry`, coming in at its front) up to the key where it is found,
    /// then stored whole. The same keys in the same places as the walk, at a
    /// cost per eight keys instead of a walk of one key at a time whose end
    /// (the key's place, different every time) is a mispredicted branch.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn access_behind_front_avx512<const N: usize>(
        &mut self,
        k: Key,
        carry: Key,
    ) -> bool {
        use std::arch::x86_64::*;
        let behind = &mut self.keys[N..];
        let mut rem = self.entries - N;
        let key = _mm512_set1_epi64(k as i64);
        // The vector before the first: only its last lane is read, `carry`.
        let mut prev = _mm512_set1_epi64(carry as i64);
        let mut at = 0;
        while rem > 0 {
            let valid = if rem >= CHUNK { 0xff } else { (1u8 << rem) - 1 };
            let lanes = &mut behind[at..at + CHUNK];
            // SAFETY: `keys` has CHUNK keys after the array's last
            // (`entries <= CAP`), so the eight lanes are in bounds; the
            // CPU has AVX-512F (the caller's contract).
            let mut v = unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) };
            // The vector made opaque (no instruction): else the compiler
            // sees that the lanes not taken are the memory's own and stores
            // only the others, a masked store, which the next lookup's load
            // of the line waits for instead of taking it forwarded.
            // SAFETY: an empty template; the register in is the register out.
            unsafe {
                std::arch::asm!("/* {0} */", inout(zmm_reg) v, options(pure, nomem, nostack, preserves_flags));
            }
            let found = _mm512_mask_cmpeq_epu64_mask(valid, v, key);
            // Lanes up to the key's take the key before them; all, if it
            // is not here; none past the array's end.
            let take = ((u32::from(found) << 1).wrapping_sub(1) as u8) & valid;
            let moved = _mm512_mask_mov_epi64(v, take, _mm512_alignr_epi64::<7>(v, prev));
            // SAFETY: as for the load.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), moved) };
            if found != 0 {
                return true;
            }
            prev = v;
            at += CHUNK;
            rem -= rem.min(CHUNK);
        }
        // A miss: the array's last key dropped out (the last lane of the
        // last vector), or `carry` when no key lies behind the front.
        let last = self.entries - N;
        let dropped = if last == 0 {
            carry
        } else {
            let lane = _mm512_set1_epi64(((last - 1) % CHUNK) as i64);
            _mm_cvtsi128_si64(_mm512_castsi512_si128(_mm512_permutexvar_epi64(lane, prev))) as u64
        };
        if dropped == EMPTY {
            self.len += 1;
        }
        false
    }

    /// Cached pages from most to least recent.
    pub fn lru_order(&self) -> Vec<(Vpn, PageSize)> {
        self.valid().iter().map(|&k| unkey(k)).collect()
    }
}

impl Tlb for SmallFullyAssoc {
    #[inline]
    fn lookup(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let k = key(vpn, size);
        match self.valid().iter().position(|&e| e == k) {
            Some(p) => {
                self.keys[..=p].rotate_right(1);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, vpn: Vpn, size: PageSize) -> Option<(Vpn, PageSize)> {
        match self.touch(key(vpn, size)) {
            Some(dropped) if dropped != EMPTY => Some(unkey(dropped)),
            _ => None,
        }
    }

    #[inline]
    fn access(&mut self, vpn: Vpn, size: PageSize) -> bool {
        self.access_key(key(vpn, size))
    }

    fn contains(&self, vpn: Vpn, size: PageSize) -> bool {
        self.valid().contains(&key(vpn, size))
    }

    fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool {
        let k = key(vpn, size);
        match self.valid().iter().position(|&e| e == k) {
            Some(p) => {
                self.keys.copy_within(p + 1..self.len, p);
                self.len -= 1;
                self.keys[self.len] = EMPTY;
                true
            }
            None => false,
        }
    }

    fn invalidate_where(&mut self, mut remove: impl FnMut(Vpn, PageSize) -> bool) -> usize {
        // Compact the survivors in order, so recency order is kept.
        let before = self.len;
        let mut w = 0;
        for r in 0..before {
            let (v, s) = unkey(self.keys[r]);
            if !remove(v, s) {
                self.keys[w] = self.keys[r];
                w += 1;
            }
        }
        self.keys[w..before].fill(EMPTY);
        self.len = w;
        before - w
    }

    fn flush(&mut self) {
        self.keys[..self.len].fill(EMPTY);
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.entries
    }

    fn resident(&self) -> Vec<(Vpn, PageSize)> {
        let mut v: Vec<_> = self.valid().iter().map(|&k| unkey(k)).collect();
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
    fn lru_order_follows_accesses() {
        let k = PageSize::K4;
        let mut t = SmallFullyAssoc::new(3);
        for v in [1, 2, 3, 1, 4] {
            t.access(Vpn(v), k);
        }
        assert_eq!(t.lru_order(), vec![(Vpn(4), k), (Vpn(1), k), (Vpn(3), k)]);
        assert!(t.invalidate(Vpn(1), k));
        assert_eq!(t.lru_order(), vec![(Vpn(4), k), (Vpn(3), k)]);
        assert!(!t.access(Vpn(5), k));
        assert!(!t.access(Vpn(6), k));
        assert_eq!(t.lru_order(), vec![(Vpn(6), k), (Vpn(5), k), (Vpn(4), k)]);
    }

    #[test]
    fn full_128_entry_array_cycles_exactly() {
        let k = PageSize::K4;
        let mut t = SmallFullyAssoc::new(128);
        for round in 0..3 {
            for v in 0..129u64 {
                assert!(!t.access(Vpn(v * 7919), k), "round {round} page {v}");
            }
        }
        let mut t = SmallFullyAssoc::new(128);
        (0..128u64).for_each(|v| assert!(!t.access(Vpn(v), k)));
        assert!((0..128u64).all(|v| t.access(Vpn(v), k)));
        assert_eq!(t.lru_order()[0], (Vpn(127), k));
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
    fn ref_insert(r: &mut RefTlb, v: u64, s: PageSize) -> Option<(Vpn, PageSize)> {
        if r.contains(Vpn(v), s) {
            r.access(Vpn(v), s);
            return None;
        }
        let before = r.resident();
        r.access(Vpn(v), s);
        let after = r.resident();
        before.into_iter().find(|e| !after.contains(e))
    }

    fn check(entries: usize, pages: &[Op]) -> Result<(), TestCaseError> {
        let mut t = SmallFullyAssoc::new(entries);
        let mut r = RefTlb::new(entries, None);
        for (i, op) in pages.iter().enumerate() {
            match *op {
                Op::Access(v, s) => {
                    prop_assert_eq!(
                        t.access(Vpn(v), size(s)),
                        r.access(Vpn(v), size(s)),
                        "step {}",
                        i
                    )
                }
                Op::Insert(v, s) => prop_assert_eq!(
                    t.insert(Vpn(v), size(s)),
                    ref_insert(&mut r, v, size(s)),
                    "step {}",
                    i
                ),
                Op::Lookup(v, s) => {
                    let hit = r.contains(Vpn(v), size(s));
                    if hit {
                        r.access(Vpn(v), size(s));
                    }
                    prop_assert_eq!(t.lookup(Vpn(v), size(s)), hit, "step {}", i);
                }
                Op::Invalidate(v, s) => prop_assert_eq!(
                    t.invalidate(Vpn(v), size(s)),
                    r.invalidate(Vpn(v), size(s)),
                    "step {}",
                    i
                ),
                Op::InvalidateOdd => {
                    let odd: Vec<_> = r
                        .resident()
                        .into_iter()
                        .filter(|e| e.0 .0 % 2 == 1)
                        .collect();
                    odd.iter().for_each(|&(v, s)| {
                        r.invalidate(v, s);
                    });
                    prop_assert_eq!(t.invalidate_where(|v, _| v.0 % 2 == 1), odd.len());
                }
                Op::Flush => {
                    t.flush();
                    r.flush();
                }
            }
            prop_assert_eq!(t.len(), r.resident().len());
            prop_assert!(t.keys[t.len..].iter().all(|&k| k == EMPTY));
            prop_assert_eq!(t.lru_order(), r.set_order(Vpn(0)), "step {}", i);
        }
        prop_assert_eq!(t.lru_order(), r.set_order(Vpn(0)));
        prop_assert_eq!(t.resident(), r.resident());
        Ok(())
    }

    /// One lookup of `k` as [`crate::Fronts`] makes it: in the first `N`
    /// keys (moved to the front there), else into the front, and the key
    /// pushed out of it and `k` handed to the walk behind the front, the
    /// portable one or the AVX-512 one; returns what that walk returned.
    fn through_front<const N: usize>(
        t: &mut SmallFullyAssoc,
        k: Key,
        avx512: bool,
    ) -> Option<bool> {
        if let Some(p) = t.keys[..N].iter().position(|&e| e == k) {
            t.keys[..=p].rotate_right(1);
            return None;
        }
        let carry = t.keys[N - 1];
        t.keys[..N].rotate_right(1);
        t.keys[0] = k;
        #[cfg(target_arch = "x86_64")]
        if avx512 {
            // SAFETY: only asked for where the CPU has AVX-512F.
            return Some(unsafe { t.access_behind_front_avx512::<N>(k, carry) });
        }
        let _ = avx512;
        Some(t.access_behind_front::<N>(k, carry))
    }

    fn behind_front_agree<const N: usize>(
        entries: usize,
        pages: &[u64],
    ) -> Result<(), TestCaseError> {
        if !pagelab_core::isa::Isa::Avx512.supported() {
            eprintln!("skipped: this CPU has no AVX-512F, the walk's other tier");
            return Ok(());
        }
        let (mut a, mut b) = (SmallFullyAssoc::new(entries), SmallFullyAssoc::new(entries));
        for (i, &p) in pages.iter().enumerate() {
            let k = key(Vpn(p), PageSize::K4);
            prop_assert_eq!(
                through_front::<N>(&mut a, k, false),
                through_front::<N>(&mut b, k, true),
                "step {}",
                i
            );
            prop_assert_eq!(a.keys, b.keys, "step {}", i);
            prop_assert_eq!(a.len, b.len, "step {}", i);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The AVX-512 walk behind a front of 4 or 8 keys leaves every key
        /// where the portable walk does, on arrays of every length (whole
        /// vectors behind the front or not, and none).
        #[test]
        fn behind_front_avx512_matches_walk(
            entries in 8usize..=CAP,
            pages in proptest::collection::vec(0u64..160, 1..1500),
        ) {
            behind_front_agree::<4>(entries, &pages)?;
            behind_front_agree::<8>(entries, &pages)?;
        }

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
