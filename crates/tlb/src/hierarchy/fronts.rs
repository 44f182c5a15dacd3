//! The L1 arrays as [`crate::Fronts`] and [`crate::WholeL1`] use them: the array a front
//! can hold, the lookups and misses they answer counted in the L1's counters, and the
//! rest of the hierarchy after a miss they found.

use super::{Outcome, TlbHierarchy};
use crate::array::TlbArray;
use crate::SmallFullyAssoc;
use pagelab_core::{PageSize, VirtAddr};

impl TlbHierarchy {
    /// Side `s`'s L1 array for pages of `size`, if [`crate::Fronts`] can hold
    /// its front of `ranks` entries: the level's one array, small and fully
    /// associative, of at least `ranks` entries, caching such pages as themselves.
    pub(crate) fn front_array(
        &mut self,
        s: usize,
        size: PageSize,
        ranks: usize,
    ) -> Option<&mut SmallFullyAssoc> {
        let level = &mut self.l1[s];
        let r = level.routes[size.index()];
        match level.arrays.as_mut_slice() {
            [TlbArray::SmallFullyAssoc(a)]
                if a.entries() >= ranks && u32::from(r.store_shift) == size.shift() =>
            {
                Some(a)
            }
            _ => None,
        }
    }

    /// Counts `n` L1 hits of side `s` answered by [`crate::Fronts`].
    pub(crate) fn count_front_hits(&mut self, s: usize, n: u64) {
        self.l1[s].accesses += n;
    }

    /// Counts `n` misses of side `s`'s L1 found by [`crate::WholeL1`] (its
    /// lookups counted by [`TlbHierarchy::count_front_hits`]).
    pub(crate) fn count_l1_misses(&mut self, s: usize, n: u64) {
        self.l1[s].misses += n;
    }

    /// An access, key `k` in its L1 array on side `s`, that missed the front
    /// held by [`crate::Fronts`], which took `k` and pushed out `carry` (see
    /// [`SmallFullyAssoc`]): the rest of the L1 array, counted. Returns
    /// whether the key was there (a hit); after a miss, call
    /// [`TlbHierarchy::after_front_l1_miss`] (later is fine: the L1 does not
    /// depend on what follows a miss).
    #[inline(always)]
    pub(crate) fn l1_behind_front<const RANKS: usize>(
        &mut self,
        s: usize,
        k: u64,
        carry: u64,
    ) -> bool {
        self.behind_front(s, |a| a.access_behind_front::<RANKS>(k, carry))
    }

    /// [`TlbHierarchy::l1_behind_front`] with the array's walk in AVX-512
    /// instructions (the same keys in the same places).
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn l1_behind_front_avx512<const RANKS: usize>(
        &mut self,
        s: usize,
        k: u64,
        carry: u64,
    ) -> bool {
        // SAFETY: the CPU has AVX-512F (the caller's contract).
        self.behind_front(s, |a| unsafe {
            a.access_behind_front_avx512::<RANKS>(k, carry)
        })
    }

    /// The L1 array held by [`crate::Fronts`] on side `s`, looked up by
    /// `lookup` (whether it hit), counted.
    #[inline(always)]
    fn behind_front(
        &mut self,
        s: usize,
        lookup: impl FnOnce(&mut SmallFullyAssoc) -> bool,
    ) -> bool {
        let level = &mut self.l1[s];
        level.accesses += 1;
        let hit = match level.arrays.as_mut_slice() {
            [TlbArray::SmallFullyAssoc(a)] => lookup(a),
            _ => unreachable!("Fronts holds only single small arrays"),
        };
        level.misses += u64::from(!hit);
        hit
    }

    /// The L2 (if any) and the walk counters after a miss in the L1 array
    /// held by [`crate::Fronts`] (see [`TlbHierarchy::l1_behind_front`]).
    pub(crate) fn after_front_l1_miss(
        &mut self,
        s: usize,
        addr: VirtAddr,
        size: PageSize,
    ) -> Outcome {
        self.after_l1_miss(s, addr, size.shift())
    }
}
