//! The binary buddy allocator over one range of frames.
//!
//! Bookkeeping is two sets of bitmaps, one bit per possible block head per
//! order: `free[k]` marks heads of free blocks of order `k` (with summary
//! words, so the lowest one is found in O(log64 n)), `used[k]` marks heads of
//! allocated blocks of order `k`. Order `k` has `frames / 2^k` possible heads,
//! so each set costs under 2 bits per frame and the whole allocator about
//! `frames / 2` bytes plus 1/64 for summaries: 8 MiB for 64 GiB of 4K frames
//! (see [`BuddyAllocator::bookkeeping_bytes`]). No per-frame structure and no
//! linked lists: a free list of order `k` is the set bits of `free[k]`.
//!
//! Allocation policy (deterministic): the smallest order with a free block
//! that is at least the request (as Linux's `__rmqueue_smallest`), and within
//! that order the lowest address; a split keeps the lower half and frees the
//! upper halves. Because free blocks are always fully coalesced, the free
//! blocks are a function of the set of free frames alone, which is what the
//! reference model in `tests/phys_buddy_reference.rs` relies on.

use super::bitset::{Bits, TreeBits};
use super::stats::{unusable_index, BuddyStats, Fragmentation, PhysStats, ZoneStats};
use super::{FrameAllocator, LruZoneStats, PhysError, ZonePref, MAX_ORDER_LIMIT};
use pagelab_core::{Order, Pfn};

/// A binary buddy allocator over frames `[start, start + frames)`.
#[derive(Clone, Debug)]
pub struct BuddyAllocator {
    start: u64,
    end: u64,
    /// `start` rounded down to a multiple of `2^max_order`: bit `i` of order `k` is pfn `origin + i * 2^k`.
    origin: u64,
    max_order: u8,
    free: Vec<TreeBits>,
    used: Vec<Bits>,
    free_blocks: Vec<u64>,
    free_frames: u64,
    allocs: u64,
    frees: u64,
    splits: u64,
    bad_frees: u64,
    failures: Vec<u64>,
}

impl BuddyAllocator {
    /// An allocator over `frames` frames from `start`, all free, with blocks up to `max_order`.
    ///
    /// Blocks never cross `start` or the end, so a range that is not aligned to
    /// `2^max_order` starts and ends with smaller blocks.
    pub fn new(start: Pfn, frames: u64, max_order: Order) -> Result<BuddyAllocator, PhysError> {
        if max_order.0 > MAX_ORDER_LIMIT {
            return Err(PhysError::OrderTooLarge {
                order: max_order.0,
                max: MAX_ORDER_LIMIT,
            });
        }
        let end = start.0.checked_add(frames).filter(|&e| e < 1 << 63);
        let Some(end) = end.filter(|_| frames > 0) else {
            return Err(PhysError::BadRange { start, frames });
        };
        let origin = start.0 & !((1u64 << max_order.0) - 1);
        let orders = max_order.0 as usize + 1;
        let heads = |k: usize| (((end - origin) >> k) + 1) as usize;
        let mut b = BuddyAllocator {
            start: start.0,
            end,
            origin,
            max_order: max_order.0,
            free: (0..orders).map(|k| TreeBits::new(heads(k))).collect(),
            used: (0..orders).map(|k| Bits::new(heads(k))).collect(),
            free_blocks: vec![0; orders],
            free_frames: 0,
            allocs: 0,
            frees: 0,
            splits: 0,
            bad_frees: 0,
            failures: vec![0; orders],
        };
        b.seed_free_blocks();
        Ok(b)
    }

    /// Carves the range into the largest aligned blocks that fit, lowest first.
    fn seed_free_blocks(&mut self) {
        let mut p = self.start;
        while p < self.end {
            let mut k = self.max_order.min(p.trailing_zeros().min(63) as u8);
            while p + (1 << k) > self.end {
                k -= 1;
            }
            self.insert_free(p, k);
            self.free_frames += 1 << k;
            p += 1 << k;
        }
    }

    #[inline]
    fn idx(&self, pfn: u64, k: u8) -> usize {
        ((pfn - self.origin) >> k) as usize
    }

    #[inline]
    fn insert_free(&mut self, pfn: u64, k: u8) {
        let i = self.idx(pfn, k);
        self.free[k as usize].set(i);
        self.free_blocks[k as usize] += 1;
    }

    #[inline]
    fn remove_free(&mut self, pfn: u64, k: u8) {
        let i = self.idx(pfn, k);
        self.free[k as usize].clear(i);
        self.free_blocks[k as usize] -= 1;
    }

    #[inline]
    fn is_free_head(&self, pfn: u64, k: u8) -> bool {
        pfn >= self.start && self.free[k as usize].get(self.idx(pfn, k))
    }

    #[inline]
    fn is_used_head(&self, pfn: u64, k: u8) -> bool {
        pfn >= self.start && self.used[k as usize].get(self.idx(pfn, k))
    }

    /// First frame managed.
    pub fn start(&self) -> Pfn {
        Pfn(self.start)
    }

    /// One past the last frame managed.
    pub fn end(&self) -> Pfn {
        Pfn(self.end)
    }

    /// Whether `pfn` lies in this allocator's range.
    pub fn contains(&self, pfn: Pfn) -> bool {
        (self.start..self.end).contains(&pfn.0)
    }

    /// Allocates `2^order` frames; `None` when no block is large enough.
    pub fn alloc(&mut self, order: Order) -> Option<Pfn> {
        let n = order.0;
        if n > self.max_order {
            return None;
        }
        let found = (n..=self.max_order).find(|&k| self.free_blocks[k as usize] > 0);
        let Some((k, i)) = found.and_then(|k| Some((k, self.free[k as usize].first_set()?))) else {
            self.failures[n as usize] += 1;
            return None;
        };
        let pfn = self.origin + ((i as u64) << k);
        self.remove_free(pfn, k);
        for j in (n..k).rev() {
            self.insert_free(pfn + (1 << j), j);
        }
        let ui = self.idx(pfn, n);
        self.used[n as usize].set(ui);
        self.free_frames -= 1 << n;
        self.allocs += 1;
        Some(Pfn(pfn))
    }

    /// Checks order, range and alignment of a block given by a caller.
    fn check_block(&self, pfn: u64, n: u8) -> Result<(), PhysError> {
        if n > self.max_order {
            return Err(PhysError::OrderTooLarge {
                order: n,
                max: self.max_order,
            });
        }
        if pfn < self.start || pfn.saturating_add(1 << n) > self.end {
            return Err(PhysError::OutOfRange {
                pfn: Pfn(pfn),
                order: n,
                start: Pfn(self.start),
                end: Pfn(self.end),
            });
        }
        if pfn & ((1 << n) - 1) != 0 {
            return Err(PhysError::Misaligned {
                pfn: Pfn(pfn),
                order: n,
            });
        }
        Ok(())
    }

    /// Checks that `pfn` heads an allocated block of exactly order `n`, saying why not.
    fn check_allocated(&self, pfn: u64, n: u8) -> Result<(), PhysError> {
        self.check_block(pfn, n)?;
        if self.is_used_head(pfn, n) {
            return Ok(());
        }
        let orders = 0..=self.max_order;
        if orders
            .clone()
            .any(|k| self.is_free_head(pfn & !((1 << k) - 1), k))
        {
            return Err(PhysError::DoubleFree {
                pfn: Pfn(pfn),
                order: n,
            });
        }
        let aligned = orders.filter(|&k| pfn & ((1 << k) - 1) == 0);
        if let Some(actual) = aligned.into_iter().find(|&k| self.is_used_head(pfn, k)) {
            return Err(PhysError::WrongOrder {
                pfn: Pfn(pfn),
                order: n,
                actual,
            });
        }
        Err(PhysError::NotAllocated {
            pfn: Pfn(pfn),
            order: n,
        })
    }

    /// Frees a block allocated at `order`, coalescing it with free buddies.
    pub fn free(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        let (mut p, n) = (pfn.0, order.0);
        if let Err(e) = self.check_allocated(p, n) {
            self.bad_frees += 1;
            return Err(e);
        }
        let ui = self.idx(p, n);
        self.used[n as usize].clear(ui);
        let mut k = n;
        while k < self.max_order {
            let buddy = p ^ (1 << k);
            if buddy < self.start || buddy + (1 << k) > self.end || !self.is_free_head(buddy, k) {
                break;
            }
            self.remove_free(buddy, k);
            p = p.min(buddy);
            k += 1;
        }
        self.insert_free(p, k);
        self.free_frames += 1 << n;
        self.frees += 1;
        Ok(())
    }

    /// Turns an allocated block of `order` into `2^order` allocated order-0
    /// blocks (Linux's `split_page`), so that parts of it can be freed. O(2^order / 64).
    pub fn split(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        let (p, n) = (pfn.0, order.0);
        self.check_allocated(p, n)?;
        if n == 0 {
            return Ok(());
        }
        let ui = self.idx(p, n);
        self.used[n as usize].clear(ui);
        let lo = self.idx(p, 0);
        self.used[0].set_range(lo, lo + (1 << n));
        self.splits += 1;
        Ok(())
    }

    /// The order `pfn` was allocated at, if it heads an allocated block.
    pub fn allocated_order(&self, pfn: Pfn) -> Option<Order> {
        if !self.contains(pfn) {
            return None;
        }
        (0..=self.max_order)
            .filter(|&k| pfn.0 & ((1 << k) - 1) == 0)
            .find(|&k| self.is_used_head(pfn.0, k))
            .map(Order)
    }

    /// Free blocks of exactly `order`.
    pub fn free_count(&self, order: Order) -> u64 {
        self.free_blocks.get(order.0 as usize).copied().unwrap_or(0)
    }

    /// Free frames.
    pub fn free_frames(&self) -> u64 {
        self.free_frames
    }

    /// Frames managed.
    pub fn total_frames(&self) -> u64 {
        self.end - self.start
    }

    /// The largest order.
    pub fn max_order(&self) -> Order {
        Order(self.max_order)
    }

    /// Free blocks per order, index = order.
    pub fn free_blocks(&self) -> &[u64] {
        &self.free_blocks
    }

    /// Bytes of bookkeeping held (bitmaps and counters), about `frames / 2`.
    pub fn bookkeeping_bytes(&self) -> usize {
        let maps: usize = self.free.iter().map(TreeBits::bytes).sum::<usize>()
            + self.used.iter().map(Bits::bytes).sum::<usize>();
        maps + (self.free_blocks.len() + self.failures.len()) * 8 + std::mem::size_of::<Self>()
    }

    /// This allocator's counters.
    pub fn buddy_stats(&self) -> BuddyStats {
        BuddyStats {
            start_pfn: self.start,
            frames: self.total_frames(),
            free_frames: self.free_frames,
            free_blocks: self.free_blocks.clone(),
            allocs: self.allocs,
            frees: self.frees,
            splits: self.splits,
            failures_by_order: self.failures.clone(),
            bad_frees: self.bad_frees,
            unusable_index: (0..=self.max_order)
                .map(|k| unusable_index(&self.free_blocks, k))
                .collect(),
        }
    }

    /// Verifies the bookkeeping: free and allocated blocks are aligned, inside
    /// the range, do not overlap and together cover every frame (so free +
    /// used == total); counters match the bitmaps; no two free buddies are
    /// left uncoalesced. O(frames / 64 + blocks log blocks); for tests and
    /// debug checks, not the hot path.
    pub fn check(&self) -> Result<(), PhysError> {
        let bad = |m: String| {
            Err(PhysError::Invariant(format!(
                "buddy [{:#x}, {:#x}): {m}",
                self.start, self.end
            )))
        };
        let mut blocks: Vec<(u64, u8, bool)> = Vec::new();
        let mut free_frames = 0;
        for k in 0..=self.max_order {
            let free = &self.free[k as usize];
            if free.count_ones() != self.free_blocks[k as usize] || !free.summaries_agree() {
                return bad(format!(
                    "order {k}: free-block count or summary bits disagree with the bitmap"
                ));
            }
            let pfn = |i: usize| self.origin + ((i as u64) << k);
            blocks.extend(free.iter_ones().map(|i| (pfn(i), k, true)));
            blocks.extend(
                self.used[k as usize]
                    .iter_ones()
                    .map(|i| (pfn(i), k, false)),
            );
            free_frames += self.free_blocks[k as usize] << k;
        }
        if free_frames != self.free_frames {
            return bad(format!(
                "free frames {} counted, {} in free blocks",
                self.free_frames, free_frames
            ));
        }
        blocks.sort_unstable();
        let mut cursor = self.start;
        for &(p, k, is_free) in &blocks {
            if p & ((1 << k) - 1) != 0 || p + (1 << k) > self.end {
                return bad(format!("block {p:#x} order {k} misaligned or past the end"));
            }
            if p != cursor {
                let what = if p < cursor {
                    "overlaps the block before"
                } else {
                    "leaves a gap before it"
                };
                return bad(format!(
                    "block {p:#x} order {k} {what} (expected {cursor:#x})"
                ));
            }
            cursor += 1 << k;
            let buddy = p ^ (1 << k);
            if is_free
                && k < self.max_order
                && buddy >= self.start
                && buddy + (1 << k) <= self.end
                && self.is_free_head(buddy, k)
            {
                return bad(format!(
                    "free buddies {p:#x} and {buddy:#x} of order {k} not coalesced"
                ));
            }
        }
        if cursor != self.end {
            return bad(format!("blocks end at {cursor:#x}: free + used != total"));
        }
        Ok(())
    }
}

impl FrameAllocator for BuddyAllocator {
    /// The zone preference is ignored: a lone allocator is one zone.
    fn alloc(&mut self, order: Order, _pref: ZonePref) -> Option<Pfn> {
        BuddyAllocator::alloc(self, order)
    }
    fn free(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        BuddyAllocator::free(self, pfn, order)
    }
    fn split(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        BuddyAllocator::split(self, pfn, order)
    }
    fn free_count(&self, order: Order) -> u64 {
        BuddyAllocator::free_count(self, order)
    }
    fn free_frames(&self) -> u64 {
        self.free_frames
    }
    fn total_frames(&self) -> u64 {
        BuddyAllocator::total_frames(self)
    }
    fn max_order(&self) -> Order {
        Order(self.max_order)
    }
    fn unusable_index(&self, order: Order) -> f64 {
        unusable_index(&self.free_blocks, order.0)
    }
    /// One zone named `buddy`; the reported order is 9 (2M) or the largest order.
    fn stats(&self) -> PhysStats {
        let b = self.buddy_stats();
        let order = 9.min(self.max_order);
        PhysStats {
            total_frames: b.frames,
            free_frames: b.free_frames,
            used_frames: b.frames - b.free_frames,
            allocs: b.allocs,
            frees: b.frees,
            fallbacks: 0,
            failures_by_order: b.failures_by_order.clone(),
            free_blocks: b.free_blocks.clone(),
            unusable_index: b.unusable_index.clone(),
            fragmentation: Fragmentation {
                order,
                unusable_index: b.unusable_index[order as usize],
            },
            zones: vec![ZoneStats {
                name: "buddy".into(),
                buddy: b,
                lru: LruZoneStats::default(),
            }],
        }
    }
}

#[cfg(test)]
#[path = "buddy_tests.rs"]
mod tests;
