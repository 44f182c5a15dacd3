//! Where a run's frames (its data pages and its page tables) lie in
//! physical memory, which decides the cache sets their lines fall into and,
//! under nested paging, the host pages (and so the nested TLB entries) they
//! need.
//!
//! Two placements:
//! - **first touch**: every frame at the next free address aligned to its
//!   size, in the order the run first needs it, as a freshly booted machine
//!   hands out memory; a 16M heap of 4K pages is then 16M of consecutive
//!   frames.
//! - **scattered**: as Linux's buddy allocator hands out small frames on a
//!   machine that has run for a while. On this development machine (a
//!   24G VM, up for hours), the 4096 frames of a 16M heap touched with 4K
//!   pages lay in 987 and 992 different 2M blocks, 4079 and 4092 runs of
//!   consecutive frames (`/proc/self/pagemap`, docs/cost.md): no two
//!   neighbours in a row. Frames smaller than `LARGE` are drawn from a fixed
//!   pseudo-random permutation of the memory's 4K frames (aligned down to
//!   their size, skipping those already taken); frames of `LARGE` and more
//!   (a 2M or 1G page) are whole free blocks, taken from the top of memory
//!   down, since Linux finds those only where a block is entirely free.
//!   Nothing is tuned: the permutation is a fixed bijective mix, the same in
//!   every run.

use rustc_hash::{FxHashMap, FxHashSet};

/// How frames are placed in physical memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// One after the other, in the order of first touches.
    #[default]
    FirstTouch,
    /// Small frames scattered over `memory` bytes, large ones from its top.
    Scattered {
        /// Bytes of physical memory the frames are scattered over.
        memory: u64,
        /// Of the small frames, the share (in [`NEIGHBOURS_ONE`]ths) that lie right above
        /// the one placed before, where it is free: the measured share of a process's
        /// consecutive pages on neighbouring frames (0: every frame drawn anew).
        neighbours: u32,
    },
}

/// [`Placement::Scattered`]'s `neighbours` of 1: every small frame right above the last.
pub const NEIGHBOURS_ONE: u32 = 1 << 16;

impl Placement {
    /// Small frames scattered over `memory` bytes, none placed next to the last on purpose.
    pub fn scattered(memory: u64) -> Placement {
        Placement::Scattered {
            memory,
            neighbours: 0,
        }
    }
}

/// The smallest frame placed as a whole free block rather than scattered.
pub(crate) const LARGE: u64 = 2 << 20;
/// The unit the scattered placement permutes.
const UNIT_SHIFT: u32 = 12;

/// The physical memory of one run: where each of its frames lies.
#[derive(Clone, Debug, Default)]
pub struct Frames {
    /// The next free address of the first-touch placement (with `scatter`,
    /// of the overflow above its memory).
    next: u64,
    pages: FxHashMap<u64, u64>,
    tables: FxHashMap<(u8, u64), u64>,
    scatter: Option<Box<Scatter>>,
}

impl Frames {
    /// Empty memory whose first frame is at `base`, handed out in the order
    /// of first touches.
    pub fn new(base: u64) -> Frames {
        Self::placed(base, Placement::FirstTouch)
    }

    /// Empty memory from `base` on, placed by `placement`.
    pub fn placed(base: u64, placement: Placement) -> Frames {
        match placement {
            Placement::FirstTouch => Frames {
                next: base,
                ..Frames::default()
            },
            Placement::Scattered { memory, neighbours } => Frames {
                // A run that needs more than the memory goes on above it.
                next: base + memory,
                scatter: Some(Box::new(Scatter::new(base, memory, neighbours))),
                ..Frames::default()
            },
        }
    }

    fn alloc(&mut self, bytes: u64) -> u64 {
        let bytes = bytes.max(1).next_power_of_two();
        if let Some(at) = self.scatter.as_mut().and_then(|s| s.alloc(bytes)) {
            return at;
        }
        let at = self.next.next_multiple_of(bytes);
        self.next = at + bytes;
        at
    }

    /// The physical address of page `vpn` of `2^shift` bytes, given a frame
    /// at its first touch.
    #[inline]
    pub fn page(&mut self, vpn: u64, shift: u32) -> u64 {
        if let Some(&p) = self.pages.get(&vpn) {
            return p;
        }
        let p = self.alloc(1 << shift);
        self.pages.insert(vpn, p);
        p
    }

    /// The physical address of the table at `level` that holds `va`'s entry.
    fn table(&mut self, layout: &crate::TableLayout, level: u8, va: u64) -> u64 {
        let i = level as usize - 1;
        let key = (level, va >> (layout.entry_shift[i] + layout.bits[i]));
        if let Some(&p) = self.tables.get(&key) {
            return p;
        }
        let p = self.alloc((layout.entry_bytes as u64) << layout.bits[i]);
        self.tables.insert(key, p);
        p
    }

    /// The physical address of `va`'s entry at `level`.
    pub fn entry(&mut self, layout: &crate::TableLayout, level: u8, va: u64) -> u64 {
        let i = level as usize - 1;
        let index = (va >> layout.entry_shift[i]) & ((1 << layout.bits[i]) - 1);
        self.table(layout, level, va) + index * layout.entry_bytes as u64
    }

    /// Page tables allocated so far.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }
}

/// A fixed bijection of `[0, 2^bits)` (`bits` from 1 to 64): each step (an odd multiply,
/// an xor-shift, an add, all modulo `2^bits`) is one.
fn mix(mut x: u64, bits: u32) -> u64 {
    let mask = u64::MAX >> (64 - bits);
    let half = bits.div_ceil(2);
    for k in [
        0x9e37_79b9_7f4a_7c15u64,
        0xbf58_476d_1ce4_e5b9,
        0x94d0_49bb_1331_11eb,
    ] {
        x = x.wrapping_mul(k | 1) & mask;
        x ^= x >> half;
        x = x.wrapping_add(k >> 7) & mask;
    }
    x
}

/// The scattered placement's state.
#[derive(Clone, Debug)]
struct Scatter {
    base: u64,
    /// 4K frames in the memory.
    units: u64,
    /// log2 of the permutation's domain (the power of two at or above `units`).
    bits: u32,
    /// The next index of the permutation to try.
    next: u64,
    /// Large frames take memory from here down.
    low: u64,
    /// 4K frames taken by small frames.
    taken: FxHashSet<u64>,
    /// Small frames' 4K frames in each `LARGE` block, which a large frame
    /// must avoid.
    in_block: FxHashMap<u64, u32>,
    /// [`Placement::Scattered`]'s `neighbours`, and the small frames placed so far (which
    /// draws whether the next one goes right above the last).
    neighbours: u32,
    placed: u64,
    /// The unit after the last small frame's end.
    after_last: u64,
}

impl Scatter {
    fn new(base: u64, memory: u64, neighbours: u32) -> Scatter {
        let units = (memory >> UNIT_SHIFT).max(1);
        Scatter {
            neighbours: neighbours.min(NEIGHBOURS_ONE),
            placed: 0,
            after_last: u64::MAX,
            base,
            units,
            bits: units.next_power_of_two().trailing_zeros().max(1),
            next: 0,
            low: base + (units << UNIT_SHIFT),
            taken: FxHashSet::default(),
            in_block: FxHashMap::default(),
        }
    }

    /// The permutation of `[0, units)` (cycle-walking the bijection until it
    /// lands inside).
    fn permuted(&self, i: u64) -> u64 {
        let mut x = mix(i, self.bits);
        while x >= self.units {
            x = mix(x, self.bits);
        }
        x
    }

    /// A frame of `bytes` (a power of two), or None when the memory has no
    /// room left for it (the caller places it above the memory).
    fn alloc(&mut self, bytes: u64) -> Option<u64> {
        if bytes >= LARGE {
            return self.large(bytes);
        }
        let n = (bytes >> UNIT_SHIFT).max(1);
        let top = (self.low - self.base) >> UNIT_SHIFT;
        // A fixed draw per frame: the low 16 bits of the mixed count, uniform enough.
        let draw = (mix(self.placed, 64) & u64::from(NEIGHBOURS_ONE - 1)) as u32;
        self.placed += 1;
        let next = self.after_last;
        if draw < self.neighbours
            && next.is_multiple_of(n)
            && next.checked_add(n).is_some_and(|end| end <= top)
            && (next..next + n).all(|u| !self.taken.contains(&u))
        {
            return Some(self.take(next, n));
        }
        while self.next < self.units {
            let i = self.permuted(self.next) & !(n - 1);
            // Every index once: `next` counts the tries.
            self.next += 1;
            if i + n > top || (i..i + n).any(|u| self.taken.contains(&u)) {
                continue;
            }
            return Some(self.take(i, n));
        }
        None
    }

    /// Takes the `n` units from `i`; returns their address.
    fn take(&mut self, i: u64, n: u64) -> u64 {
        for u in i..i + n {
            self.taken.insert(u);
            *self.in_block.entry(self.block(u)).or_default() += 1;
        }
        self.after_last = i + n;
        self.base + (i << UNIT_SHIFT)
    }

    fn block(&self, unit: u64) -> u64 {
        (unit << UNIT_SHIFT) / LARGE
    }

    /// A whole free block of `bytes`, the highest below the last one.
    fn large(&mut self, bytes: u64) -> Option<u64> {
        let mut at = (self.low - self.base) / bytes * bytes;
        loop {
            at = at.checked_sub(bytes)?;
            let blocks = at / LARGE..(at + bytes) / LARGE;
            if blocks.clone().all(|b| !self.in_block.contains_key(&b)) {
                self.low = self.base + at;
                return Some(self.low);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_a_permutation() {
        for bits in [1, 2, 5, 12] {
            let mut seen: Vec<u64> = (0..1u64 << bits).map(|i| mix(i, bits)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..1u64 << bits).collect::<Vec<_>>(), "{bits} bits");
        }
        let s = Scatter::new(0, 1000 << UNIT_SHIFT, 0);
        let mut seen: Vec<u64> = (0..1000).map(|i| s.permuted(i)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1000);
        assert!(seen.iter().all(|&x| x < 1000));
    }
}
