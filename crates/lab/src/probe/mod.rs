//! `pagelab machines --measure`: the memory hierarchy as a dependent chase sees it.
//!
//! The `chase` kernel ([`crate::native`]) runs at footprints growing geometrically, each
//! twice: with its data advised `MADV_HUGEPAGE` (2M pages where THP allows it: its time is
//! then the caches' and memory's, the TLB holding every page) and `MADV_NOHUGEPAGE` (4K
//! pages: the difference is what a TLB miss's walk adds to a dependent load). Each run is
//! timed in stretches, and a figure is the 10th percentile of the stretches of `repeat`
//! runs, taken in rounds across the figures ([`Rounds`]), the thread pinned to the CPU it
//! started on. Nothing on
//! the machine is changed: no THP knob is written, so where THP is off the 2M runs get 4K
//! pages, and [`ProbePoint::huge`] says so.

pub mod blocks;
pub mod host_page;
pub mod overlap;

use crate::native::{Advice, Chase};
use anyhow::{bail, Context, Result};

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOptions {
    /// The smallest footprint, bytes.
    pub min: u64,
    /// The largest footprint, bytes.
    pub max: u64,
    /// Footprints per doubling.
    pub per_doubling: u32,
    /// Dependent steps timed in each run, in 64 stretches.
    pub steps: u64,
    /// Runs at each footprint and page size (their stretches are pooled).
    pub repeat: u32,
}

impl Default for ProbeOptions {
    /// 8K to 256M, four footprints a doubling, 1M steps, 3 runs: well under a minute idle.
    fn default() -> Self {
        ProbeOptions {
            min: 8 << 10,
            max: 256 << 20,
            per_doubling: 4,
            steps: 1 << 20,
            repeat: 3,
        }
    }
}

/// One footprint's times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbePoint {
    /// Bytes of 64-byte nodes in the cycle.
    pub bytes: u64,
    /// Nanoseconds per step with the data advised for huge pages.
    pub ns_huge: f64,
    /// Whether those runs got huge pages (their first touch faulted under one fault per
    /// 16 base pages; a footprint under 2M never does).
    pub huge: bool,
    /// Nanoseconds per step on base pages.
    pub ns_base: f64,
}

/// The footprints [`probe`] measures: `min` to `max` in `per_doubling` steps a doubling,
/// each a whole number of 64-byte nodes.
///
/// # Errors
/// A minimum under 1K, a maximum below the minimum, or no step per doubling.
pub fn footprints(o: &ProbeOptions) -> Result<Vec<u64>> {
    if o.min < 1024 || o.max < o.min || o.per_doubling == 0 || o.per_doubling > 64 {
        bail!(
            "footprints from {} to {} bytes, {} a doubling: the smallest must be at least 1K, \
             the largest at least the smallest, and 1 to 64 a doubling",
            o.min,
            o.max,
            o.per_doubling
        );
    }
    let step = 2f64.powf(1.0 / o.per_doubling as f64);
    let mut out: Vec<u64> = Vec::new();
    let mut b = o.min as f64;
    while b <= o.max as f64 * 1.0001 {
        let bytes = ((b / 64.0).round() as u64).max(1) * 64;
        if out.last() != Some(&bytes) {
            out.push(bytes);
        }
        b *= step;
    }
    Ok(out)
}

/// Stretches each chase or overlap measurement is timed in (see [`ProbeOptions::steps`]).
pub(crate) const CHUNKS: u64 = 64;

/// One run of the chase over `bytes`: its stretches' ns per step and its first touch's
/// faults.
fn chase_run(bytes: u64, o: &ProbeOptions, advice: Advice) -> Result<(Vec<f64>, f64)> {
    let k = Chase {
        nodes: bytes / 64,
        node: 64,
        steps: o.steps,
        seed: 1,
        pool: None,
    };
    k.time_chunks(advice, CHUNKS)
        .with_context(|| format!("running `{k}` ({advice})"))
}

/// One run of a figure: its stretches' times and its first touch's faults.
type Run<'a> = Box<dyn FnMut() -> Result<(Vec<f64>, f64)> + 'a>;

/// Figures timed in rounds: each round runs every figure once, in turn, and a figure is
/// the 10th percentile of the stretches of all its runs, with the fewest faults of a run
/// ([`Rounds::run`]).
///
/// The machine a guest gets changes speed from minute to minute (its clock, a neighbour on
/// the host's core): on this project's Emerald Rapids guest the L1's 5 cycles took 1.67 ns
/// in one measurement and 2.44 ns in the next, and the walks' and the packed lines' times
/// moved with it (docs/cost.md, session 41). Measured one figure after another, a slow
/// minute fell on some figures and not on others, and every difference of two of them (a
/// walk, a translation, the clock against memory) moved by as much. Taken in turn, each
/// figure has runs in every part of the measurement, and the 10th percentile of its
/// stretches is of the part where the machine ran fastest, as it is for every other figure.
#[derive(Default)]
pub(crate) struct Rounds<'a> {
    figures: Vec<Run<'a>>,
}

impl<'a> Rounds<'a> {
    /// Adds a figure; its index in [`Rounds::run`]'s result is the number of figures added
    /// before it.
    pub(crate) fn add(&mut self, run: impl FnMut() -> Result<(Vec<f64>, f64)> + 'a) -> usize {
        self.figures.push(Box::new(run));
        self.figures.len() - 1
    }

    /// Runs `repeat` rounds (at least one), `progress(done, total)` after each run; returns
    /// each figure's 10th percentile of stretches and fewest faults, in the order added.
    ///
    /// # Errors
    /// The first run that fails, or a figure whose runs timed no stretch.
    pub(crate) fn run(
        self,
        repeat: u32,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<(f64, f64)>> {
        self.run_by_round(repeat, progress).map(|(all, _)| all)
    }

    /// As [`Rounds::run`], and each round's figures too: in each, a figure's 10th percentile
    /// of that round's stretches, with the fewest faults of all its runs. A ratio of
    /// differences taken within each round is free of the machine's speed in that round,
    /// which the figures of one round share (see the type's doc).
    ///
    /// # Errors
    /// As [`Rounds::run`].
    pub(crate) fn run_by_round(
        mut self,
        repeat: u32,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<RoundTimes> {
        let n = self.figures.len();
        let total = n * repeat.max(1) as usize;
        let mut stretches: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut faults = vec![f64::INFINITY; n];
        let mut rounds = Vec::with_capacity(repeat.max(1) as usize);
        for round in 0..repeat.max(1) as usize {
            let mut this = Vec::with_capacity(n);
            for (i, run) in self.figures.iter_mut().enumerate() {
                let (ns, f) = run()?;
                this.push(tenth(ns.clone()));
                stretches[i].extend(ns);
                faults[i] = faults[i].min(f);
                progress(round * n + i + 1, total);
            }
            rounds.push(this);
        }
        let all = stretches
            .into_iter()
            .zip(&faults)
            .enumerate()
            .map(|(i, (all, &f))| {
                tenth(all)
                    .map(|t| (t, f))
                    .with_context(|| format!("figure {i} of the rounds timed no stretch"))
            })
            .collect::<Result<Vec<_>>>()?;
        // Every figure timed a stretch over the rounds; one that timed none in a round takes
        // its figure over them all there.
        let rounds = rounds
            .into_iter()
            .map(|this| {
                this.into_iter()
                    .zip(&all)
                    .map(|(t, &(pooled, f))| (t.unwrap_or(pooled), f))
                    .collect()
            })
            .collect();
        Ok((all, rounds))
    }
}

/// What [`Rounds::run_by_round`] returns: each figure's (ns, faults) over all the rounds,
/// then each round's.
pub(crate) type RoundTimes = (Vec<(f64, f64)>, Vec<Vec<(f64, f64)>>);

/// The 10th percentile of `stretches`, `None` where there are none.
fn tenth(mut stretches: Vec<f64>) -> Option<f64> {
    stretches.sort_by(f64::total_cmp);
    stretches.get(stretches.len() / 10).copied()
}

/// Runs the chase at every footprint, on both kinds of page, in [`Rounds`];
/// `progress(done, total)` after each run.
///
/// # Errors
/// Bad options ([`footprints`]), or a region that cannot be mapped.
pub fn probe(o: &ProbeOptions, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<ProbePoint>> {
    if o.repeat == 0 || o.steps == 0 {
        bail!("--repeat and the steps must be at least 1");
    }
    let sizes = footprints(o)?;
    // A failure to pin only makes the figures noisier.
    let _pinned = pagelab_sys::process::Pinned::here().ok();
    let mut rounds = Rounds::default();
    for &bytes in &sizes {
        for advice in [Advice::HugePage, Advice::NoHugePage] {
            rounds.add(move || chase_run(bytes, o, advice));
        }
    }
    let times = rounds.run(o.repeat, progress)?;
    Ok(sizes
        .iter()
        .zip(times.chunks_exact(2))
        .map(|(&bytes, t)| {
            let ((ns_huge, faults), (ns_base, _)) = (t[0], t[1]);
            ProbePoint {
                bytes,
                ns_huge,
                huge: bytes < 2 << 20 || faults * 16.0 < bytes.div_ceil(4096) as f64,
                ns_base,
            }
        })
        .collect())
}

/// How the 4K frames of a region lie ([`frames_of`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameLayout {
    /// The share of consecutive pages on neighbouring frames ([`neighbour_share`]).
    pub neighbours: f64,
    /// Bytes from the lowest frame to the end of the highest.
    pub span: u64,
    /// The 2M blocks the frames fall in.
    pub blocks: u64,
}

/// Where the touched 4K pages of the `bytes` from `start` (page-aligned) lie, read from
/// `/proc/self/pagemap`; `None` where pagemap hides frame numbers (not root) or fewer than
/// two pages are present.
///
/// # Errors
/// When pagemap cannot be read.
pub fn frames_of(start: u64, bytes: u64) -> Result<Option<FrameLayout>> {
    use std::os::unix::fs::FileExt;
    let pages = (bytes / 4096) as usize;
    let pagemap =
        std::fs::File::open("/proc/self/pagemap").context("opening /proc/self/pagemap")?;
    let mut buf = vec![0u8; pages * 8];
    pagemap
        .read_exact_at(&mut buf, start / 4096 * 8)
        .context("reading /proc/self/pagemap")?;
    // Bit 63: present; bits 0-54: the frame (zero when hidden from a non-root reader).
    let pfns: Vec<u64> = buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .map(|e| if e >> 63 == 1 { e & ((1 << 55) - 1) } else { 0 })
        .collect();
    let known: Vec<u64> = pfns.iter().copied().filter(|&f| f != 0).collect();
    let (Some(lo), Some(hi)) = (known.iter().min(), known.iter().max()) else {
        return Ok(None);
    };
    if pages < 2 {
        return Ok(None);
    }
    let blocks: std::collections::HashSet<u64> = known.iter().map(|f| f >> 9).collect();
    Ok(Some(FrameLayout {
        neighbours: neighbour_share(&pfns),
        span: (hi - lo + 1) * 4096,
        blocks: blocks.len() as u64,
    }))
}

/// Of consecutive pages' frames `pfns` (0: not known), the share of pairs whose frames are
/// neighbours, one above or one below the other. Both count: Linux's per-CPU lists hand a
/// process the pages another just freed last-in first-out, so a region touched in order
/// after a large free gets its frames in descending order, as contiguous as ascending ones
/// for the cache sets and the page-table lines they fall into (on this project's Zen 4
/// guest, session 33, 64M touched after 256M were freed: 16314 of 16383 pairs one frame
/// below, none one above). Before session 33 only ascending pairs counted, which called
/// such frames scattered.
pub fn neighbour_share(pfns: &[u64]) -> f64 {
    if pfns.len() < 2 {
        return 0.0;
    }
    let near = pfns
        .windows(2)
        .filter(|w| w[0] != 0 && w[1] != 0 && w[0].abs_diff(w[1]) == 1)
        .count();
    near as f64 / (pfns.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_either_order_are_neighbours_and_scattered_ones_not() {
        let up: Vec<u64> = (1000..1100).collect();
        let down: Vec<u64> = (1000..1100).rev().collect();
        assert_eq!(neighbour_share(&up), 1.0);
        assert_eq!(neighbour_share(&down), 1.0);
        // Every other pair a jump, and unknown frames (0) never count.
        let jumps: Vec<u64> = (0..100u64).map(|i| 5000 + (i / 2) * 64 + i % 2).collect();
        assert!((neighbour_share(&jumps) - 50.0 / 99.0).abs() < 1e-12);
        assert_eq!(neighbour_share(&[0, 1, 0, 1]), 0.0);
        let scattered: Vec<u64> = (0..100u64).map(|i| (i * 7919) % 100_003 + 1).collect();
        assert_eq!(neighbour_share(&scattered), 0.0);
        assert_eq!(neighbour_share(&[7]), 0.0);
    }

    #[test]
    fn rounds_take_the_figures_in_turn_and_pool_each_ones_stretches() {
        let order = std::cell::RefCell::new(Vec::new());
        let mut rounds = Rounds::default();
        let mut calls = [0u32; 2];
        let [a, b] = &mut calls;
        let order_ref = &order;
        let first = rounds.add(move || {
            *a += 1;
            order_ref.borrow_mut().push('a');
            // Ten stretches a run: 1..=10 in the first, 11..=20 in the second.
            let from = (*a - 1) as f64 * 10.0;
            Ok((
                (1..=10).map(|x| from + x as f64).collect(),
                10.0 - *a as f64,
            ))
        });
        let second = rounds.add(move || {
            *b += 1;
            order_ref.borrow_mut().push('b');
            Ok((vec![100.0 * *b as f64], 7.0))
        });
        assert_eq!((first, second), (0, 1));
        let mut seen = Vec::new();
        let got = rounds
            .run(2, &mut |done, total| seen.push((done, total)))
            .unwrap();
        assert_eq!(
            order.into_inner(),
            vec!['a', 'b', 'a', 'b'],
            "in turn, a round at a time"
        );
        assert_eq!(seen, vec![(1, 4), (2, 4), (3, 4), (4, 4)]);
        // The 20 pooled stretches' 10th percentile is the third smallest; the fewest faults
        // of a run are the second run's.
        assert_eq!(got[0], (3.0, 8.0));
        assert_eq!(got[1], (100.0, 7.0));
        assert_eq!(calls, [2, 2]);
        // A failing run ends the measurement with its error.
        let mut bad = Rounds::default();
        bad.add(|| anyhow::bail!("no region"));
        let e = bad.run(3, &mut |_, _| {}).unwrap_err();
        assert_eq!(e.to_string(), "no region");
        // A figure that timed nothing is an error, not a figure.
        let mut empty = Rounds::default();
        empty.add(|| Ok((Vec::new(), 0.0)));
        let e = empty.run(2, &mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("no stretch"), "{e}");
    }

    #[test]
    fn each_rounds_figures_are_its_own_stretches_tenth_percentile() {
        let mut rounds = Rounds::default();
        let mut calls = [0u32; 2];
        let [a, b] = &mut calls;
        rounds.add(move || {
            *a += 1;
            // Ten stretches a run: 1..=10 in the first round, 11..=20 in the second.
            let from = (*a - 1) as f64 * 10.0;
            Ok((
                (1..=10).map(|x| from + x as f64).collect(),
                10.0 - *a as f64,
            ))
        });
        rounds.add(move || {
            *b += 1;
            // Nothing timed in the first round: it takes the figure over both.
            Ok((if *b == 1 { Vec::new() } else { vec![100.0] }, 7.0))
        });
        let (all, each) = rounds.run_by_round(2, &mut |_, _| {}).unwrap();
        assert_eq!(all, vec![(3.0, 8.0), (100.0, 7.0)]);
        // A round's 10th percentile of its own ten stretches is its second smallest; the
        // faults are the fewest over all the runs.
        assert_eq!(
            each,
            vec![
                vec![(2.0, 8.0), (100.0, 7.0)],
                vec![(12.0, 8.0), (100.0, 7.0)]
            ]
        );
    }

    #[test]
    fn footprints_grow_geometrically_in_whole_nodes() {
        let o = ProbeOptions {
            min: 8 << 10,
            max: 64 << 10,
            per_doubling: 2,
            ..ProbeOptions::default()
        };
        assert_eq!(
            footprints(&o).unwrap(),
            vec![8192, 11584, 16384, 23168, 32768, 46336, 65536]
        );
        let bad = ProbeOptions { max: 4096, ..o };
        assert!(footprints(&bad)
            .unwrap_err()
            .to_string()
            .contains("at least the smallest"));
    }

    #[test]
    fn a_small_probe_runs_and_a_larger_footprint_is_not_faster_than_the_l1() {
        let o = ProbeOptions {
            min: 8 << 10,
            max: 32 << 20,
            per_doubling: 1,
            steps: 200_000,
            repeat: 1,
        };
        let mut calls = 0;
        let pts = probe(&o, &mut |done, total| {
            calls += 1;
            assert_eq!(done, calls);
            assert_eq!(total, 26, "13 footprints on two kinds of page, one round");
        })
        .unwrap();
        assert_eq!(pts.len(), 13);
        // 32M of random dependent loads cannot be as fast as 8K in the L1, on any machine.
        assert!(pts[12].ns_huge > 2.0 * pts[0].ns_huge, "{pts:?}");
        assert!(pts.iter().all(|p| p.ns_huge > 0.0 && p.ns_base > 0.0));
    }

    #[test]
    fn a_regions_frames_are_a_share_a_span_and_blocks_or_hidden() {
        let bytes = 16u64 << 20;
        let mut region = crate::native::Region::new(bytes as usize, Advice::NoHugePage).unwrap();
        for page in region.as_mut_slice::<u64>().chunks_mut(512) {
            page[0] = 1;
        }
        match frames_of(region.as_mut_ptr() as u64, bytes).unwrap() {
            Some(f) => {
                assert!((0.0..=1.0).contains(&f.neighbours), "{f:?}");
                // 4096 distinct frames: at least 16M between the lowest and the highest's
                // end, in at least 8 and at most 4096 2M blocks.
                assert!(f.span >= bytes && (8..=4096).contains(&f.blocks), "{f:?}");
            }
            None => assert!(!pagelab_sys::process::is_root(), "root sees frame numbers"),
        }
    }
}
