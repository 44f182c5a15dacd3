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
//!   while the lines and the page-table entries fit in half the L2: [`walk_pages`]), against the same number of
//!   lines packed 64 bytes apart on a 2M-advised page (no walk, and no more than an L2 TLB hit
//!   under nested paging: [`super::host_page`]). The walk's latency is the dependent 4K time
//!   less the packed one; the time it adds to an independent reference is the independent
//!   4K time less the packed one; their ratio is the walks under way at once. The 4K
//!   pages are drawn from a pool of as many 2M blocks as the spread lines below fall in
//!   ([`walk_pool`]), where a pool can be drawn (root, THP), so that the host's
//!   translations of the blocks do not count as the walk's.
//! - **the interval between walks:** where the host's pages are 4K, the same spread lines on
//!   2M-advised pages walk too, a short walk; the time each adds to an independent load,
//!   set against its latency, says whether walks also start no closer than some interval
//!   ([`OverlapProbe::walk_interval_ns`]).
//!
//! Each line is at a different offset in its slot (a colour, [`Lines::offset`]), so that
//! lines one per page do not all fall into a few cache sets.

use super::host_page::HostPageProbe;
use super::Rounds;
use crate::native::Advice;
use anyhow::{bail, Result};
use pagelab_workloads::{Order, Visit};
use std::cell::Cell;

/// `count` 64-byte lines, line `i` in the `spacing`-byte slot `i` at its colour's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lines {
    /// Lines, a power of two (the independent loop's hash is a bijection on that many).
    pub count: u64,
    /// Bytes from one line's slot to the next, a power of two of at least 64 (so that the
    /// colour is a mask, not a division, in the timed loop).
    pub spacing: u64,
    /// The order the loads visit the lines in: the random one, or address order.
    pub visit: Visit,
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

    /// The byte offset of line `i` in the region: [`pagelab_workloads::line_offset`], the
    /// colour `i / 32` (mod the slot's lines), so that the lines reach every set of an L2
    /// of 2048 sets over contiguous frames and spread at random over scattered ones; the
    /// model's `lines` workload places them alike. (Before session 32 the colour was
    /// `i * 37`, which over contiguous frames reaches only 64 sets.)
    pub(crate) fn offset(&self, i: u64) -> usize {
        pagelab_workloads::line_offset(i, self.spacing) as usize
    }

    /// Maps the lines advised as `advice`, first-touches them, and times `chunks`
    /// stretches of `steps / chunks` loads, `independent` or each on the last; returns each
    /// stretch's ns per load, the first touch's minor faults, and where the region's 4K
    /// frames lay (`None` where pagemap hides them: [`super::frames_of`]). With a `pool`
    /// (bytes of 2M blocks) and [`Advice::NoHugePage`], the 4K pages lie on frames drawn
    /// from the pool ([`crate::native::pool::pooled`], the same draw every run), and the
    /// faults include the pool's.
    ///
    /// # Errors
    /// Bad lines ([`Lines::count`], [`Lines::spacing`]), a pool that cannot be made, or a
    /// region that cannot be mapped.
    pub fn time(
        &self,
        advice: Advice,
        pool: Option<u64>,
        steps: u64,
        chunks: u64,
        independent: bool,
    ) -> Result<(Vec<f64>, f64, Option<super::FrameLayout>)> {
        self.check()?;
        let bytes = self
            .count
            .checked_mul(self.spacing)
            .filter(|&b| usize::try_from(b).is_ok())
            .ok_or_else(|| anyhow::anyhow!("{self:?} does not fit the address space"))?;
        let mut m = crate::native::Metrics::new();
        let mut region =
            crate::native::first_touch(bytes, advice, (pool, POOL_SEED), &mut m, |r| {
                r.as_mut_slice::<u64>().fill(0);
            })?;
        let base = region.as_mut_ptr() as usize;
        // Where the frames lay is a note on the timing, never a reason to lose it.
        let frames = super::frames_of(base as u64, bytes).ok().flatten();
        let mask = self.count - 1;
        // The same instructions in either order: only the order's constants differ.
        let order = std::hint::black_box(Order::new(self.visit, self.count));
        // The dependent cycle visits the lines in the independent loop's order.
        {
            let words = region.as_mut_slice::<usize>();
            let mut from = self.offset(order.at(0));
            for i in 1..=self.count {
                let to = self.offset(order.at(i & mask));
                words[from / 8] = base + to;
                from = to;
            }
        }
        let per = (steps / chunks.max(1)).max(1);
        let mut out = Vec::with_capacity(chunks as usize);
        let mut p = base + self.offset(order.at(0));
        let mut sum = 0usize;
        let mut i = 0u64;
        for _ in 0..chunks.max(1) {
            let t = std::time::Instant::now();
            if independent {
                for _ in 0..per {
                    let at = base + self.offset(order.at(i & mask));
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
        Ok((out, m["first_touch_faults"], frames))
    }
}

/// Pages of the walk measurement where the L2 is 2M or more (or not known): 16K 4K pages
/// (64M) are eight times an L2 TLB of 2K entries, while their lines (1M) and page-table
/// entries (128K) fit an L2 of 2M ([`walk_pages`]).
pub const WALK_PAGES: u64 = 16 << 10;

/// The fewest pages [`walk_pages`] gives: more than an L2 TLB of 3K entries.
pub const MIN_WALK_PAGES: u64 = 4 << 10;

/// Pages (and lines) of the walk and host-page measurements on a core whose L2 holds
/// `l2_bytes`: as many as half the L2 holds lines, a power of two from [`MIN_WALK_PAGES`]
/// to [`WALK_PAGES`]. The lines and the entries the walks read then stay in the L2 with
/// room to spare, under any replacement: where they filled it (16384 lines are exactly a
/// 1M L2, Zen 4's), which of them a load finds there would depend on the replacement
/// policy rather than on the translation being measured (docs/cost.md, session 33).
pub fn walk_pages(l2_bytes: Option<u64>) -> u64 {
    l2_bytes.map_or(WALK_PAGES, |b| {
        let lines = (b / 2 / 64).max(1);
        (1u64 << lines.ilog2()).clamp(MIN_WALK_PAGES, WALK_PAGES)
    })
}

/// How much more than their share of the walkers the short walks must add before an
/// interval is read from them ([`OverlapProbe::walk_interval_ns`]): each count of walks in
/// flight is a ratio of two differences of a few ns, and on this project's Emerald Rapids
/// guest, idle, the two counts came out 4.1-5.4 and 4.3-4.9 in five of seven measurements,
/// either one the larger, and 4.5-5.1 against 7.4-7.5 in the other two (docs/cost.md,
/// session 41); under load (session 32) 4.1-5.0 against 6.8-10.9. The band of the
/// project's other verdicts.
pub const INTERVAL_MARGIN: f64 = 1.25;

/// What [`overlap`] measured, ns per load.
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapProbe {
    /// Bytes of the memory measurement's footprint.
    pub memory_bytes: u64,
    /// Memory lines on 2M-advised pages: dependent, independent.
    pub memory: (f64, f64),
    /// Whether those got 2M pages.
    pub memory_huge: bool,
    /// Pages (one line each) of the walk and host-page measurements ([`walk_pages`]).
    pub walk_pages: u64,
    /// One line per 4K of [`OverlapProbe::walk_pages`] pages on 4K pages: dependent,
    /// independent.
    pub walk_base: (f64, f64),
    /// The bytes of 2M blocks the walk measurement's 4K frames were drawn from
    /// ([`walk_pool`]), or why they were left to the kernel's allocator.
    pub walk_pool: std::result::Result<u64, String>,
    /// Where the walk measurement's 4K frames lay (`None` where pagemap hides frame
    /// numbers): how the model of the probe's loads places them.
    pub walk_frames: Option<super::FrameLayout>,
    /// Where the kernel's allocator put the 4K frames of as many pages, as a program gets
    /// them (the in-order lines' first touch, never pooled): the machine file's `[frames]`.
    pub frames: Option<super::FrameLayout>,
    /// The same number of lines on 2M-advised pages, spread and packed (the baseline).
    pub host: HostPageProbe,
    /// The walk measurement's lines visited in address order ([`Visit::Sequential`]), one
    /// per 4K: on 4K pages, then on 2M-advised ones, each (dependent, independent). Nothing
    /// is derived from them: they hold the model to walks whose page-table lines are shared
    /// by neighbouring pages and to loads the machine's prefetchers can follow.
    pub sequential: [(f64, f64); 2],
    /// Each round's figures of the memory, walk and host-page measurements
    /// ([`OverlapRound`]), from which the counts in flight and the interval are read; empty
    /// where there is only the figures over all rounds (they then count as one round).
    pub rounds: Vec<OverlapRound>,
}

/// One round's figures ([`super::Rounds::run_by_round`]: each its 10th percentile of that
/// round's stretches), ns per load, each (dependent, independent): what the counts in flight
/// and the interval between walks are read from.
///
/// Each count is a ratio of two differences of a few ns, and the figures of one round share
/// the machine's speed in that round while those over all rounds may each come from another
/// round. Three `machines --measure` back to back on this project's Zen 3 guest, idle,
/// gave the splintered walks in flight 4.4, 14.3 and 7.4 read from the figures over all
/// rounds, and the interval verdict flipped with them (docs/cost.md, session 56). So each
/// round gives its own counts and verdict, and the measurement takes their median and the
/// verdict of most rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverlapRound {
    /// [`OverlapProbe::memory`]'s lines.
    pub memory: (f64, f64),
    /// [`OverlapProbe::walk_base`]'s lines.
    pub walk_base: (f64, f64),
    /// The host-page probe's spread lines ([`HostPageProbe::spread`]).
    pub spread: (f64, f64),
    /// The host-page probe's packed lines ([`HostPageProbe::packed`]).
    pub packed: (f64, f64),
}

impl OverlapRound {
    /// Long (4K) walks in flight in this round, as [`OverlapProbe::walks_in_flight`] reads
    /// them.
    pub fn long_walks(&self) -> Option<f64> {
        let walk = self.walk_base.0 - self.packed.0;
        let added = self.walk_base.1 - self.packed.1;
        (walk > 0.0 && added > 0.0).then(|| walk / added)
    }

    /// Splintered walks in flight in this round: what a translation adds to a dependent
    /// load of the spread lines over what it adds to an independent one.
    pub fn short_walks(&self) -> Option<f64> {
        let walk = self.spread.0 - self.packed.0;
        let added = self.spread.1 - self.packed.1;
        (walk > 0.0 && added > 0.0).then(|| walk / added)
    }

    /// The interval between walks this round shows ([`OverlapProbe::walk_interval_ns`]):
    /// what a splintered walk adds to an independent load, where the long walks in flight
    /// outnumber the splintered ones by more than [`INTERVAL_MARGIN`] times.
    pub fn interval_ns(&self) -> Option<f64> {
        let (short, long) = (self.short_walks()?, self.long_walks()?);
        (short * INTERVAL_MARGIN < long).then_some(self.spread.1 - self.packed.1)
    }
}

/// The median of the values where more than half of `per_round` have one, else `None`.
fn most_rounds(per_round: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut n = 0;
    let some: Vec<f64> = per_round
        .into_iter()
        .inspect(|_| n += 1)
        .flatten()
        .collect();
    if some.len() * 2 <= n {
        return None;
    }
    pagelab_report::Summary::of(&some).map(|s| s.median)
}

/// The pool the walk measurement's 4K pages are drawn from: the 2M blocks of their own
/// bytes, as many blocks as the host-page probe's spread lines (on 2M-advised pages) fall
/// in, so that the long walks and the splintered ones are set against each other over the
/// same blocks of guest memory.
///
/// Left to the kernel's allocator, the 16384 pages of one measurement fell in 37-48 2M
/// blocks and those of another in 843-1019 on this project's Emerald Rapids guest
/// (docs/cost.md, session 42), and where they fell in most the dependent walk took 42-54
/// ns against 23-27: the host's translations of those blocks, which the model keeps apart
/// (`[nested] block_entries`, fitted by the block probe), were counted as the walk's own,
/// and their overlap as more walks in flight (7.4-7.5 against 4.2-4.7), which set an
/// interval between walks that the strides measured alongside did not show.
pub fn walk_pool(walk_pages: u64) -> u64 {
    (walk_pages * 4096).next_multiple_of(2 << 20)
}

/// The seed of the walk measurement's draw from its pool: every run draws alike.
const POOL_SEED: u64 = 1;

impl OverlapProbe {
    /// The rounds the counts are read from: [`OverlapProbe::rounds`], or the figures over
    /// all rounds as one where there are none.
    pub fn each_round(&self) -> Vec<OverlapRound> {
        if !self.rounds.is_empty() {
            return self.rounds.clone();
        }
        vec![OverlapRound {
            memory: self.memory,
            walk_base: self.walk_base,
            spread: self.host.spread,
            packed: self.host.packed,
        }]
    }

    /// Misses in flight: the dependent memory time over the independent one, the median
    /// over the rounds.
    pub fn misses_in_flight(&self) -> f64 {
        most_rounds(
            self.each_round()
                .iter()
                .map(|r| Some(r.memory.0 / r.memory.1)),
        )
        .unwrap_or(self.memory.0 / self.memory.1)
    }

    /// Walks in flight: the walk's latency (dependent, 4K less packed) over the time it
    /// adds to an independent load (independent, 4K less packed), each round's, their median
    /// over the rounds that have one ([`OverlapRound`]); `None` where the packed lines got no
    /// 2M page, or where in most rounds either difference is not positive (no walk showed,
    /// or the walks hid entirely).
    pub fn walks_in_flight(&self) -> Option<f64> {
        if !self.host.huge_ok {
            return None;
        }
        most_rounds(self.each_round().iter().map(OverlapRound::long_walks))
    }

    /// Splintered walks in flight (a guest's 2M pages over 4K host pages), read as
    /// [`HostPageProbe::walks_in_flight`] reads them, from each round, their median over the
    /// rounds that have one; `None` where the host's pages are not 4K
    /// ([`HostPageProbe::host_page`], over all rounds) or most rounds show no such walk.
    pub fn short_walks_in_flight(&self) -> Option<f64> {
        if self.host.host_page() != Some(pagelab_core::PageSize::K4) {
            return None;
        }
        most_rounds(self.each_round().iter().map(OverlapRound::short_walks))
    }

    /// The least time from one walk's start to the next one's, ns, where it shows: the
    /// short walks of a guest's 2M pages splintered over 4K host pages each add this much
    /// to an independent load where fewer of them are in flight than of the long 4K walks:
    /// more than [`INTERVAL_MARGIN`] times their share of the walkers. Decided in each round
    /// ([`OverlapRound`]); the interval shows where it shows in most rounds, their median.
    /// `None` where the host's pages are not 4K (no short walks to measure) or the short
    /// walks took no more than that in most rounds.
    pub fn walk_interval_ns(&self) -> Option<f64> {
        if self.host.host_page() != Some(pagelab_core::PageSize::K4) || !self.host.huge_ok {
            return None;
        }
        most_rounds(self.each_round().iter().map(OverlapRound::interval_ns))
    }
}

/// Adds the dependent and the independent runs of `l`, advised as `advice` (its 4K pages
/// drawn from `pool`, where given: [`Lines::time`]), to `rounds`, and returns the dependent
/// figure's index (the independent one's is next); the dependent runs record where their
/// frames lay in `frames`, when given (the last run's counts).
pub(crate) fn add_pair<'a>(
    rounds: &mut Rounds<'a>,
    l: Lines,
    (advice, pool): (Advice, Option<u64>),
    steps: u64,
    frames: Option<&'a Cell<Option<super::FrameLayout>>>,
) -> usize {
    let dependent = rounds.add(move || {
        let (ns, faults, f) = l.time(advice, pool, steps, super::CHUNKS, false)?;
        if let Some(c) = frames {
            c.set(f);
        }
        Ok((ns, faults))
    });
    rounds.add(move || {
        l.time(advice, pool, steps, super::CHUNKS, true)
            .map(|(ns, faults, _)| (ns, faults))
    });
    dependent
}

/// The dependent and independent times of the pair [`add_pair`] added at `at`, and whether
/// its 2M-advised runs got huge pages (a fault per 16 base pages or fewer).
pub(crate) fn pair_of(times: &[(f64, f64)], at: usize, l: Lines) -> ((f64, f64), bool) {
    let pages = (l.count * l.spacing).div_ceil(4096) as f64;
    ((times[at].0, times[at + 1].0), times[at].1 * 16.0 < pages)
}

/// Measures misses and walks in flight; `memory_bytes` is the memory measurement's
/// footprint (rounded down to a power of two of lines), `walk_pages` the pages of the walk
/// measurements ([`walk_pages`]), `steps` the loads of each run, `repeat` the runs of each
/// figure, taken in [`Rounds`]; `progress(done, total)` after each run.
///
/// # Errors
/// A footprint under 2 lines, or a region that cannot be mapped.
pub fn overlap(
    memory_bytes: u64,
    walk_pages: u64,
    steps: u64,
    repeat: u32,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<OverlapProbe> {
    let lines = memory_bytes / 64;
    if lines < 2 {
        bail!("a memory footprint of {memory_bytes} bytes has fewer than 2 lines");
    }
    let memory = Lines {
        count: 1 << lines.ilog2(),
        spacing: 64,
        visit: Visit::Random,
    };
    let walk = Lines {
        count: walk_pages,
        spacing: 4096,
        visit: Visit::Random,
    };
    let in_order = Lines {
        visit: Visit::Sequential,
        ..walk
    };
    // Whether a pool can be drawn from here (root for pagemap, THP to collapse it): tried
    // once with the measurement's own size, so that no round fails on it.
    let pool_bytes = walk_pool(walk_pages);
    let walk_pool = crate::native::pool::pooled(walk.count * walk.spacing, pool_bytes, POOL_SEED)
        .map(|_| pool_bytes)
        .map_err(|e| format!("{e:#}"));
    let walk_frames = Cell::new(None);
    let frames = Cell::new(None);
    let mut rounds = Rounds::default();
    let mem_at = add_pair(&mut rounds, memory, (Advice::HugePage, None), steps, None);
    let walk_at = add_pair(
        &mut rounds,
        walk,
        (Advice::NoHugePage, walk_pool.as_ref().ok().copied()),
        steps,
        Some(&walk_frames),
    );
    let host_at = super::host_page::add(&mut rounds, walk_pages, steps);
    let small_at = add_pair(
        &mut rounds,
        in_order,
        (Advice::NoHugePage, None),
        steps,
        Some(&frames),
    );
    let large_at = add_pair(&mut rounds, in_order, (Advice::HugePage, None), steps, None);
    let (times, each) = rounds.run_by_round(repeat, progress)?;
    let (mem, memory_huge) = pair_of(&times, mem_at, memory);
    let rounds = each
        .iter()
        .map(|t| {
            let host = super::host_page::of(t, host_at, walk_pages);
            OverlapRound {
                memory: pair_of(t, mem_at, memory).0,
                walk_base: pair_of(t, walk_at, walk).0,
                spread: host.spread,
                packed: host.packed,
            }
        })
        .collect();
    Ok(OverlapProbe {
        memory_bytes: memory.count * 64,
        memory: mem,
        memory_huge,
        walk_pages,
        walk_base: pair_of(&times, walk_at, walk).0,
        walk_pool,
        walk_frames: walk_frames.get(),
        frames: frames.get(),
        host: super::host_page::of(&times, host_at, walk_pages),
        sequential: [
            pair_of(&times, small_at, in_order).0,
            pair_of(&times, large_at, in_order).0,
        ],
        rounds,
    })
}

#[cfg(test)]
mod tests;
