//! What the machine counts during a run: [`MmStats`], with per-size counts
//! ([`PerSize`]) serialized by size name.

use pagelab_core::PageSize;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// Counts per page size, serialized as `{"4K": n, "2M": n}` in size order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerSize([u64; 19]);

impl PerSize {
    /// Adds `n` to `size`'s count.
    pub fn add(&mut self, size: PageSize, n: u64) {
        self.0[size.index()] += n;
    }

    /// The count for `size`.
    pub fn get(&self, size: PageSize) -> u64 {
        self.0[size.index()]
    }

    /// Every size with a non-zero count, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = (PageSize, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (PageSize::from_index(i).expect("4K..1G"), n))
    }

    /// The sum over sizes.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

impl Serialize for PerSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (size, n) in self.iter() {
            m.serialize_entry(&size.to_string(), &n)?;
        }
        m.end()
    }
}

/// What the machine counted during a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MmStats {
    /// Page faults that mapped memory or made a page writable (a write to a
    /// page fork left read-only that nobody else holds any more).
    pub faults: u64,
    /// Those faults by the size of the page mapped or made writable.
    pub faults_by_size: PerSize,
    /// Bytes mapped now, whole pages (internal fragmentation included).
    pub rss_bytes: u64,
    /// The highest `rss_bytes` seen.
    pub peak_rss_bytes: u64,
    /// Bytes of frames zeroed for new pages.
    pub zeroed_bytes: u64,
    /// Bytes copied (promotion by relocation, copy-on-write).
    pub copied_bytes: u64,
    /// Pages promoted to a larger size.
    pub promotions: u64,
    /// Pages demoted (split) to smaller ones.
    pub demotions: u64,
    /// Reservations broken to satisfy other allocations.
    pub preemptions: u64,
    /// References outside every VMA in a trace that has map events (skipped).
    pub refs_outside_vmas: u64,
    /// Unmap, protect or advise events on ranges holding no mapping.
    pub events_on_nothing: u64,
    /// Events the model does not carry out yet (counted, skipped).
    pub unsupported_events: u64,
    /// Writes to pages whose protection forbids them (the program would fault).
    pub writes_to_readonly: u64,
    /// VMAs created by the inference rule (traces without map events).
    pub inferred_vmas: u64,
    /// Bytes of pages reclaimed: anonymous pages swapped out plus page-cache
    /// folios dropped.
    pub reclaimed_bytes: u64,
    /// Bytes of anonymous pages swapped out (unmapped, their frames freed).
    pub swapped_out_bytes: u64,
    /// Bytes of swapped-out memory read back by major faults.
    pub swapped_in_bytes: u64,
    /// Bytes of page-cache folios dropped by reclaim.
    pub cache_dropped_bytes: u64,
    /// Bytes of dirty page-cache folios written back before being dropped.
    pub written_back_bytes: u64,
    /// Bytes read into the page cache at faults.
    pub file_read_bytes: u64,
    /// Faults that had to read from disk: swap-in, or a page-cache miss
    /// (Linux's `maj_flt`).
    pub major_faults: u64,
    /// Of those, faults on swapped-out memory.
    pub swap_in_faults: u64,
    /// Times reclaim ran because an allocation took a zone below its low watermark (kswapd).
    pub kswapd_runs: u64,
    /// Times reclaim ran because an allocation failed (direct reclaim).
    pub direct_reclaims: u64,
    /// LRU pages reclaim looked at.
    pub reclaim_scanned: u64,
    /// Superpages (anonymous pages or page-cache folios) reclaim split first.
    pub reclaim_splits: u64,
    /// Reservations preempted by reclaim (before any mapped page is reclaimed).
    pub reclaim_preemptions: u64,
    /// Faults that mapped a whole page-cache folio larger than the base page.
    pub file_superpage_faults: u64,
    /// Large folios the page cache could not allocate (a smaller one was read).
    pub file_folio_fallbacks: u64,
}
