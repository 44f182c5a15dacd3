//! How many misses and how many page walks a core keeps in flight, measured: the
//! `[overlap]` of a machine file ([`pagelab_cache::overlap`] is what the model does with it).
//!
//! The model's two pools mean: a reference whose line comes from `L` cycles away takes a miss
//! buffer for `L` cycles, a walk of `W` cycles takes a walker for `W`, and independent
//! references start as soon as a slot is free. So with enough independent references the
//! time per reference is `L / buffers` (or `W / walkers`), where a dependent chase pays the
//! whole `L` (or `W`) each step. Both are measured here over the same lines in the same
//! random order, once dependent (each load's address is the last one's value) and once
//! independent (the addresses come from a counter through a bijective hash, so no load waits
//! for another):
//!
//! - **misses in flight:** lines on 2M-advised pages over a footprint far beyond the last
//!   level, so that each load is a memory miss and no walk: the dependent time over the
//!   independent one;
//! - **walks in flight:** one line in each of many 4K pages (far more than any TLB holds,
//!   while the lines and the page-table entries fit in the L2), then the same on 2M-advised
//!   pages (no walk). The walk's latency is the dependent 4K time less the 2M one; the time
//!   it adds to an independent reference is the independent 4K time less the 2M one; their
//!   ratio is the walks under way at once.
//!
//! Each line is at a different offset in its slot (a colour, `(i * 37) mod (spacing / 64)`
//! lines), so that lines one per page do not all fall into a few cache sets.

use crate::native::Advice;
use anyhow::{bail, Result};

/// `count` 64-byte lines, line `i` in the `spacing`-byte slot `i` at its colour's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lines {
    /// Lines, a power of two (the independent loop's hash is a bijection on that many).
    pub count: u64,
    /// Bytes from one line's slot to the next, a power of two of at least 64 (so that the
    /// colour is a mask, not a division, in the timed loop).
    pub spacing: u64,
}

impl Lines {
    fn check(&self) -> Result<()> {
        if !self.count.is_power_of_two() || self.count < 2 {
            bail!(
                "{} lines: the count must be a power of two, at least 2",
                self.count
            );
        }
        if self.spacing < 64 || !self.spacing.is_power_of_two() {
            bail!(
                "a spacing of {} bytes: write a power of two, at least 64",
                self.spacing
            );
        }
        Ok(())
    }

    /// The byte offset of line `i` in the region.
    fn offset(&self, i: u64) -> usize {
        let colours = self.spacing / 64;
        (i * self.spacing + ((i * 37) & (colours - 1)) * 64) as usize
    }

    /// Line `i`'s place in the visiting order: a bijection on `0..count`
    /// (multiply by an odd number, fold the high half down, multiply again, all mod count).
    #[inline(always)]
    fn order(i: u64, mask: u64, half: u32) -> u64 {
        let mut h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask;
        h ^= h >> half;
        h.wrapping_mul(0xbf58_476d_1ce4_e5b9) & mask
    }

    /// Maps the lines advised as `advice`, first-touches them, and times `chunks`
    /// stretches of `steps / chunks` loads, `independent` or each on the last; returns each
    /// stretch's ns per load and the first touch's minor faults.
    ///
    /// # Errors
    /// Bad lines ([`Lines::count`], [`Lines::spacing`]) or a region that cannot be mapped.
    pub fn time(
        &self,
        advice: Advice,
        steps: u64,
        chunks: u64,
        independent: bool,
    ) -> Result<(Vec<f64>, f64)> {
        self.check()?;
        let bytes = self
            .count
            .checked_mul(self.spacing)
            .filter(|&b| usize::try_from(b).is_ok())
            .ok_or_else(|| anyhow::anyhow!("{self:?} does not fit the address space"))?;
        let mut m = crate::native::Metrics::new();
        let mut region = crate::native::first_touch(bytes, advice, &mut m, |r| {
            r.as_mut_slice::<u64>().fill(0);
        })?;
        let base = region.as_mut_ptr() as usize;
        let (mask, half) = (self.count - 1, self.count.trailing_zeros().div_ceil(2));
        // The dependent cycle visits the lines in the independent loop's order.
        {
            let words = region.as_mut_slice::<usize>();
            let mut from = self.offset(Self::order(0, mask, half));
            for i in 1..=self.count {
                let to = self.offset(Self::order(i & mask, mask, half));
                words[from / 8] = base + to;
                from = to;
            }
        }
        let per = (steps / chunks.max(1)).max(1);
        let mut out = Vec::with_capacity(chunks as usize);
        let mut p = base + self.offset(Self::order(0, mask, half));
        let mut sum = 0usize;
        let mut i = 0u64;
        for _ in 0..chunks.max(1) {
            let t = std::time::Instant::now();
            if independent {
                for _ in 0..per {
                    let at = base + self.offset(Self::order(i & mask, mask, half));
                    // SAFETY: `offset` of a line below `count` lies inside the region,
                    // 8-aligned, and every word of the region was written.
                    sum = sum.wrapping_add(unsafe { std::ptr::read_volatile(at as *const usize) });
                    i += 1;
                }
            } else {
                for _ in 0..per {
                    // SAFETY: every line's first word holds the address of a line's first
                    // word inside the region (written above), and p starts at one.
                    p = unsafe { std::ptr::read_volatile(p as *const usize) };
                }
            }
            out.push(t.elapsed().as_nanos() as f64 / per as f64);
        }
        std::hint::black_box((p, sum));
        drop(region);
        Ok((out, m["first_touch_faults"]))
    }
}

/// Pages of the walk measurement: 16K 4K pages (64M) are eight times the largest L2 TLB
/// of 2K entries, while their lines (1M) and page-table entries (128K) fit an L2 of 2M.
pub const WALK_PAGES: u64 = 16 << 10;

/// What [`overlap`] measured, ns per load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverlapProbe {
    /// Bytes of the memory measurement's footprint.
    pub memory_bytes: u64,
    /// Memory lines on 2M-advised pages: dependent, independent.
    pub memory: (f64, f64),
    /// Whether those got 2M pages.
    pub memory_huge: bool,
    /// One line per 4K of [`WALK_PAGES`] pages on 4K pages: dependent, independent.
    pub walk_base: (f64, f64),
    /// The same lines on 2M-advised pages: dependent, independent.
    pub walk_huge: (f64, f64),
    /// Whether those got 2M pages.
    pub walk_huge_ok: bool,
}

impl OverlapProbe {
    /// Misses in flight: the dependent memory time over the independent one.
    pub fn misses_in_flight(&self) -> f64 {
        self.memory.0 / self.memory.1
    }

    /// Walks in flight: the walk's latency (dependent, 4K less 2M) over the time it adds to
    /// an independent load (independent, 4K less 2M); `None` where either is not positive
    /// (no walk showed, or the walks hid entirely).
    pub fn walks_in_flight(&self) -> Option<f64> {
        let walk = self.walk_base.0 - self.walk_huge.0;
        let added = self.walk_base.1 - self.walk_huge.1;
        (walk > 0.0 && added > 0.0).then(|| walk / added)
    }
}

/// The 10th percentile of the stretches of `repeat` runs, and the fewest faults.
fn timed(
    l: Lines,
    advice: Advice,
    steps: u64,
    repeat: u32,
    independent: bool,
) -> Result<(f64, f64)> {
    super::tenth_percentile(repeat, || l.time(advice, steps, super::CHUNKS, independent))
}

/// Dependent and independent times of `l`, and whether a 2M-advised run got huge pages (a
/// fault per 16 base pages or fewer).
fn pair(l: Lines, advice: Advice, steps: u64, repeat: u32) -> Result<((f64, f64), bool)> {
    let (dep, faults) = timed(l, advice, steps, repeat, false)?;
    let (ind, _) = timed(l, advice, steps, repeat, true)?;
    let pages = (l.count * l.spacing).div_ceil(4096) as f64;
    Ok(((dep, ind), faults * 16.0 < pages))
}

/// Measures misses and walks in flight; `memory_bytes` is the memory measurement's
/// footprint (rounded down to a power of two of lines), `steps` the loads of each run.
///
/// # Errors
/// A footprint under 2 lines, or a region that cannot be mapped.
pub fn overlap(memory_bytes: u64, steps: u64, repeat: u32) -> Result<OverlapProbe> {
    let lines = memory_bytes / 64;
    if lines < 2 {
        bail!("a memory footprint of {memory_bytes} bytes has fewer than 2 lines");
    }
    let memory = Lines {
        count: 1 << lines.ilog2(),
        spacing: 64,
    };
    let walk = Lines {
        count: WALK_PAGES,
        spacing: 4096,
    };
    let (mem, memory_huge) = pair(memory, Advice::HugePage, steps, repeat)?;
    let (walk_base, _) = pair(walk, Advice::NoHugePage, steps, repeat)?;
    let (walk_huge, walk_huge_ok) = pair(walk, Advice::HugePage, steps, repeat)?;
    Ok(OverlapProbe {
        memory_bytes: memory.count * 64,
        memory: mem,
        memory_huge,
        walk_base,
        walk_huge,
        walk_huge_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_a_bijection_and_the_colours_spread_the_lines() {
        for count in [2u64, 8, 1024, 1 << 15] {
            let (mask, half) = (count - 1, count.trailing_zeros().div_ceil(2));
            let mut seen = vec![false; count as usize];
            for i in 0..count {
                let o = Lines::order(i, mask, half);
                assert!(
                    !std::mem::replace(&mut seen[o as usize], true),
                    "{count}: {i}"
                );
            }
        }
        let l = Lines {
            count: 64,
            spacing: 4096,
        };
        let mut sets: Vec<usize> = (0..64).map(|i| l.offset(i) % 4096 / 64).collect();
        sets.sort_unstable();
        sets.dedup();
        assert_eq!(sets.len(), 64, "one line per page, each at another offset");
        assert!((0..64).all(|i| l.offset(i) / 4096 == i as usize));
    }

    #[test]
    fn bad_lines_are_errors() {
        let bad = Lines {
            count: 3,
            spacing: 64,
        };
        assert!(bad
            .time(Advice::None, 10, 1, true)
            .unwrap_err()
            .to_string()
            .contains("power of two"));
        let bad = Lines {
            count: 4,
            spacing: 100,
        };
        assert!(bad
            .time(Advice::None, 10, 1, false)
            .unwrap_err()
            .to_string()
            .contains("power of two, at least 64"));
    }

    #[test]
    fn independent_loads_are_not_slower_than_dependent_ones_beyond_the_caches() {
        // 64M of lines: on any machine past its caches, where independent loads overlap.
        let l = Lines {
            count: 1 << 20,
            spacing: 64,
        };
        let ((dep, ind), _) = pair(l, Advice::HugePage, 200_000, 1).unwrap();
        assert!(dep > 0.0 && ind > 0.0);
        assert!(ind < dep, "independent {ind} ns, dependent {dep} ns");
    }
}
