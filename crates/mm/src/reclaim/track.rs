//! What reclaim needs to know about every page in memory: which LRU page
//! it is, who owns it (an anonymous page at a virtual address, or a folio of
//! a file), and the referenced and dirty bits the model sets as it
//! translates, as the hardware sets a PTE's accessed and dirty bits.

use crate::phys::{FrameAllocator, LruList, Page, PhysMem};
use pagelab_core::{PageSize, Pfn, VirtAddr};
use rustc_hash::FxHashMap;

/// Whose data an LRU page holds; the reverse map is object-based, as in
/// Linux since 2.6 (Bligh and Hansen, OLS 2003): mappers are found from the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Anonymous memory mapped at `va` (in every process that maps it: fork
    /// keeps addresses).
    Anon {
        /// Virtual address of the page's first byte.
        va: VirtAddr,
    },
    /// The page-cache folio of `file` starting at page `start`.
    File {
        /// The file id.
        file: u64,
        /// The folio's first page index in the file.
        start: u64,
    },
}

/// The LRU owners and the referenced/dirty bits, two per 4K frame.
#[derive(Clone, Debug, Default)]
pub struct Residency {
    owners: FxHashMap<u64, Owner>,
    /// Bit `2f` is frame `f`'s referenced bit, bit `2f + 1` its dirty bit.
    /// Empty when reclaim is off (nothing to track).
    bits: Vec<u64>,
}

impl Residency {
    /// Tracking for `frames` frames, or none when `enabled` is false.
    pub fn new(frames: u64, enabled: bool) -> Residency {
        Residency {
            owners: FxHashMap::default(),
            bits: if enabled {
                vec![0; (frames * 2).div_ceil(64) as usize]
            } else {
                Vec::new()
            },
        }
    }

    /// Whether pages are tracked (reclaim is on).
    pub fn enabled(&self) -> bool {
        !self.bits.is_empty()
    }

    /// Records an access to the page whose first frame is `frame` (4K units):
    /// its referenced bit, and its dirty bit for a write. The translation's
    /// fast path: one or-into-memory.
    #[inline]
    pub fn touch(&mut self, frame: Pfn, write: bool) {
        let bit = frame.0.wrapping_mul(2);
        if let Some(w) = self.bits.get_mut((bit >> 6) as usize) {
            *w |= (1 | (u64::from(write) << 1)) << (bit & 63);
        }
    }

    /// Reads and clears the referenced bits of frames `[pfn, pfn + n)`:
    /// whether any was set.
    pub fn take_referenced(&mut self, pfn: Pfn, n: u64) -> bool {
        self.take(pfn, n, 0x5555_5555_5555_5555)
    }

    /// Reads and clears the dirty bits of frames `[pfn, pfn + n)`: whether any was set.
    pub fn take_dirty(&mut self, pfn: Pfn, n: u64) -> bool {
        self.take(pfn, n, 0xAAAA_AAAA_AAAA_AAAA)
    }

    /// Clears the bits selected by `pattern` (alternate bits: referenced or
    /// dirty) of frames `[pfn, pfn + n)`; whether any was set.
    fn take(&mut self, pfn: Pfn, n: u64, pattern: u64) -> bool {
        let pfn = pfn.0;
        let mut any = false;
        let mut f = pfn;
        while f < pfn + n {
            let bit = f * 2;
            let Some(w) = self.bits.get_mut((bit >> 6) as usize) else {
                break;
            };
            let first = bit & 63;
            let count = (64 - first).min((pfn + n - f) * 2);
            let mask = if count == 64 {
                u64::MAX
            } else {
                ((1u64 << count) - 1) << first
            } & pattern;
            any |= *w & mask != 0;
            *w &= !mask;
            f += count / 2;
        }
        any
    }

    /// The owner of the LRU page headed by `pfn`.
    pub fn owner(&self, pfn: Pfn) -> Option<Owner> {
        self.owners.get(&pfn.0).copied()
    }

    /// LRU pages tracked.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether no page is tracked.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Every tracked page's head frame and owner.
    pub fn iter(&self) -> impl Iterator<Item = (Pfn, Owner)> + '_ {
        self.owners.iter().map(|(&p, &o)| (Pfn(p), o))
    }

    /// Puts a new page (`size` at `pfn`, 4K units) at the head of its zone's
    /// inactive list, bits cleared. Nothing when tracking is off or the page
    /// is already listed.
    pub fn add(&mut self, phys: &mut PhysMem, pfn: Pfn, size: PageSize, owner: Owner) {
        if !self.enabled() || self.owners.contains_key(&pfn.0) {
            return;
        }
        let Some(zone) = phys.zone_of(pfn) else {
            return;
        };
        let order = size.frame_order();
        if phys
            .lru_mut()
            .add(zone, Page { pfn, order }, LruList::Inactive)
            .is_ok()
        {
            self.take_referenced(pfn, 1 << order.0);
            self.take_dirty(pfn, 1 << order.0);
            self.owners.insert(pfn.0, owner);
        }
    }

    /// Takes off the LRU every page headed in frames `[pfn, pfn + n)`.
    pub fn forget(&mut self, phys: &mut PhysMem, pfn: Pfn, n: u64) {
        if self.owners.is_empty() {
            return;
        }
        let mut f = pfn.0;
        while f < pfn.0 + n {
            match self.owners.remove(&f) {
                Some(_) => match phys.lru_mut().remove(Pfn(f)) {
                    Ok(p) => f += 1 << p.order.0,
                    Err(_) => f += 1,
                },
                None => f += 1,
            }
        }
    }

    /// Splits the anonymous LRU page headed by `pfn` into pieces of `piece`,
    /// each owned at its own address. File folios are left whole (splitting
    /// a mapping does not split the folio).
    pub fn split_anon(&mut self, phys: &mut PhysMem, pfn: Pfn, piece: PageSize) {
        let Some(Owner::Anon { va }) = self.owner(pfn) else {
            return;
        };
        self.split(phys, pfn, piece, |i| Owner::Anon {
            va: va + i * piece.bytes(),
        });
    }

    /// Splits the LRU page headed by `pfn` into pieces of `piece`, piece `i`
    /// owned by `owner(i)`.
    pub fn split(
        &mut self,
        phys: &mut PhysMem,
        pfn: Pfn,
        piece: PageSize,
        owner: impl Fn(u64) -> Owner,
    ) {
        let order = piece.frame_order();
        let Some(page) = phys
            .lru()
            .page_holding(pfn, phys.max_order())
            .filter(|p| p.pfn == pfn && p.order > order)
        else {
            return;
        };
        if phys.lru_mut().split_into(pfn, order).is_err() {
            return;
        }
        for i in 0..1u64 << (page.order.0 - order.0) {
            self.owners.insert(pfn.0 + (i << order.0), owner(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_read_and_cleared_over_any_range() {
        let mut r = Residency::new(4096, true);
        r.touch(Pfn(40), false);
        r.touch(Pfn(100), true);
        assert!(!r.take_referenced(Pfn(0), 32));
        assert!(r.take_referenced(Pfn(32), 32));
        assert!(!r.take_referenced(Pfn(32), 32));
        assert!(r.take_referenced(Pfn(0), 512));
        assert!(!r.take_referenced(Pfn(0), 512));
        // Clearing referenced bits keeps the dirty ones.
        assert!(r.take_dirty(Pfn(100), 1) && !r.take_dirty(Pfn(0), 512));
        let mut off = Residency::new(4096, false);
        off.touch(Pfn(40), true);
        assert!(!off.enabled());
        assert!(!off.take_referenced(Pfn(0), 64) && !off.take_dirty(Pfn(0), 64));
    }
}
