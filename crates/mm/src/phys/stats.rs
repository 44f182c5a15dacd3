//! Serializable statistics and the fragmentation figure.

use super::LruZoneStats;
use serde::{Deserialize, Serialize};

/// The unusable free space index (Gorman and Whitcroft, 2006; Linux's
/// `/sys/kernel/debug/extfrag/unusable_index`) for `order`, given the free
/// blocks per order (`free_blocks[i]` blocks of `2^i` frames):
///
/// `(F - sum over i >= order of 2^i * free_blocks[i]) / F`, where `F` is all free frames.
///
/// It is the fraction of free memory that sits in blocks too small to serve an
/// allocation of `order`: 0 when every free frame is in a block of at least
/// that order, 1 when none is. With no free memory at all it is 1, as in the
/// kernel (no free memory is treated as all of it unusable). An `order` above
/// the last entry gives 1.
pub fn unusable_index(free_blocks: &[u64], order: u8) -> f64 {
    let frames = |(i, &n): (usize, &u64)| n << i;
    let total: u64 = free_blocks.iter().enumerate().map(frames).sum();
    if total == 0 {
        return 1.0;
    }
    let usable: u64 = free_blocks
        .iter()
        .enumerate()
        .skip(order as usize)
        .map(frames)
        .sum();
    (total - usable) as f64 / total as f64
}

/// One buddy allocator's counters and free lists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuddyStats {
    /// First frame managed.
    pub start_pfn: u64,
    /// Frames managed.
    pub frames: u64,
    /// Frames free.
    pub free_frames: u64,
    /// Free blocks per order, index = order (the `/proc/buddyinfo` row).
    pub free_blocks: Vec<u64>,
    /// Successful allocations.
    pub allocs: u64,
    /// Successful frees.
    pub frees: u64,
    /// Blocks split into order-0 pages by `split`.
    pub splits: u64,
    /// Allocations refused for want of a free block, per order.
    pub failures_by_order: Vec<u64>,
    /// Frees refused as errors (double free, wrong order, ...).
    pub bad_frees: u64,
    /// The unusable free space index per order, index = order.
    pub unusable_index: Vec<f64>,
}

/// One zone of a [`super::PhysMem`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZoneStats {
    /// `dma32`, `normal` or `large`.
    pub name: String,
    /// The zone's allocator.
    #[serde(flatten)]
    pub buddy: BuddyStats,
    /// The zone's LRU lists.
    pub lru: LruZoneStats,
}

/// The fragmentation figure for the page size of interest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragmentation {
    /// The order reported (for example 9, a 2M page of 4K frames).
    pub order: u8,
    /// The unusable free space index at that order over all zones.
    pub unusable_index: f64,
}

/// Physical memory as a whole: totals, per-order counts and per-zone detail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhysStats {
    /// Frames managed (4K each).
    pub total_frames: u64,
    /// Frames free.
    pub free_frames: u64,
    /// Frames allocated.
    pub used_frames: u64,
    /// Successful allocations.
    pub allocs: u64,
    /// Successful frees.
    pub frees: u64,
    /// Allocations served by a zone after the first one tried.
    pub fallbacks: u64,
    /// Allocations refused by every allowed zone, per order.
    pub failures_by_order: Vec<u64>,
    /// Free blocks per order summed over zones.
    pub free_blocks: Vec<u64>,
    /// The unusable free space index per order over all zones.
    pub unusable_index: Vec<f64>,
    /// The figure for the page size of interest.
    pub fragmentation: Fragmentation,
    /// Per zone, in ascending physical order.
    pub zones: Vec<ZoneStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_index() {
        // 4 order-0 blocks (4 frames), 1 order-2 block (4 frames), 1 order-3 block (8 frames): 16 free.
        let free = [4, 0, 1, 1];
        assert_eq!(unusable_index(&free, 0), 0.0);
        assert_eq!(unusable_index(&free, 1), 4.0 / 16.0);
        assert_eq!(unusable_index(&free, 2), 4.0 / 16.0);
        assert_eq!(unusable_index(&free, 3), 8.0 / 16.0);
        assert_eq!(unusable_index(&free, 4), 1.0);
        assert_eq!(unusable_index(&[0, 0], 0), 1.0);
    }
}
